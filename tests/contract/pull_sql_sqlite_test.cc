// The pull SQL contract of SQLite (sql/pull/sqlite/*.sql), run VERBATIM: each test prepares the
// file's text as the repository holds it and binds its :named parameters by name (SQLite binds
// :name itself). The same rules as the PostgreSQL files (reference §4.7), with the claim under
// BEGIN IMMEDIATE instead of SKIP LOCKED.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "contract/pull_test_support.h"

namespace queuebox {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr const char* kSource = "orders";

int64_t CandLimit(int64_t batch) {
  return std::min<int64_t>(std::max<int64_t>(3 * batch, 50), 500);
}

using Value = std::variant<std::monostate, int64_t, std::string>;
using Row = std::map<std::string, std::optional<std::string>>;

class Db {
 public:
  explicit Db(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 30000);
    Run("PRAGMA journal_mode=WAL", {});
  }
  ~Db() { sqlite3_close(db_); }
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  // Runs one statement with parameters bound by name (":source"); rows and rows changed.
  std::pair<std::vector<Row>, int64_t> Run(const std::string& sql,
                                           const std::map<std::string, Value>& params) {
    sqlite3_stmt* stmt = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &stmt, nullptr), SQLITE_OK)
        << sqlite3_errmsg(db_) << " in " << sql;
    if (stmt == nullptr) return {};
    for (const auto& [name, value] : params) {
      const int at = sqlite3_bind_parameter_index(stmt, (":" + name).c_str());
      EXPECT_GT(at, 0) << "no parameter :" << name;
      if (const auto* n = std::get_if<int64_t>(&value)) {
        sqlite3_bind_int64(stmt, at, *n);
      } else if (const auto* s = std::get_if<std::string>(&value)) {
        sqlite3_bind_text(stmt, at, s->c_str(), -1, SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(stmt, at);
      }
    }
    EXPECT_EQ(sqlite3_bind_parameter_count(stmt), static_cast<int>(params.size())) << sql;
    std::vector<Row> rows;
    int rc;
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
      Row row;
      for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
        const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
        row[sqlite3_column_name(stmt, c)] = t ? std::optional<std::string>(t) : std::nullopt;
      }
      rows.push_back(std::move(row));
    }
    EXPECT_EQ(rc, SQLITE_DONE) << sqlite3_errmsg(db_) << " in " << sql;
    sqlite3_finalize(stmt);
    return {std::move(rows), sqlite3_changes64(db_)};
  }
  void Exec(const std::string& sql) {
    char* error = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
        << (error ? error : "") << " in " << sql;
    sqlite3_free(error);
  }
  std::string Scalar(const std::string& sql) {
    auto rows = Run(sql, {}).first;
    if (rows.empty()) return "<none>";
    return rows[0].begin()->second.value_or("<null>");
  }

  std::vector<Row> Claim(const std::string& source, int64_t batch, int64_t lease_ms = 60000) {
    Exec("BEGIN IMMEDIATE");
    auto rows = Run(testing::ReadPullSql("sqlite", "claim"), {{"source", source},
                                                              {"batch", batch},
                                                              {"lease_ms", lease_ms},
                                                              {"cand_limit", CandLimit(batch)}})
                    .first;
    Exec("COMMIT");
    return rows;
  }
  int64_t Renew(const std::string& id, const Value& token, int64_t lease_ms = 60000) {
    return Run(testing::ReadPullSql("sqlite", "renew"),
               {{"id", id}, {"token", token}, {"lease_ms", lease_ms}})
        .second;
  }
  int64_t Complete(const std::string& id, const Value& token) {
    return Run(testing::ReadPullSql("sqlite", "complete"), {{"id", id}, {"token", token}}).second;
  }
  int64_t Retry(const std::string& id, const Value& token, int64_t delay_ms = 0,
                const std::string& error = "boom") {
    return Run(testing::ReadPullSql("sqlite", "retry"),
               {{"id", id}, {"token", token}, {"delay_ms", delay_ms}, {"error", error}})
        .second;
  }
  int64_t Dead(const std::string& id, const Value& token, const std::string& error = "gone") {
    return Run(testing::ReadPullSql("sqlite", "dead"),
               {{"id", id}, {"token", token}, {"error", error}})
        .second;
  }

 private:
  sqlite3* db_ = nullptr;
};

