// The pull SQL contract of PostgreSQL (sql/pull/postgresql/*.sql), run VERBATIM against a real
// PostgreSQL: each test reads the files from the repository and binds their :named parameters
// (store::NamedSql turns them into $n; nothing else of the text changes). Mirrors QueueBox's
// PullLeaseTest and checks every rule of reference §4.7: order, one row in flight per (source,
// aggregate), other sources and aggregates not blocked, lease takeover with a new token, the fence
// of renew / complete / retry / dead, a retry lets later rows of its aggregate pass, the candidate
// bound (cand_limit) with many busy rows, SKIP LOCKED, and disjoint concurrent claimers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "contract/pull_test_support.h"
#include "store/named_sql.h"
#include "testing/env.h"
#include "testing/pg.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::ReadPullSql;
using testing::TempPgDatabase;
using ::testing::UnorderedElementsAre;

constexpr const char* kSource = "orders";

// cand_limit = LEAST(GREATEST(3 * batch, 50), 500): the caller's rule (reference §4.7).
int64_t CandLimit(int64_t batch) {
  return std::min<int64_t>(std::max<int64_t>(3 * batch, 50), 500);
}

using Row = std::map<std::string, std::optional<std::string>>;
using Params = std::vector<std::pair<std::string, std::optional<std::string>>>;

// One libpq connection that runs the repository's pull statements by name.
class Conn {
 public:
  explicit Conn(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
  }
  ~Conn() { PQfinish(conn_); }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Runs sql/pull/postgresql/<file>.sql with the parameters bound by name; the rows it returned
  // and the rows it changed.
  std::pair<std::vector<Row>, int64_t> RunFile(const std::string& file, const Params& params) {
    std::vector<std::string> names;
    for (const auto& [name, value] : params) names.push_back(name);
    auto compiled =
        store::NamedSql::Compile(ReadPullSql("postgresql", file), names, store::PgMarker);
    EXPECT_TRUE(compiled.ok()) << compiled.status().message();
    if (!compiled.ok()) return {};
    std::vector<std::optional<std::string>> values;
    for (const auto& [name, value] : params) values.push_back(value);
    return Run(compiled->sql(), values);
  }

  std::pair<std::vector<Row>, int64_t> Run(const std::string& sql,
                                           const std::vector<std::optional<std::string>>& values) {
    std::vector<const char*> raw;
    for (const auto& v : values) raw.push_back(v ? v->c_str() : nullptr);
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(raw.size()), nullptr,
                                 raw.data(), nullptr, nullptr, 0);
    const ExecStatusType st = PQresultStatus(res);
    EXPECT_TRUE(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK)
        << PQresultErrorMessage(res) << " in " << sql;
    std::vector<Row> rows;
    for (int r = 0; r < PQntuples(res); ++r) {
      Row row;
      for (int c = 0; c < PQnfields(res); ++c) {
        row[PQfname(res, c)] = PQgetisnull(res, r, c)
                                   ? std::nullopt
                                   : std::optional<std::string>(PQgetvalue(res, r, c));
      }
      rows.push_back(std::move(row));
    }
    const char* tuples = PQcmdTuples(res);
    const int64_t changed = (tuples != nullptr && *tuples != '\0') ? std::stoll(tuples) : 0;
    PQclear(res);
    return {std::move(rows), changed};
  }

  void Exec(const std::string& sql) { Run(sql, {}); }

  std::vector<Row> Claim(const std::string& source, int64_t batch, int64_t lease_ms = 60000) {
    return RunFile("claim", {{"source", source},
                             {"batch", std::to_string(batch)},
                             {"lease_ms", std::to_string(lease_ms)},
                             {"cand_limit", std::to_string(CandLimit(batch))}})
        .first;
  }
  int64_t Renew(const std::string& id, const std::optional<std::string>& token,
                int64_t lease_ms = 60000) {
    return RunFile("renew", {{"id", id}, {"token", token}, {"lease_ms", std::to_string(lease_ms)}})
        .second;
  }
  int64_t Complete(const std::string& id, const std::optional<std::string>& token) {
    return RunFile("complete", {{"id", id}, {"token", token}}).second;
  }
  int64_t Retry(const std::string& id, const std::optional<std::string>& token,
                int64_t delay_ms = 0, const std::string& error = "boom") {
    return RunFile("retry", {{"id", id},
                             {"token", token},
                             {"delay_ms", std::to_string(delay_ms)},
                             {"error", error}})
        .second;
  }
  int64_t Dead(const std::string& id, const std::optional<std::string>& token,
               const std::string& error = "gone") {
    return RunFile("dead", {{"id", id}, {"token", token}, {"error", error}}).second;
  }

 private:
  PGconn* conn_;
};

