// QueueBox's inbox client contract (clients/contract-tests.md, items 1-18) for the C++ pull
// worker (queuebox/inbox/pull_worker.h), run against a real PostgreSQL and a real SQLite file:
// every item is one TEST_P, instantiated for both dialects. Item 19 (SQL Server's claim lock) has
// no counterpart here. Waits are bounded and wait for a state (a row, a counter, the database
// clock), never for a guessed duration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "contract/pull_test_support.h"
#include "inbox_client/pull_sql.h"
#include "queuebox/inbox/database.h"
#include "queuebox/inbox/pull_worker.h"
#include "testing/env.h"
#include "testing/pg.h"

namespace queuebox::inbox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Ms = std::chrono::milliseconds;

constexpr const char* kSource = "orders";

// A bounded wait for a condition; false when it never held.
bool WaitUntil(const std::function<bool()>& done, Ms limit = Ms(60000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(Ms(5));
  }
  return true;
}

// One test database of either dialect: the inbox fixture, a business table `business (k)`, and a
// connection of the test's own for setup and checks.
class PullDb {
 public:
  explicit PullDb(Dialect dialect) : dialect_(dialect) {}
  ~PullDb() {
    conn_.reset();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  void Create(const std::string& pg_url) {
    if (dialect_ == Dialect::kPostgreSQL) {
      pg_ = std::make_unique<testing::TempPgDatabase>(pg_url);
      testing::MigrateQueueBoxSchema("postgresql", pg_->url());
      factory_ = PostgresConnections(pg_->url());
    } else {
      char tmpl[] = "/tmp/qb_pull_test_XXXXXX";
      ASSERT_NE(mkdtemp(tmpl), nullptr);
      dir_ = tmpl;
      testing::MigrateQueueBoxSchema("sqlite", "sqlite:" + dir_ + "/inbox.db");
      factory_ = SqliteConnections(dir_ + "/inbox.db");
    }
    if (::testing::Test::HasFatalFailure()) return;
    auto opened = factory_->Open();
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    conn_ = std::move(*opened);
    Exec("CREATE TABLE business (k TEXT PRIMARY KEY)");
  }

  // The migrated inbox renamed to `table`, with columns renamed by `rename` (default name -> new):
  // a schema of the user's own that database.inboxTableName / columnMapping.inbox describe.
  void RenameInbox(const std::string& table, const std::map<std::string, std::string>& rename) {
    Exec("ALTER TABLE inbox RENAME TO " + table);
    for (const auto& [from, to] : rename) {
      Exec("ALTER TABLE " + table + " RENAME COLUMN " + from + " TO " + to);
    }
  }

  bool pg() const { return dialect_ == Dialect::kPostgreSQL; }
  std::shared_ptr<ConnectionFactory> factory() const { return factory_; }
  // What the example program takes: the PostgreSQL URL or the SQLite file.
  std::string target() const { return pg() ? pg_->url() : dir_ + "/inbox.db"; }

  // The database's "now + ms" and a fresh UUID, in this dialect.
  std::string NowPlus(int64_t ms) const {
    return pg() ? "(clock_timestamp() + " + std::to_string(ms) + " * INTERVAL '1 millisecond')"
                : "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', " +
                      std::to_string(ms) + " / 1000.0))";
  }
  std::string NewUuid() const { return pg() ? "gen_random_uuid()" : "lower(hex(randomblob(16)))"; }

  void Exec(const std::string& sql, std::vector<SqlValue> params = {}) {
    auto r = conn_->Execute(sql, params);
    ASSERT_TRUE(r.ok()) << r.status().message() << " in " << sql;
  }
  std::optional<std::string> Scalar(const std::string& sql, std::vector<SqlValue> params = {}) {
    auto r = conn_->Query(sql, params);
    EXPECT_TRUE(r.ok()) << r.status().message() << " in " << sql;
    if (!r.ok() || r->rows.empty() || r->rows[0].empty()) return std::nullopt;
    return r->rows[0][0];
  }
  int64_t Changed(const std::string& sql, std::vector<SqlValue> params) {
    auto r = conn_->Execute(sql, params);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : -1;
  }

  struct Pending {
    std::string key;
    std::optional<std::string> aggregate = std::nullopt;
    std::optional<std::string> event_type = std::nullopt;
    std::optional<std::string> correlation = std::nullopt;
    std::string payload = "{}";
    std::string headers = "{}";
    int attempt = 0;
    int64_t scheduled_ms = -1000;
  };
  std::string Insert(const Pending& p) {
    const auto value = [](const std::optional<std::string>& v) {
      return v ? SqlValue(*v) : SqlValue();
    };
    return Scalar(
               "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, "
               "correlation_id, payload, headers, attempt, consumption, scheduled_at) VALUES "
               "($1, $2, $3, $4, $5, $6, $7, $8, 'pull', " +
                   NowPlus(p.scheduled_ms) + ") RETURNING id",
               {std::string(kSource), p.key, value(p.aggregate), value(p.event_type),
                value(p.correlation), p.payload, p.headers, int64_t{p.attempt}})
        .value_or("");
  }

  std::string State(const std::string& id) {
    return Scalar("SELECT state FROM inbox WHERE id = $1", {id}).value_or("<none>");
  }
  std::string Col(const std::string& id, const std::string& column) {
    return Scalar("SELECT " + column + " FROM inbox WHERE id = $1", {id}).value_or("<null>");
  }
  int64_t Count(const std::string& sql) { return std::stoll(Scalar(sql).value_or("-1")); }
  int64_t BusinessRows(const std::string& k) {
    return std::stoll(Scalar("SELECT count(*) FROM business WHERE k = $1", {k}).value_or("-1"));
  }
  // Another worker takes the claim: a new token and a long lease (as a takeover leaves it).
  void StealClaim(const std::string& id) {
    Exec("UPDATE inbox SET state = 'processing', claim_token = " + NewUuid() +
             ", lease_expires_at = " + NowPlus(600000) + " WHERE id = $1",
         {id});
  }
  // True once the database clock is past the row's lease.
  bool LeaseExpired(const std::string& id) {
    return Scalar("SELECT CASE WHEN lease_expires_at < " + NowPlus(0) +
                      " THEN 'yes' ELSE 'no' END FROM inbox WHERE id = $1",
                  {id}) == "yes";
  }

 private:
  Dialect dialect_;
  std::unique_ptr<testing::TempPgDatabase> pg_;
  std::string dir_;
  std::shared_ptr<ConnectionFactory> factory_;
  std::unique_ptr<Connection> conn_;
};

// A worker running on a thread of its own until Stop().
class Running {
 public:
  Running(std::shared_ptr<ConnectionFactory> factory, PullOptions options, Handler handler) {
    auto worker = PullWorker::Create(std::move(factory), std::move(options), std::move(handler));
    EXPECT_TRUE(worker.ok()) << worker.status().message();
    if (!worker.ok()) return;
    worker_ = std::move(*worker);
    thread_ = std::thread([this] { status_ = worker_->Run(); });
  }
  ~Running() { StopAndJoin(); }
  PullWorker& worker() { return *worker_; }
  int64_t finished() const {
    const auto s = worker_->stats();
    return s.completed + s.retried + s.dead + s.lost + s.abandoned;
  }
  void StopAndJoin() {
    if (!thread_.joinable()) return;
    worker_->Stop();
    thread_.join();
    EXPECT_TRUE(status_.ok()) << status_.message();
  }