struct NewRow {
  std::string key;
  std::optional<std::string> aggregate = std::nullopt;
  std::string source = kSource;
  std::string consumption = "pull";
  std::string state = "pending";
  int64_t scheduled_ms = -1000;
};

std::string At(int64_t ms) {
  return "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', " + std::to_string(ms) +
         " / 1000.0))";
}

class PullSqlSqliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/qb_pull_sql_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    testing::MigrateQueueBoxSchema("sqlite", "sqlite:" + dir_ + "/inbox.db");
    if (HasFatalFailure()) return;
    db_ = std::make_unique<Db>(dir_ + "/inbox.db");
    db_->Exec("CREATE TABLE business (k TEXT PRIMARY KEY)");
  }
  void TearDown() override {
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string Insert(const NewRow& r) {
    return db_
        ->Run(
            "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, "
            "state, scheduled_at) VALUES (:source, :key, :aggregate, '{}', :consumption, "
            ":state, " +
                At(r.scheduled_ms) + ") RETURNING id",
            {{"source", r.source},
             {"key", r.key},
             {"aggregate", r.aggregate ? Value(*r.aggregate) : Value()},
             {"consumption", r.consumption},
             {"state", r.state}})
        .first[0]
        .at("id")
        .value_or("");
  }
  std::string Col(const std::string& id, const std::string& column) {
    return db_->Scalar("SELECT " + column + " FROM inbox WHERE id = '" + id + "'");
  }
  void ExpireLease(const std::string& id) {
    db_->Exec("UPDATE inbox SET lease_expires_at = " + At(-1000) + " WHERE id = '" + id + "'");
  }
  static std::vector<std::string> Ids(const std::vector<Row>& rows) {
    std::vector<std::string> ids;
    for (const Row& r : rows) ids.push_back(*r.at("id"));
    return ids;
  }

  std::string dir_;
  std::unique_ptr<Db> db_;
};

TEST_F(PullSqlSqliteTest, ClaimsDueRowsInOrderUpToTheBatchWithALeaseOnTheDatabaseClock) {
  const std::string third = Insert({.key = "c", .scheduled_ms = -1000});
  const std::string first = Insert({.key = "a", .scheduled_ms = -3000});
  const std::string second = Insert({.key = "b", .scheduled_ms = -2000});
  Insert({.key = "future", .scheduled_ms = 600000});
  Insert({.key = "push", .consumption = "push"});
  Insert({.key = "other", .source = "payments"});
  Insert({.key = "done", .state = "processed"});
  EXPECT_THAT(Ids(db_->Claim(kSource, 2)), UnorderedElementsAre(first, second));
  EXPECT_THAT(Ids(db_->Claim(kSource, 2)), ElementsAre(third));
  EXPECT_THAT(db_->Claim(kSource, 2), IsEmpty());
  EXPECT_EQ(Col(first, "state"), "processing");
  EXPECT_EQ(Col(first, "lease_expires_at > " + At(50000) + " AND lease_expires_at <= " + At(60000) +
                           " AND claimed_at IS NOT NULL"),
            "1");
}