struct NewRow {
  std::string key;
  std::optional<std::string> aggregate = std::nullopt;
  std::string source = kSource;
  std::string consumption = "pull";
  std::string state = "pending";
  int64_t scheduled_ms = -1000;  // scheduled_at relative to now
  int64_t created_ms = 0;        // created_at relative to now
};

class PullSqlPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db_ = std::make_unique<TempPgDatabase>(url);
    testing::MigrateQueueBoxSchema("postgresql", db_->url());
    if (HasFatalFailure()) return;
    db_->Exec("CREATE TABLE business (k TEXT PRIMARY KEY)");
    conn_ = std::make_unique<Conn>(db_->url());
  }

  std::string Insert(const NewRow& r) {
    return db_->Scalar(
        "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, state, "
        "scheduled_at, created_at) VALUES ('" +
        r.source + "', '" + r.key + "', " + (r.aggregate ? "'" + *r.aggregate + "'" : "NULL") +
        ", '{}', '" + r.consumption + "', '" + r.state + "', clock_timestamp() + " +
        std::to_string(r.scheduled_ms) + " * INTERVAL '1 millisecond', clock_timestamp() + " +
        std::to_string(r.created_ms) + " * INTERVAL '1 millisecond') RETURNING id");
  }

  std::string Col(const std::string& id, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM inbox WHERE id = '" + id + "'");
  }
  // Moves the row's lease into the past: the lease expired (database clock).
  void ExpireLease(const std::string& id) {
    db_->Exec(
        "UPDATE inbox SET lease_expires_at = clock_timestamp() - INTERVAL '1 second' "
        "WHERE id = '" +
        id + "'");
  }

  static std::vector<std::string> Ids(const std::vector<Row>& rows) {
    std::vector<std::string> ids;
    for (const Row& r : rows) ids.push_back(*r.at("id"));
    return ids;
  }

  std::unique_ptr<TempPgDatabase> db_;
  std::unique_ptr<Conn> conn_;
};

TEST_F(PullSqlPostgresTest, ClaimsDueRowsInScheduledCreatedIdOrderUpToTheBatch) {
  const std::string third = Insert({.key = "c", .scheduled_ms = -1000});
  const std::string first = Insert({.key = "a", .scheduled_ms = -3000});
  const std::string second_late = Insert({.key = "b2", .scheduled_ms = -2000, .created_ms = 5});
  const std::string second = Insert({.key = "b1", .scheduled_ms = -2000, .created_ms = -5});
  Insert({.key = "future", .scheduled_ms = 600000});

  // batch 3 takes the first three in (scheduled_at, created_at, id) order.
  EXPECT_THAT(Ids(conn_->Claim(kSource, 3)), UnorderedElementsAre(first, second, second_late));
  EXPECT_THAT(Ids(conn_->Claim(kSource, 3)), ElementsAre(third));
  EXPECT_THAT(conn_->Claim(kSource, 3), IsEmpty());  // the future row is not due

  EXPECT_EQ(Col(first, "state"), "processing");
  EXPECT_EQ(Col(first, "claimed_at IS NOT NULL"), "t");
  EXPECT_EQ(Col(first, "attempt"), "0");
  // The lease is now + lease_ms on the database clock (60 s here).
  EXPECT_EQ(Col(first,
                "lease_expires_at > clock_timestamp() + INTERVAL '50 seconds' AND "
                "lease_expires_at <= clock_timestamp() + INTERVAL '60 seconds'"),
            "t");
}