 private:
  std::unique_ptr<PullWorker> worker_;
  std::thread thread_;
  Status status_;
};

class PullWorkerContractTest : public ::testing::TestWithParam<Dialect> {
 protected:
  void SetUp() override {
    std::string url;
    if (GetParam() == Dialect::kPostgreSQL) QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db_ = std::make_unique<PullDb>(GetParam());
    db_->Create(url);
  }

  PullOptions Options() const {
    PullOptions o;
    o.source = kSource;
    o.poll_interval_ms = 20;
    o.shutdown_grace_ms = 10000;
    return o;
  }

  // Runs a worker until `n` messages finished (completed, retried, dead, lost or abandoned).
  void RunUntil(int n, PullOptions options, Handler handler) {
    Running run(db_->factory(), std::move(options), std::move(handler));
    EXPECT_TRUE(WaitUntil([&] { return run.finished() >= n; })) << "the worker did not finish";
  }

  Status WriteBusiness(Transaction& tx, const std::string& k) {
    const std::string sql =
        db_->pg() ? "INSERT INTO business (k) VALUES ($1)" : "INSERT INTO business (k) VALUES (?1)";
    auto r = tx.Execute(sql, std::vector<SqlValue>{k});
    return r.ok() ? Status::Ok() : r.status();
  }