TEST_F(PullSqlSqliteTest, OneRowInFlightPerSourceAndAggregateAndOthersNotBlocked) {
  const std::string a1 = Insert({.key = "a1", .aggregate = "A", .scheduled_ms = -3000});
  const std::string a2 = Insert({.key = "a2", .aggregate = "A", .scheduled_ms = -2000});
  const std::string b1 = Insert({.key = "b1", .aggregate = "B"});
  const std::string n1 = Insert({.key = "n1"});
  const std::string n2 = Insert({.key = "n2"});
  const std::string theirs = Insert({.key = "t1", .aggregate = "A", .source = "payments"});
  EXPECT_THAT(Ids(db_->Claim(kSource, 10)), UnorderedElementsAre(a1, b1, n1, n2));
  EXPECT_THAT(db_->Claim(kSource, 10), IsEmpty());
  EXPECT_THAT(Ids(db_->Claim("payments", 10)), ElementsAre(theirs));
  ASSERT_EQ(db_->Complete(a1, Col(a1, "claim_token")), 1);
  EXPECT_THAT(Ids(db_->Claim(kSource, 10)), ElementsAre(a2));
}

TEST_F(PullSqlSqliteTest, AnExpiredLeaseIsTakenOverWithANewTokenAndTheOldOwnerIsFenced) {
  const std::string id = Insert({.key = "k", .aggregate = "A"});
  Insert({.key = "k2", .aggregate = "A", .scheduled_ms = -10});
  ASSERT_THAT(Ids(db_->Claim(kSource, 10)), ElementsAre(id));
  const std::string old_token = Col(id, "claim_token");
  ExpireLease(id);
  // Expired, before any takeover: the old owner can write nothing.
  EXPECT_EQ(db_->Renew(id, old_token), 0);
  EXPECT_EQ(db_->Complete(id, old_token), 0);
  const auto again = db_->Claim(kSource, 10);
  ASSERT_THAT(Ids(again), ElementsAre(id));
  const std::string new_token = *again[0].at("claim_token");
  EXPECT_NE(new_token, old_token);
  EXPECT_EQ(Col(id, "attempt"), "0");
  EXPECT_EQ(db_->Retry(id, old_token), 0);
  EXPECT_EQ(db_->Dead(id, old_token), 0);
  EXPECT_EQ(db_->Retry(id, Value()), 0);
  EXPECT_EQ(db_->Complete(id, std::string("11111111-2222-4333-8444-555555555555")), 0);
  EXPECT_EQ(Col(id, "claim_token"), new_token);
  EXPECT_EQ(db_->Renew(id, new_token, 600000), 1);
  EXPECT_EQ(Col(id, "lease_expires_at > " + At(500000)), "1");
}

TEST_F(PullSqlSqliteTest, CompleteRetryAndDeadWriteTheirStates) {
  const std::string done = Insert({.key = "done", .scheduled_ms = -3000});
  const std::string again = Insert({.key = "again", .scheduled_ms = -2000});
  const std::string gone = Insert({.key = "gone", .scheduled_ms = -1000});
  ASSERT_EQ(db_->Claim(kSource, 3).size(), 3u);
  ASSERT_EQ(db_->Complete(done, Col(done, "claim_token")), 1);
  EXPECT_EQ(Col(done,
                "state || '/' || (processed_at IS NOT NULL) || (claim_token IS NULL) || "
                "(lease_expires_at IS NULL)"),
            "processed/111");
  ASSERT_EQ(db_->Retry(again, Col(again, "claim_token"), 120000, "timeout"), 1);
  EXPECT_EQ(Col(again, "state || '/' || attempt || '/' || last_error || '/' || (scheduled_at > " +
                           At(100000) + ") || (claim_token IS NULL)"),
            "pending/1/timeout/11");
  ASSERT_EQ(db_->Dead(gone, Col(gone, "claim_token"), "bad order"), 1);
  EXPECT_EQ(Col(gone, "state || '/' || attempt || '/' || last_error"), "dead/0/bad order");
  EXPECT_THAT(db_->Claim(kSource, 10), IsEmpty());
}

TEST_F(PullSqlSqliteTest, ARetryLetsLaterRowsOfItsAggregatePass) {
  const std::string a1 = Insert({.key = "a1", .aggregate = "A", .scheduled_ms = -2000});
  const std::string a2 = Insert({.key = "a2", .aggregate = "A", .scheduled_ms = -1000});
  ASSERT_THAT(Ids(db_->Claim(kSource, 10)), ElementsAre(a1));
  ASSERT_EQ(db_->Retry(a1, Col(a1, "claim_token"), 60000), 1);
  EXPECT_THAT(Ids(db_->Claim(kSource, 10)), ElementsAre(a2));
}