TEST_F(PullSqlPostgresTest, ReturnsTheFieldsAndANewTokenPerRow) {
  const std::string id = db_->Scalar(
      "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, "
      "correlation_id, consumption, attempt, scheduled_at) VALUES ('orders', 'k-1', 'agg-1', "
      "'OrderPlaced', '{\"total\": 42}', '{\"x-tenant\": \"acme\"}', 'corr-1', 'pull', 2, "
      "clock_timestamp() - INTERVAL '1 second') RETURNING id");
  const auto rows = conn_->Claim(kSource, 10);
  ASSERT_EQ(rows.size(), 1u);
  const Row& row = rows[0];
  EXPECT_EQ(row.at("id"), id);
  EXPECT_EQ(row.at("source"), "orders");
  EXPECT_EQ(row.at("idempotency_key"), "k-1");
  EXPECT_EQ(row.at("aggregate_id"), "agg-1");
  EXPECT_EQ(row.at("event_type"), "OrderPlaced");
  EXPECT_EQ(row.at("payload"), "{\"total\": 42}");
  EXPECT_EQ(row.at("headers"), "{\"x-tenant\": \"acme\"}");
  EXPECT_EQ(row.at("correlation_id"), "corr-1");
  EXPECT_EQ(row.at("attempt"), "2");
  EXPECT_EQ(row.at("claim_token"), Col(id, "claim_token"));
  EXPECT_EQ(row.at("lease_expires_at"), Col(id, "lease_expires_at"));
}

TEST_F(PullSqlPostgresTest, NeverTakesPushRowsOtherSourcesOrRowsThatAreNotClaimable) {
  Insert({.key = "push", .consumption = "push"});
  Insert({.key = "other", .source = "payments"});
  Insert({.key = "done", .state = "processed"});
  Insert({.key = "dead", .state = "dead"});
  Insert({.key = "later", .scheduled_ms = 60000});
  EXPECT_THAT(conn_->Claim(kSource, 10), IsEmpty());
  // The same idempotency key on a push source and a pull source: two rows, and only the pull one
  // is ever claimed by a pull claim.
  Insert({.key = "same", .source = "hooks", .consumption = "push"});
  const std::string pull = Insert({.key = "same", .source = "pulled"});
  EXPECT_THAT(Ids(conn_->Claim("hooks", 10)), IsEmpty());
  EXPECT_THAT(Ids(conn_->Claim("pulled", 10)), ElementsAre(pull));
}

TEST_F(PullSqlPostgresTest, OneRowInFlightPerSourceAndAggregate) {
  const std::string a1 = Insert({.key = "a1", .aggregate = "A", .scheduled_ms = -3000});
  const std::string a2 = Insert({.key = "a2", .aggregate = "A", .scheduled_ms = -2000});
  Insert({.key = "a3", .aggregate = "A", .scheduled_ms = -1000});
  const std::string b1 = Insert({.key = "b1", .aggregate = "B", .scheduled_ms = -2500});
  const std::string n1 = Insert({.key = "n1"});
  const std::string n2 = Insert({.key = "n2"});

  // Two aggregates overlap; rows without an aggregate are never grouped.
  EXPECT_THAT(Ids(conn_->Claim(kSource, 10)), UnorderedElementsAre(a1, b1, n1, n2));
  // A is busy (a1 under a live lease): nothing of it, however large the batch.
  EXPECT_THAT(conn_->Claim(kSource, 10), IsEmpty());

  const std::string token = Col(a1, "claim_token");
  ASSERT_EQ(conn_->Complete(a1, token), 1);
  EXPECT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(a2));
}