  std::unique_ptr<PullDb> db_;
};

// Item 1.
TEST_P(PullWorkerContractTest, Item01GivesTheHandlerEveryField) {
  const std::string id = db_->Insert({.key = "key-1",
                                      .aggregate = "agg-1",
                                      .event_type = "OrderPlaced",
                                      .correlation = "corr-1",
                                      .payload = R"({"id":"order-1","total":42})",
                                      .headers = R"({"x-tenant":"acme","x-n":7})",
                                      .attempt = 2});
  std::mutex mu;
  std::optional<Message> seen;
  RunUntil(1, Options(), [&](const Message& m, Transaction&, const HandlerContext&) {
    std::lock_guard lock(mu);
    seen = m;
    return Status::Ok();
  });
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->id, id);
  EXPECT_EQ(seen->source, "orders");
  EXPECT_EQ(seen->idempotency_key, "key-1");
  EXPECT_EQ(seen->aggregate_id, "agg-1");
  EXPECT_EQ(seen->event_type, "OrderPlaced");
  EXPECT_EQ(seen->correlation_id, "corr-1");
  EXPECT_EQ(seen->attempt, 2);
  EXPECT_THAT(seen->payload, HasSubstr("\"total\":"));
  EXPECT_THAT(seen->payload, HasSubstr("\"order-1\""));
  EXPECT_EQ(seen->headers,
            (std::map<std::string, std::string>{{"x-tenant", "acme"}, {"x-n", "7"}}));
}

// Item 1, the nullable fields.
TEST_P(PullWorkerContractTest, Item01GivesTheNullableFieldsAsEmpty) {
  db_->Insert({.key = "key-null"});
  std::optional<Message> seen;
  RunUntil(1, Options(), [&](const Message& m, Transaction&, const HandlerContext&) {
    seen = m;
    return Status::Ok();
  });
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(seen->aggregate_id.has_value());
  EXPECT_FALSE(seen->event_type.has_value());
  EXPECT_FALSE(seen->correlation_id.has_value());
  EXPECT_EQ(seen->attempt, 0);
  EXPECT_TRUE(seen->headers.empty());
  EXPECT_EQ(seen->payload, "{}");
}

// Item 2.
TEST_P(PullWorkerContractTest, Item02CommitsTheWritesAndTheCompletionTogether) {
  const std::string id = db_->Insert({.key = "key-2"});
  RunUntil(1, Options(), [&](const Message&, Transaction& tx, const HandlerContext&) {
    return WriteBusiness(tx, "row-2");
  });
  EXPECT_EQ(db_->State(id), "processed");
  EXPECT_NE(db_->Col(id, "processed_at"), "<null>");
  EXPECT_EQ(db_->BusinessRows("row-2"), 1);
}

// Item 3.
TEST_P(PullWorkerContractTest, Item03LeavesNoWriteBehindWhenTheHandlerFails) {
  const std::string id = db_->Insert({.key = "key-3"});
  RunUntil(1, Options(), [&](const Message&, Transaction& tx, const HandlerContext&) {
    Status written = WriteBusiness(tx, "row-3");
    return written.ok() ? Internal("the handler failed") : written;
  });
  EXPECT_EQ(db_->BusinessRows("row-3"), 0);
  EXPECT_EQ(db_->State(id), "pending");  // retried, not completed
}

// Item 4.
TEST_P(PullWorkerContractTest, Item04RollsTheWritesBackWhenTheCompletionChangesNoRow) {
  const std::string id = db_->Insert({.key = "key-4"});
  PullOptions o = Options();
  o.lease_ms = 600000;  // no renewal notices the theft: the completion must
  Running run(db_->factory(), o, [&](const Message& m, Transaction& tx, const HandlerContext&) {
    db_->StealClaim(m.id);
    return WriteBusiness(tx, "row-4");
  });
  ASSERT_TRUE(WaitUntil([&] { return run.finished() >= 1; }));
  run.StopAndJoin();
  EXPECT_EQ(db_->BusinessRows("row-4"), 0);
  EXPECT_EQ(db_->State(id), "processing");  // the thief still owns it
  EXPECT_EQ(run.worker().stats().completed, 0);
  EXPECT_EQ(run.worker().stats().lost, 1);
}

// Item 5.
TEST_P(PullWorkerContractTest, Item05NeverGivesOneMessageToTwoWorkers) {
  constexpr int kTotal = 20;
  for (int i = 0; i < kTotal; ++i) db_->Insert({.key = "key-5-" + std::to_string(i)});
  std::mutex mu;
  std::map<std::string, int> seen;
  const Handler handle = [&](const Message& m, Transaction&, const HandlerContext&) {
    std::lock_guard lock(mu);
    ++seen[m.id];
    return Status::Ok();
  };
  PullOptions o = Options();
  o.batch_size = 3;
  {
    Running a(db_->factory(), o, handle);
    Running b(db_->factory(), o, handle);
    EXPECT_TRUE(WaitUntil([&] { return a.finished() + b.finished() >= kTotal; }));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(kTotal));
  for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
  EXPECT_EQ(db_->Count("SELECT count(*) FROM inbox WHERE state = 'processed'"), kTotal);
}