TEST_F(PullSqlSqliteTest, CandLimitBoundsEachCandidateList) {
  const std::string head = Insert({.key = "a-head", .aggregate = "A", .scheduled_ms = -100000});
  ASSERT_THAT(Ids(db_->Claim(kSource, 1)), ElementsAre(head));
  for (int i = 0; i < 54; ++i) {
    Insert({.key = "a" + std::to_string(i), .aggregate = "A", .scheduled_ms = -90000 + i});
  }
  const std::string b = Insert({.key = "b", .aggregate = "B", .scheduled_ms = -1000});
  EXPECT_THAT(db_->Claim(kSource, 1), IsEmpty());
  EXPECT_THAT(Ids(db_->Claim(kSource, 20)), ElementsAre(b));
  const std::string c = Insert({.key = "c", .aggregate = "C", .scheduled_ms = -500});
  ASSERT_THAT(Ids(db_->Claim(kSource, 20)), ElementsAre(c));
  ExpireLease(c);
  EXPECT_THAT(Ids(db_->Claim(kSource, 1)), ElementsAre(c));
}

TEST_F(PullSqlSqliteTest, ConcurrentClaimersOnTheirOwnConnectionsTakeDisjointRows) {
  for (int a = 0; a < 10; ++a) {
    for (int i = 0; i < 4; ++i) {
      Insert({.key = "k" + std::to_string(a) + "-" + std::to_string(i),
              .aggregate = "agg-" + std::to_string(a),
              .scheduled_ms = -100000 + i * 1000 + a});
    }
  }
  constexpr int kTotal = 40;
  std::vector<std::vector<std::string>> taken(3);
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      Db conn(dir_ + "/inbox.db");
      for (int round = 0; round < 100000; ++round) {
        const auto rows = conn.Claim(kSource, 3);
        if (rows.empty()) {
          if (conn.Scalar("SELECT count(*) FROM inbox WHERE state <> 'processed'") == "0") break;
          continue;
        }
        for (const Row& r : rows) {
          taken[w].push_back(*r.at("id"));
          EXPECT_EQ(conn.Complete(*r.at("id"), *r.at("claim_token")), 1);
        }
      }
    });
  }
  for (auto& t : workers) t.join();
  std::vector<std::string> all;
  for (const auto& ids : taken) all.insert(all.end(), ids.begin(), ids.end());
  EXPECT_EQ(all.size(), static_cast<size_t>(kTotal));
  EXPECT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size());
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM (SELECT processed_at, lag(processed_at) OVER "
                        "(PARTITION BY aggregate_id ORDER BY scheduled_at) AS before FROM inbox) "
                        "WHERE before IS NOT NULL AND before > processed_at"),
            "0");
}

TEST_F(PullSqlSqliteTest, CompletionAndBusinessWritesCommitOrRollBackTogether) {
  const std::string id = Insert({.key = "k"});
  ASSERT_THAT(Ids(db_->Claim(kSource, 1)), ElementsAre(id));
  const std::string token = Col(id, "claim_token");
  db_->Exec("BEGIN");
  db_->Exec("INSERT INTO business VALUES ('order-1')");
  ASSERT_EQ(db_->Complete(id, token), 1);
  db_->Exec("ROLLBACK");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM business"), "0");
  EXPECT_EQ(Col(id, "state"), "processing");
  db_->Exec("BEGIN");
  db_->Exec("INSERT INTO business VALUES ('order-1')");
  ASSERT_EQ(db_->Complete(id, token), 1);
  db_->Exec("COMMIT");
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM business"), "1");
  EXPECT_EQ(Col(id, "state"), "processed");
}

}  // namespace
}  // namespace queuebox