TEST_F(PullSqlPostgresTest, ABusyAggregateDoesNotBlockAnotherSourceOrRowsWithoutAggregate) {
  const std::string mine = Insert({.key = "m1", .aggregate = "A"});
  Insert({.key = "m2", .aggregate = "A"});
  const std::string theirs = Insert({.key = "t1", .aggregate = "A", .source = "payments"});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(mine));

  // The same aggregate on another source is independent.
  EXPECT_THAT(Ids(conn_->Claim("payments", 10)), ElementsAre(theirs));
  // A row without an aggregate is never held back by a busy one.
  const std::string loose = Insert({.key = "loose"});
  EXPECT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(loose));
}

TEST_F(PullSqlPostgresTest, AnExpiredLeaseIsTakenOverWithANewToken) {
  const std::string id = Insert({.key = "k", .aggregate = "A"});
  Insert({.key = "k2", .aggregate = "A", .scheduled_ms = -10});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(id));
  const std::string old_token = Col(id, "claim_token");

  ExpireLease(id);
  // The expired row is the aggregate's head again: it, not its successor, is taken over.
  const auto again = conn_->Claim(kSource, 10);
  ASSERT_THAT(Ids(again), ElementsAre(id));
  const std::string new_token = *again[0].at("claim_token");
  EXPECT_NE(new_token, old_token);
  EXPECT_EQ(Col(id, "state"), "processing");
  EXPECT_EQ(Col(id, "attempt"), "0");  // a takeover spends no attempt

  // The old owner can no longer write anything.
  EXPECT_EQ(conn_->Renew(id, old_token), 0);
  EXPECT_EQ(conn_->Complete(id, old_token), 0);
  EXPECT_EQ(conn_->Retry(id, old_token), 0);
  EXPECT_EQ(conn_->Dead(id, old_token), 0);
  EXPECT_EQ(Col(id, "state"), "processing");
  EXPECT_EQ(Col(id, "claim_token"), new_token);
  EXPECT_EQ(Col(id, "last_error IS NULL"), "t");
  // The new owner can.
  EXPECT_EQ(conn_->Renew(id, new_token), 1);
}

TEST_F(PullSqlPostgresTest, AnExpiredOwnerCannotWriteEvenBeforeATakeover) {
  const std::string id = Insert({.key = "k"});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(id));
  const std::string token = Col(id, "claim_token");
  ExpireLease(id);
  EXPECT_EQ(conn_->Renew(id, token), 0);
  EXPECT_EQ(conn_->Complete(id, token), 0);
  EXPECT_EQ(conn_->Retry(id, token), 0);
  EXPECT_EQ(conn_->Dead(id, token), 0);
  EXPECT_EQ(Col(id, "state"), "processing");
  EXPECT_EQ(Col(id, "attempt"), "0");
  EXPECT_EQ(Col(id, "claim_token"), token);
}

TEST_F(PullSqlPostgresTest, TheFenceRefusesAWrongOrNullTokenAndAPendingRow) {
  const std::string id = Insert({.key = "k"});
  const std::string waiting = Insert({.key = "w", .scheduled_ms = 60000});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(id));
  const std::string stranger = "11111111-2222-4333-8444-555555555555";
  for (const std::optional<std::string>& token :
       {std::optional<std::string>(stranger), std::optional<std::string>()}) {
    EXPECT_EQ(conn_->Renew(id, token), 0);
    EXPECT_EQ(conn_->Complete(id, token), 0);
    EXPECT_EQ(conn_->Retry(id, token), 0);
    EXPECT_EQ(conn_->Dead(id, token), 0);
  }
  // A row that waits in pending has no owner: even its own NULL token does not match.
  EXPECT_EQ(conn_->Complete(waiting, std::nullopt), 0);
  EXPECT_EQ(Col(waiting, "state"), "pending");
  EXPECT_EQ(Col(id, "state"), "processing");
  EXPECT_EQ(Col(id, "attempt"), "0");
}

TEST_F(PullSqlPostgresTest, RenewMovesTheLeaseOnTheDatabaseClock) {
  const std::string id = Insert({.key = "k"});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 1, 1000)), ElementsAre(id));
  const std::string token = Col(id, "claim_token");
  ASSERT_EQ(conn_->Renew(id, token, 600000), 1);
  EXPECT_EQ(Col(id, "lease_expires_at > clock_timestamp() + INTERVAL '500 seconds'"), "t");
  EXPECT_EQ(Col(id, "claim_token"), token);
  EXPECT_EQ(Col(id, "state"), "processing");
}