// Item 6.
TEST_P(PullWorkerContractTest, Item06RenewalKeepsOwnershipAcrossAHandlerLongerThanTheLease) {
  const std::string id = db_->Insert({.key = "key-6"});
  PullOptions o = Options();
  o.lease_ms = 3000;  // renewed every second: a renewal 2 s late (a stalled TSan run) still holds
  auto clock = db_->factory()->Open();  // the handler reads the database clock apart from its tx
  ASSERT_TRUE(clock.ok());
  std::string first_lease;
  RunUntil(1, o, [&](const Message& m, Transaction& tx, const HandlerContext& context) {
    const std::string sql = db_->pg() ? "SELECT lease_expires_at FROM inbox WHERE id = $1"
                                      : "SELECT lease_expires_at FROM inbox WHERE id = ?1";
    first_lease = (*clock)->Query(sql, std::vector<SqlValue>{m.id})->rows[0][0].value_or("");
    // Work until the database clock is well past the lease the claim gave.
    const std::string past =
        db_->pg() ? "SELECT clock_timestamp() > $1::timestamptz + INTERVAL '2000 milliseconds'"
                  : "SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2.000 seconds') > ?1";
    bool passed = false;
    for (int i = 0; i < 1000 && !passed && !context.cancelled(); ++i) {
      auto r = (*clock)->Query(past, std::vector<SqlValue>{first_lease});
      passed = r.ok() && (r->rows[0][0] == "t" || r->rows[0][0] == "1");
      if (!passed) context.WaitFor(20);
    }
    if (!passed) return Internal("the database clock never passed the lease");
    return WriteBusiness(tx, "row-6");
  });
  EXPECT_EQ(db_->State(id), "processed");
  EXPECT_EQ(db_->BusinessRows("row-6"), 1);
}

// Item 7.
TEST_P(PullWorkerContractTest, Item07ALostRenewalCancelsTheHandlerAndCompletesNothing) {
  const std::string id = db_->Insert({.key = "key-7"});
  PullOptions o = Options();
  o.lease_ms = 600;
  std::atomic<bool> cancelled = false;
  RunUntil(1, o, [&](const Message& m, Transaction& tx, const HandlerContext& context) {
    db_->StealClaim(m.id);
    cancelled = context.WaitFor(30000);
    return cancelled ? Aborted("cancelled") : WriteBusiness(tx, "row-7");
  });
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(db_->State(id), "processing");  // the thief's
  EXPECT_EQ(db_->Col(id, "attempt"), "0");
  EXPECT_EQ(db_->BusinessRows("row-7"), 0);
}

// Item 8.
TEST_P(PullWorkerContractTest, Item08AnAbandonedMessageReturnsAfterTheLease) {
  const std::string id = db_->Insert({.key = "key-8"});
  PullOptions o = Options();
  o.lease_ms = 1000;
  o.shutdown_grace_ms = 0;  // a killed worker gives no grace
  std::atomic<bool> reached = false;
  {
    Running run(db_->factory(), o, [&](const Message&, Transaction&, const HandlerContext& c) {
      reached = true;
      c.WaitFor(60000);
      return Aborted("stopped");
    });
    ASSERT_TRUE(WaitUntil([&] { return reached.load(); }));
    run.StopAndJoin();
    EXPECT_EQ(run.worker().stats().abandoned, 1);
  }
  EXPECT_EQ(db_->State(id), "processing");
  EXPECT_EQ(db_->Col(id, "attempt"), "0");  // the stop spent no attempt
  ASSERT_TRUE(WaitUntil([&] { return db_->LeaseExpired(id); }, Ms(10000)));

  std::string returned;
  RunUntil(1, Options(), [&](const Message& m, Transaction&, const HandlerContext&) {
    returned = m.id;
    return Status::Ok();
  });
  EXPECT_EQ(returned, id);
  EXPECT_EQ(db_->State(id), "processed");
}

// Item 9.
TEST_P(PullWorkerContractTest, Item09ARetryIncrementsTheAttemptAndAppliesTheBackoff) {
  const std::string id = db_->Insert({.key = "key-9"});
  PullOptions o = Options();
  o.retry_policy = DefaultRetryPolicy(5, 60000, 60000, 0.0);
  RunUntil(1, o, [](const Message&, Transaction&, const HandlerContext&) {
    return Unavailable("the downstream timed out");
  });
  EXPECT_EQ(db_->State(id), "pending");
  EXPECT_EQ(db_->Col(id, "attempt"), "1");
  EXPECT_EQ(db_->Col(id, "last_error"), "the downstream timed out");
  // Due again about a minute from now (database clock).
  EXPECT_EQ(db_->Scalar("SELECT CASE WHEN scheduled_at > " + db_->NowPlus(30000) +
                            " THEN 'later' ELSE 'soon' END FROM inbox WHERE id = $1",
                        {id}),
            "later");
}