TEST_F(PullSqlPostgresTest, CompleteRetryAndDeadWriteTheirStatesUnderTheRightToken) {
  const std::string done = Insert({.key = "done"});
  const std::string again = Insert({.key = "again"});
  const std::string gone = Insert({.key = "gone"});
  ASSERT_EQ(conn_->Claim(kSource, 3).size(), 3u);

  ASSERT_EQ(conn_->Complete(done, Col(done, "claim_token")), 1);
  EXPECT_EQ(Col(done, "state"), "processed");
  EXPECT_EQ(Col(done,
                "processed_at IS NOT NULL AND claim_token IS NULL AND "
                "lease_expires_at IS NULL"),
            "t");

  ASSERT_EQ(conn_->Retry(again, Col(again, "claim_token"), 120000, "timeout talking to x"), 1);
  EXPECT_EQ(Col(again, "state"), "pending");
  EXPECT_EQ(Col(again, "attempt"), "1");
  EXPECT_EQ(Col(again, "last_error"), "timeout talking to x");
  EXPECT_EQ(Col(again,
                "scheduled_at > clock_timestamp() + INTERVAL '100 seconds' AND "
                "claim_token IS NULL AND lease_expires_at IS NULL"),
            "t");

  ASSERT_EQ(conn_->Dead(gone, Col(gone, "claim_token"), "bad order"), 1);
  EXPECT_EQ(Col(gone, "state"), "dead");
  EXPECT_EQ(Col(gone, "last_error"), "bad order");
  EXPECT_EQ(Col(gone, "attempt"), "0");
  EXPECT_EQ(Col(gone, "claim_token IS NULL AND lease_expires_at IS NULL"), "t");

  // Final rows are never claimed again; the retried one waits for its delay.
  EXPECT_THAT(conn_->Claim(kSource, 10), IsEmpty());
}

TEST_F(PullSqlPostgresTest, ARetryLetsLaterRowsOfItsAggregatePass) {
  const std::string a1 = Insert({.key = "a1", .aggregate = "A", .scheduled_ms = -2000});
  const std::string a2 = Insert({.key = "a2", .aggregate = "A", .scheduled_ms = -1000});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(a1));
  ASSERT_EQ(conn_->Retry(a1, Col(a1, "claim_token"), 60000), 1);
  // a1 waits for its backoff; the aggregate is free, so a2 goes ahead of it.
  EXPECT_THAT(Ids(conn_->Claim(kSource, 10)), ElementsAre(a2));
}

TEST_F(PullSqlPostgresTest, CandLimitBoundsEachCandidateList) {
  EXPECT_EQ(CandLimit(1), 50);
  EXPECT_EQ(CandLimit(16), 50);
  EXPECT_EQ(CandLimit(20), 60);
  EXPECT_EQ(CandLimit(400), 500);

  // Aggregate A is busy and 54 more of its rows are due before B's row: with batch 1 the pending
  // list holds 50 rows, all of A, so this claim takes nothing (the scan stays bounded; B waits).
  const std::string head = Insert({.key = "a-head", .aggregate = "A", .scheduled_ms = -100000});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(head));
  for (int i = 0; i < 54; ++i) {
    Insert({.key = "a" + std::to_string(i), .aggregate = "A", .scheduled_ms = -90000 + i});
  }
  const std::string b = Insert({.key = "b", .aggregate = "B", .scheduled_ms = -1000});
  EXPECT_THAT(conn_->Claim(kSource, 1), IsEmpty());
  // batch 20 reads 60 candidates, which reach B.
  EXPECT_THAT(Ids(conn_->Claim(kSource, 20)), ElementsAre(b));

  // The expired-lease list is bounded separately: a lapsed claim is taken over even while the
  // pending list is full of A's rows.
  const std::string c = Insert({.key = "c", .aggregate = "C", .scheduled_ms = -500});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 20)), ElementsAre(c));
  ExpireLease(c);
  EXPECT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(c));
}

TEST_F(PullSqlPostgresTest, SkipsRowsThatAnotherTransactionHoldsLocked) {
  const std::string first = Insert({.key = "first", .scheduled_ms = -2000});
  const std::string second = Insert({.key = "second", .scheduled_ms = -1000});
  Conn other(db_->url());
  other.Exec("BEGIN");
  other.Exec("SELECT id FROM inbox WHERE id = '" + first + "' FOR UPDATE");
  // The claim does not wait for the lock: it skips the locked row and takes the others it
  // chose. A skipped row is not replaced (the batch is chosen before the lock), so batch 1 would
  // return nothing here.
  EXPECT_THAT(Ids(conn_->Claim(kSource, 2)), ElementsAre(second));
  EXPECT_THAT(conn_->Claim(kSource, 1), IsEmpty());
  other.Exec("ROLLBACK");
  EXPECT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(first));
}

TEST_F(PullSqlPostgresTest, CompletionAndBusinessWritesCommitOrRollBackTogether) {
  const std::string id = Insert({.key = "k"});
  ASSERT_THAT(Ids(conn_->Claim(kSource, 1)), ElementsAre(id));
  const std::string token = Col(id, "claim_token");

  conn_->Exec("BEGIN");
  conn_->Exec("INSERT INTO business VALUES ('order-1')");
  ASSERT_EQ(conn_->Complete(id, token), 1);
  conn_->Exec("ROLLBACK");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM business"), "0");
  EXPECT_EQ(Col(id, "state"), "processing");

  conn_->Exec("BEGIN");
  conn_->Exec("INSERT INTO business VALUES ('order-1')");
  ASSERT_EQ(conn_->Complete(id, token), 1);
  conn_->Exec("COMMIT");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM business"), "1");
  EXPECT_EQ(Col(id, "state"), "processed");
}

TEST_F(PullSqlPostgresTest, ConcurrentClaimersTakeDisjointRowsAndKeepAggregateOrder) {
  constexpr int kAggregates = 20;
  constexpr int kPerAggregate = 5;
  for (int a = 0; a < kAggregates; ++a) {
    for (int i = 0; i < kPerAggregate; ++i) {
      Insert({.key = "k" + std::to_string(a) + "-" + std::to_string(i),
              .aggregate = "agg-" + std::to_string(a),
              .scheduled_ms = -100000 + i * 1000 + a});
    }
  }
  for (int i = 0; i < 20; ++i) Insert({.key = "loose-" + std::to_string(i)});
  constexpr int kTotal = kAggregates * kPerAggregate + 20;

  std::vector<std::vector<std::string>> taken(4);
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, w] {
      Conn conn(db_->url());
      // Claim and complete until nothing is left to do (bounded: at most 100,000 claims).
      for (int round = 0; round < 100000; ++round) {
        const auto rows = conn.Claim(kSource, 5);
        if (rows.empty()) {
          const auto left = conn.Run("SELECT 1 FROM inbox WHERE state <> 'processed' LIMIT 1", {});
          if (left.first.empty()) break;
          continue;
        }
        for (const Row& r : rows) {
          taken[w].push_back(*r.at("id"));
          EXPECT_EQ(conn.Complete(*r.at("id"), r.at("claim_token")), 1);
        }
      }
    });
  }
  for (auto& t : workers) t.join();

  std::vector<std::string> all;
  for (const auto& ids : taken) all.insert(all.end(), ids.begin(), ids.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size()) << "a row twice";
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM inbox WHERE state = 'processed'"),
            std::to_string(kTotal));
  // Within each aggregate the rows completed one after another in scheduled order.
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM (SELECT processed_at, lag(processed_at) OVER "
                        "(PARTITION BY aggregate_id ORDER BY scheduled_at) AS before FROM inbox "
                        "WHERE aggregate_id IS NOT NULL) t WHERE before IS NOT NULL AND before >= "
                        "processed_at"),
            "0");
}

}  // namespace
}  // namespace queuebox