// Item 10.
TEST_P(PullWorkerContractTest, Item10ReachesTheDeadLetterAtTheCeiling) {
  const std::string id = db_->Insert({.key = "key-10", .attempt = 3});
  PullOptions o = Options();
  o.retry_policy = DefaultRetryPolicy(3, 1000, 1000, 0.0);
  RunUntil(1, o, [](const Message&, Transaction&, const HandlerContext&) {
    return Internal("order 17 is invalid");
  });
  EXPECT_EQ(db_->State(id), "dead");
  EXPECT_EQ(db_->Col(id, "last_error"), "order 17 is invalid");
  EXPECT_EQ(db_->Col(id, "attempt"), "3");
}

// Item 11.
TEST_P(PullWorkerContractTest, Item11AStaleTokenChangesNothing) {
  const std::string id = db_->Insert({.key = "key-11"});
  db_->StealClaim(id);
  const std::string before = db_->Col(id, "claim_token");
  const std::string stale = "11111111-2222-4333-8444-555555555555";
  const auto render = [&](internal::PullStatement s) {
    auto r =
        internal::RenderPullSql(internal::PullSqlText(GetParam(), s), GetParam(), InboxSchema{});
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  };
  const auto complete = render(internal::PullStatement::kComplete);
  const auto retry = render(internal::PullStatement::kRetry);
  const auto dead = render(internal::PullStatement::kDead);
  EXPECT_EQ(db_->Changed(complete.sql(), *complete.Bind({{"id", id}, {"token", stale}})), 0);
  EXPECT_EQ(db_->Changed(retry.sql(), *retry.Bind({{"id", id},
                                                   {"token", stale},
                                                   {"delay_ms", int64_t{1000}},
                                                   {"error", std::string("no")}})),
            0);
  EXPECT_EQ(db_->Changed(dead.sql(),
                         *dead.Bind({{"id", id}, {"token", stale}, {"error", std::string("no")}})),
            0);
  EXPECT_EQ(db_->State(id), "processing");
  EXPECT_EQ(db_->Col(id, "attempt"), "0");
  EXPECT_EQ(db_->Col(id, "last_error"), "<null>");
  EXPECT_EQ(db_->Col(id, "claim_token"), before);
}

// Item 12.
TEST_P(PullWorkerContractTest, Item12AStopClaimsNothingNewAndAbandonsRatherThanCompletes) {
  const std::string first = db_->Insert({.key = "key-12-a", .scheduled_ms = -2000});
  const std::string second = db_->Insert({.key = "key-12-b", .scheduled_ms = -1000});
  PullOptions o = Options();
  o.batch_size = 1;
  o.lease_ms = 60000;
  o.shutdown_grace_ms = 0;
  std::atomic<bool> reached = false;
  Running run(db_->factory(), o, [&](const Message&, Transaction&, const HandlerContext& c) {
    reached = true;
    c.WaitFor(60000);
    return Status::Ok();  // even an OK after the cancellation completes nothing
  });
  ASSERT_TRUE(WaitUntil([&] { return reached.load(); }));
  const int64_t claims = run.worker().stats().claims;
  run.StopAndJoin();
  EXPECT_EQ(run.worker().stats().claims, claims) << "a claim ran after the stop";
  EXPECT_EQ(run.worker().stats().completed, 0);
  EXPECT_EQ(db_->State(first), "processing");
  EXPECT_EQ(db_->State(second), "pending");
  EXPECT_EQ(db_->Col(first, "attempt"), "0");
}

// Item 13.
TEST_P(PullWorkerContractTest, Item13WorksAgainstMappedTableAndColumnNames) {
  const std::map<std::string, std::string> rename = {{"id", "msg_id"},
                                                     {"source", "src"},
                                                     {"state", "status"},
                                                     {"claim_token", "owner"},
                                                     {"lease_expires_at", "until_at"},
                                                     {"scheduled_at", "due_at"},
                                                     {"payload", "body"},
                                                     {"attempt", "tries"},
                                                     {"aggregate_id", "agg"}};
  db_->RenameInbox("app_inbox", rename);
  const std::string id =
      db_->Scalar(
             "INSERT INTO app_inbox (src, idempotency_key, body, consumption) VALUES "
             "('orders', 'key-13', '{\"a\":1}', 'pull') RETURNING msg_id")
          .value_or("");
  PullOptions o = Options();
  o.schema.table = "app_inbox";
  o.schema.id = "msg_id";
  o.schema.source = "src";
  o.schema.state = "status";
  o.schema.claim_token = "owner";
  o.schema.lease_expires_at = "until_at";
  o.schema.scheduled_at = "due_at";
  o.schema.payload = "body";
  o.schema.attempt = "tries";
  o.schema.aggregate_id = "agg";
  std::string seen;
  RunUntil(1, o, [&](const Message& m, Transaction& tx, const HandlerContext&) {
    seen = m.id + " " + m.payload;
    return WriteBusiness(tx, "row-13");
  });
  EXPECT_THAT(seen, HasSubstr(id));
  EXPECT_EQ(db_->Scalar("SELECT status FROM app_inbox WHERE msg_id = $1", {id}), "processed");
  EXPECT_EQ(db_->BusinessRows("row-13"), 1);
}

// Item 14: the example of docs/sdk.md (examples/inbox_pull_example.cc, built with the project)
// runs unchanged against a migrated inbox.
TEST_P(PullWorkerContractTest, Item14TheDocumentedExampleRuns) {
  const std::string a = db_->Insert({.key = "key-14-a", .payload = R"({"id":"a"})"});
  const std::string b = db_->Insert({.key = "key-14-b", .payload = R"({"id":"b"})"});
  const std::string command =
      std::string(QB_INBOX_PULL_EXAMPLE) + " '" + db_->target() + "' --until-idle 2>&1";
  FILE* out = popen(command.c_str(), "r");
  ASSERT_NE(out, nullptr);
  std::string printed;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, out) != nullptr) printed += buffer;
  const int status = pclose(out);
  EXPECT_EQ(status, 0) << printed;
  EXPECT_THAT(printed, HasSubstr("handled key-14-a (attempt 0)"));
  EXPECT_THAT(printed, HasSubstr("completed 2, retried 0, dead 0"));
  EXPECT_EQ(db_->State(a), "processed");
  EXPECT_EQ(db_->State(b), "processed");
  EXPECT_EQ(db_->Count("SELECT count(*) FROM handled_orders"), 2);
}

// Item 15.
TEST_P(PullWorkerContractTest, Item15KeepsASecretOutOfLastErrorAndTheLog) {
  const std::string id = db_->Insert({.key = "key-15"});
  std::mutex mu;
  std::vector<std::string> lines;
  PullOptions o = Options();
  o.logger = [&](LogLevel, const std::string& text) {
    std::lock_guard lock(mu);
    lines.push_back(text);
  };
  RunUntil(1, o, [](const Message&, Transaction&, const HandlerContext&) {
    return Unavailable(
        "connect failed: Host=db;Password=hunter2;Database=queuebox via "
        "postgresql://app:hunter2@db:5432/x");
  });
  const std::string stored = db_->Col(id, "last_error");
  EXPECT_THAT(stored, HasSubstr("connect failed"));
  EXPECT_THAT(stored, Not(HasSubstr("hunter2")));
  std::lock_guard lock(mu);
  ASSERT_FALSE(lines.empty());
  for (const auto& line : lines) EXPECT_THAT(line, Not(HasSubstr("hunter2"))) << line;
}

// Item 15, the connection string: a failed connection names no password.
TEST(PullWorkerSecretsTest, Item15AConnectionErrorNamesNoPassword) {
  auto factory =
      PostgresConnections("postgresql://app:hunter2@127.0.0.1:1/inbox?connect_timeout=2");
  auto opened = factory->Open();
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(opened.status().message(), Not(HasSubstr("hunter2")));

  std::mutex mu;
  std::vector<std::string> lines;
  PullOptions o;
  o.source = kSource;
  o.poll_interval_ms = 1;
  o.logger = [&](LogLevel, const std::string& text) {
    std::lock_guard lock(mu);
    lines.push_back(text);
  };
  auto worker = PullWorker::Create(
      PostgresConnections("host=127.0.0.1 port=1 password=hunter2 connect_timeout=2"), o,
      [](const Message&, Transaction&, const HandlerContext&) { return Status::Ok(); });
  ASSERT_TRUE(worker.ok());
  std::thread t([&] { (void)(*worker)->Run(); });
  EXPECT_TRUE(WaitUntil([&] {
    std::lock_guard lock(mu);
    return lines.size() >= 2;
  }));
  (*worker)->Stop();
  t.join();
  std::lock_guard lock(mu);
  EXPECT_THAT(lines[0], HasSubstr("The pull claim of source 'orders' failed"));
  for (const auto& line : lines) EXPECT_THAT(line, Not(HasSubstr("hunter2"))) << line;
}

// A factory whose connections count the claim statements they run.
class CountingFactory final : public ConnectionFactory {
 public:
  explicit CountingFactory(std::shared_ptr<ConnectionFactory> inner) : inner_(std::move(inner)) {}
  Dialect dialect() const override { return inner_->dialect(); }
  Result<std::unique_ptr<Connection>> Open() override {
    auto conn = inner_->Open();
    if (!conn.ok()) return conn.status();
    return std::unique_ptr<Connection>(new Counting(std::move(*conn), claims));
  }
  std::atomic<int64_t> claims = 0;

 private:
  class Counting final : public Connection {
   public:
    Counting(std::unique_ptr<Connection> c, std::atomic<int64_t>& n) : c_(std::move(c)), n_(n) {}
    Dialect dialect() const override { return c_->dialect(); }
    Result<int64_t> Execute(std::string_view sql, std::span<const SqlValue> p) override {
      return c_->Execute(sql, p);
    }
    Result<SqlRows> Query(std::string_view sql, std::span<const SqlValue> p) override {
      if (sql.find("WITH candidates") != std::string_view::npos) ++n_;
      return c_->Query(sql, p);
    }
    Status Begin(bool w) override { return c_->Begin(w); }
    Status Commit() override { return c_->Commit(); }
    Status Rollback() override { return c_->Rollback(); }
    void Interrupt() override { c_->Interrupt(); }
    bool healthy() const override { return c_->healthy(); }

   private:
    std::unique_ptr<Connection> c_;
    std::atomic<int64_t>& n_;
  };
  std::shared_ptr<ConnectionFactory> inner_;
};

// Item 16: one claim per poll interval on an empty table, whatever the clock does; the worker
// waits the configured interval after every empty claim.
TEST_P(PullWorkerContractTest, Item16DoesNotPollInAStormWhenTheClaimIsEmpty) {
  auto counting = std::make_shared<CountingFactory>(db_->factory());
  PullOptions o = Options();
  o.poll_interval_ms = 200;
  std::mutex mu;
  std::vector<int64_t> waits;
  PullWorker* self = nullptr;
  o.on_idle = [&](int64_t ms) {
    std::lock_guard lock(mu);
    waits.push_back(ms);
    if (waits.size() == 5) self->Stop();
  };
  auto worker = PullWorker::Create(
      counting, o,
      [](const Message&, Transaction&, const HandlerContext&) { return Status::Ok(); });
  ASSERT_TRUE(worker.ok());
  self = worker->get();
  ASSERT_TRUE((*worker)->Run().ok());
  EXPECT_EQ(waits, std::vector<int64_t>(5, 200));
  EXPECT_EQ(counting->claims.load(), 5);
  EXPECT_EQ((*worker)->stats().claims, 5);
}

// Item 17.
TEST_P(PullWorkerContractTest, Item17NeverHoldsMoreThanTheBatch) {
  constexpr int kTotal = 12;
  for (int i = 0; i < kTotal; ++i) db_->Insert({.key = "key-17-" + std::to_string(i)});
  PullOptions o = Options();
  o.batch_size = 3;
  o.max_concurrency = 8;  // capped at the batch
  auto probe = db_->factory()->Open();
  ASSERT_TRUE(probe.ok());
  std::mutex mu;
  int in_flight = 0, high = 0;
  int64_t held_high = 0;
  RunUntil(kTotal, o, [&](const Message&, Transaction&, const HandlerContext& c) {
    {
      std::lock_guard lock(mu);
      high = std::max(high, ++in_flight);
      auto held = (*probe)->Query("SELECT count(*) FROM inbox WHERE state = 'processing'", {});
      if (held.ok()) {
        held_high = std::max<int64_t>(held_high, std::stoll(held->rows[0][0].value_or("0")));
      }
    }
    c.WaitFor(20);
    std::lock_guard lock(mu);
    --in_flight;
    return Status::Ok();
  });
  EXPECT_LE(high, 3);
  EXPECT_LE(held_high, 3);
  EXPECT_GE(high, 1);
  EXPECT_EQ(db_->Count("SELECT count(*) FROM inbox WHERE state = 'processed'"), kTotal);
}

// Item 18: one aggregate never runs two handlers at once, even under two workers.
TEST_P(PullWorkerContractTest, Item18OneAggregateNeverRunsTwoHandlersAtOnce) {
  for (int i = 0; i < 4; ++i) {
    db_->Insert({.key = "key-18-" + std::to_string(i),
                 .aggregate = "agg-1",
                 .scheduled_ms = -4000 + i * 100});
  }
  PullOptions o = Options();
  o.batch_size = 4;
  o.max_concurrency = 4;
  std::mutex mu;
  int running = 0, most = 0;
  std::vector<std::string> order;
  const Handler handle = [&](const Message& m, Transaction&, const HandlerContext& c) {
    {
      std::lock_guard lock(mu);
      most = std::max(most, ++running);
      order.push_back(m.idempotency_key);
    }
    c.WaitFor(50);  // a window in which a second handler of the aggregate would show
    std::lock_guard lock(mu);
    --running;
    return Status::Ok();
  };
  {
    Running a(db_->factory(), o, handle);
    Running b(db_->factory(), o, handle);
    EXPECT_TRUE(WaitUntil([&] { return a.finished() + b.finished() >= 4; }));
  }
  EXPECT_EQ(most, 1);
  EXPECT_EQ(order, (std::vector<std::string>{"key-18-0", "key-18-1", "key-18-2", "key-18-3"}));
}

// Item 18, the other half: two aggregates DO run at once (the reservation is per aggregate).
// Each handler waits until a handler of the other aggregate runs; without overlap neither would
// see the other and the test fails on its bounded wait.
TEST_P(PullWorkerContractTest, Item18TwoAggregatesDoRunAtOnce) {
  for (int i = 0; i < 2; ++i) {
    db_->Insert({.key = "key-18a-" + std::to_string(i), .aggregate = "agg-1"});
    db_->Insert({.key = "key-18b-" + std::to_string(i), .aggregate = "agg-2"});
  }
  PullOptions o = Options();
  o.batch_size = 4;
  o.max_concurrency = 4;
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int> running;
  int overlapped = 0;
  const Handler handle = [&](const Message& m, Transaction&, const HandlerContext&) {
    const std::string mine = *m.aggregate_id;
    const std::string other = mine == "agg-1" ? "agg-2" : "agg-1";
    std::unique_lock lock(mu);
    ++running[mine];
    cv.notify_all();
    const bool met =
        cv.wait_for(lock, Ms(20000), [&] { return running[other] > 0 || overlapped > 0; });
    if (met) ++overlapped;
    --running[mine];
    cv.notify_all();
    return Status::Ok();
  };
  {
    Running a(db_->factory(), o, handle);
    Running b(db_->factory(), o, handle);
    EXPECT_TRUE(WaitUntil([&] { return a.finished() + b.finished() >= 4; }));
  }
  EXPECT_GE(overlapped, 2);
  EXPECT_EQ(db_->Count("SELECT count(*) FROM inbox WHERE state = 'processed'"), 4);
}

// Options are checked, each error naming its option.
TEST(PullWorkerOptionsTest, RefusesBadOptionsNamingThem) {
  const Handler ok = [](const Message&, Transaction&, const HandlerContext&) {
    return Status::Ok();
  };
  const auto error = [&](const std::function<void(PullOptions&)>& change) {
    PullOptions o;
    o.source = "orders";
    change(o);
    auto w = PullWorker::Create(SqliteConnections("/tmp/unused.db"), o, ok);
    return w.ok() ? std::string("ok") : w.status().message();
  };
  EXPECT_EQ(error([](PullOptions&) {}), "ok");
  EXPECT_THAT(error([](PullOptions& o) { o.source = ""; }), HasSubstr("PullOptions.source"));
  EXPECT_THAT(error([](PullOptions& o) { o.batch_size = 0; }), HasSubstr("batch_size"));
  EXPECT_THAT(error([](PullOptions& o) { o.lease_ms = 2; }), HasSubstr("lease_ms"));
  EXPECT_THAT(error([](PullOptions& o) { o.max_concurrency = 0; }), HasSubstr("max_concurrency"));
  EXPECT_THAT(error([](PullOptions& o) { o.poll_interval_ms = 0; }), HasSubstr("poll_interval"));
  EXPECT_THAT(error([](PullOptions& o) { o.shutdown_grace_ms = -1; }), HasSubstr("shutdown_grace"));
  EXPECT_THAT(error([](PullOptions& o) { o.schema.table = "x y"; }),
              HasSubstr("InboxSchema.table"));
  PullOptions named;
  named.source = "s";
  auto no_handler = PullWorker::Create(SqliteConnections("/tmp/unused.db"), named, Handler{});
  EXPECT_EQ(no_handler.status().code(), StatusCode::kInvalidArgument);
  // QueueBox's defaults.
  const PullOptions d;
  EXPECT_EQ(d.batch_size, 10);
  EXPECT_EQ(d.lease_ms, 30000);
  EXPECT_EQ(d.max_concurrency, 1);
  EXPECT_EQ(d.poll_interval_ms, 1000);
  EXPECT_EQ(d.shutdown_grace_ms, 30000);
  EXPECT_EQ(d.schema.table, "inbox");
}

INSTANTIATE_TEST_SUITE_P(Dialects, PullWorkerContractTest,
                         ::testing::Values(Dialect::kPostgreSQL, Dialect::kSQLite),
                         [](const ::testing::TestParamInfo<Dialect>& dialect) {
                           return dialect.param == Dialect::kPostgreSQL ? "postgresql" : "sqlite";
                         });

}  // namespace
}  // namespace queuebox::inbox
