// babelqueue_outbox_db_test.cc: the SDK's database outbox stores against real databases, the same
// cases for PostgreSQL (TempPgDatabase, QB_TEST_PG_URL) and SQLite (a temp file): the caller's
// transaction decides whether the message exists, bytes are stored and published verbatim, failed
// rows stay pending, claims keep two relays from publishing one row. Plus the PostgreSQL seen-set.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "babelqueue/outbox.h"
#include "babelqueue/postgres.h"
#include "babelqueue/sqlite.h"
#include "testing/env.h"
#include "testing/pg.h"
#include "testing/status_matchers.h"

namespace babelqueue {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// One connection of the database under test, with the few statements the tests need.
class Conn {
 public:
  virtual ~Conn() = default;
  virtual void Exec(const std::string& sql) = 0;
  virtual int64_t Count(const std::string& sql) = 0;  // first column of the first row
  virtual std::unique_ptr<OutboxStore> Store(int64_t lease_ms) = 0;
  void Begin() { Exec("BEGIN"); }
  void Commit() { Exec("COMMIT"); }
  void Rollback() { Exec("ROLLBACK"); }
  void InsertOrder(int id) { Exec("INSERT INTO orders (id) VALUES (" + std::to_string(id) + ")"); }
};

class PgConn final : public Conn {
 public:
  explicit PgConn(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    EXPECT_EQ(PQstatus(conn_), CONNECTION_OK) << PQerrorMessage(conn_);
  }
  ~PgConn() override { PQfinish(conn_); }
  void Exec(const std::string& sql) override {
    PGresult* r = PQexec(conn_, sql.c_str());
    EXPECT_TRUE(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK)
        << sql << ": " << PQerrorMessage(conn_);
    PQclear(r);
  }
  int64_t Count(const std::string& sql) override {
    PGresult* r = PQexec(conn_, sql.c_str());
    EXPECT_EQ(PQresultStatus(r), PGRES_TUPLES_OK) << sql << ": " << PQerrorMessage(conn_);
    const int64_t v = PQntuples(r) > 0 ? std::stoll(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
  }
  std::unique_ptr<OutboxStore> Store(int64_t lease_ms) override {
    auto store =
        PostgresOutboxStore::Create(conn_, {.table = kDefaultOutboxTable, .lease_ms = lease_ms});
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(*store);
  }
  PGconn* raw() { return conn_; }

 private:
  PGconn* conn_;
};

class SqliteConn final : public Conn {
 public:
  explicit SqliteConn(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
    sqlite3_busy_timeout(db_, 10000);
    Exec("PRAGMA journal_mode=WAL");
  }
  ~SqliteConn() override { sqlite3_close(db_); }
  void Exec(const std::string& sql) override {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << sql << ": " << (err ? err : "");
    sqlite3_free(err);
  }
  int64_t Count(const std::string& sql) override {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    const int64_t v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
    sqlite3_finalize(s);
    return v;
  }
  std::unique_ptr<OutboxStore> Store(int64_t lease_ms) override {
    auto store =
        SqliteOutboxStore::Create(db_, {.table = kDefaultOutboxTable, .lease_ms = lease_ms});
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(*store);
  }
  sqlite3* raw() { return db_; }

 private:
  sqlite3* db_ = nullptr;
};

// Records every publish; optionally fails one queue.
class RecordingTransport final : public Transport {
 public:
  std::string fail_queue;
  Status Publish(std::string_view queue, std::string_view body) override {
    if (queue == fail_queue) return queuebox::Unavailable("broker refused");
    std::lock_guard lock(mu_);
    bodies_.emplace_back(body);
    return Status::Ok();
  }
  std::vector<std::string> bodies() {
    std::lock_guard lock(mu_);
    return bodies_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> bodies_;
};

// Data that exercises the byte-level rules: UTF-8, escapes, U+2028, float vs int, big int.
Envelope TrickyEnvelope(const std::string& queue) {
  Json data = Json::object();
  data["title"] = "Café — naïve ☕ </script> \u2028 \"q\"\n";
  data["qty"] = 7;
  data["ratio"] = 1.0;
  data["big"] = 9007199254740993LL;
  Result<Envelope> env = Make("urn:babel:orders:created", data, {.queue = queue, .trace_id = ""});
  EXPECT_TRUE(env.ok());
  return *env;
}

RelayOptions RecordSleeps(std::vector<int64_t>* sleeps) {
  RelayOptions o;
  o.sleeper = [sleeps](int64_t ms) { sleeps->push_back(ms); };
  return o;
}

enum class Backend { kPostgres, kSqlite };

class OutboxDbTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kPostgres) {
      std::string url;
      QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
      pg_ = std::make_unique<queuebox::testing::TempPgDatabase>(url);
    } else {
      std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
      std::replace(name.begin(), name.end(), '/', '_');  // "Case/Sqlite" is not a folder
      path_ = (std::filesystem::temp_directory_path() /
               ("bq_outbox_" + std::to_string(getpid()) + "_" + name + ".db"))
                  .string();
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
    }
    conn_ = Connect();
    if (GetParam() == Backend::kPostgres) {
      ASSERT_TRUE(CreatePostgresOutboxSchema(static_cast<PgConn*>(conn_.get())->raw()).ok());
    } else {
      ASSERT_TRUE(CreateSqliteOutboxSchema(static_cast<SqliteConn*>(conn_.get())->raw()).ok());
    }
    conn_->Exec("CREATE TABLE orders (id INTEGER PRIMARY KEY)");
  }

  void TearDown() override {
    conn_.reset();
    if (!path_.empty()) {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
    }
  }

  std::unique_ptr<Conn> Connect() {
    if (GetParam() == Backend::kPostgres) return std::make_unique<PgConn>(pg_->url());
    return std::make_unique<SqliteConn>(path_);
  }

  int64_t Pending() {
    return conn_->Count("SELECT COUNT(*) FROM babelqueue_outbox WHERE status = 'pending'");
  }

  std::unique_ptr<queuebox::testing::TempPgDatabase> pg_;
  std::string path_;
  std::unique_ptr<Conn> conn_;
};

TEST_P(OutboxDbTest, RolledBackBusinessTransactionLeavesNoMessage) {
  auto store = conn_->Store(60000);
  conn_->Begin();
  conn_->InsertOrder(1);
  ASSERT_TRUE(Outbox(*store).Write(TrickyEnvelope("orders")).ok());
  conn_->Rollback();
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM orders"), 0);
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM babelqueue_outbox"), 0);
  auto relay_conn = Connect();
  auto relay_store = relay_conn->Store(60000);
  EXPECT_THAT(*relay_store->FetchUnpublished(10), IsEmpty());
}

TEST_P(OutboxDbTest, CommittedTransactionHasTheMessageAndPublishesItsExactBytes) {
  auto store = conn_->Store(60000);
  const Envelope env = TrickyEnvelope("orders");
  const std::string encoded = *Encode(env);
  conn_->Begin();
  conn_->InsertOrder(1);
  Result<std::string> id = Outbox(*store).Write(env);
  ASSERT_TRUE(id.ok()) << id.status().message();
  conn_->Commit();
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM orders"), 1);
  EXPECT_EQ(Pending(), 1);

  auto relay_conn = Connect();
  auto relay_store = relay_conn->Store(60000);
  RecordingTransport transport;
  std::vector<int64_t> sleeps;
  RelayResult r = OutboxRelay(transport, *relay_store, RecordSleeps(&sleeps)).Drain();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.published, 1);
  EXPECT_EQ(r.failed, 0);
  ASSERT_EQ(transport.bodies().size(), 1u);
  EXPECT_EQ(transport.bodies()[0], encoded);  // byte for byte
  EXPECT_EQ(Pending(), 0);
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM babelqueue_outbox WHERE id = " + *id +
                         " AND status = 'published' AND published_at IS NOT NULL"),
            1);
  EXPECT_THAT(sleeps, IsEmpty());
}

TEST_P(OutboxDbTest, SaveOutsideATransactionIsRefused) {
  auto store = conn_->Store(60000);
  Result<std::string> id = Outbox(*store).Write(TrickyEnvelope("orders"));
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(id.status().message(), HasSubstr("caller's open transaction"));
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM babelqueue_outbox"), 0);
}

TEST_P(OutboxDbTest, FailedPublishLeavesThePendingRowWithAttemptsAndError) {
  auto store = conn_->Store(60000);
  conn_->Begin();
  const std::string poison = *Outbox(*store).Write(TrickyEnvelope("poison"));
  const std::string good = *Outbox(*store).Write(TrickyEnvelope("orders"));
  conn_->Commit();

  auto relay_conn = Connect();
  auto relay_store = relay_conn->Store(60000);
  RecordingTransport transport;
  transport.fail_queue = "poison";
  std::vector<int64_t> sleeps;
  RelayOptions options = RecordSleeps(&sleeps);
  options.backoff_step_ms = 20;
  OutboxRelay relay(transport, *relay_store, options);
  RelayResult r = relay.Flush();
  ASSERT_TRUE(r.status.ok()) << r.status.message();
  EXPECT_EQ(r.published, 1);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(Pending(), 1);
  EXPECT_EQ(conn_->Count("SELECT attempts FROM babelqueue_outbox WHERE id = " + poison), 1);
  EXPECT_EQ(conn_->Count("SELECT COUNT(*) FROM babelqueue_outbox WHERE last_error = "
                         "'broker refused' AND id = " +
                         poison),
            1);
  // The failure released the claim: the next pass fetches the row again, attempts 1.
  Result<std::vector<OutboxRecord>> again = relay_store->FetchUnpublished(10);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].id, poison);
  EXPECT_EQ((*again)[0].attempts, 1);
  ASSERT_TRUE(relay_store->MarkFailed(poison, "again").ok());
  EXPECT_EQ(relay.Flush().failed, 1);
  EXPECT_THAT(sleeps, ElementsAre(20, 60));  // step * (prior attempts + 1): 0 -> 20, 2 -> 60
  EXPECT_EQ(conn_->Count("SELECT attempts FROM babelqueue_outbox WHERE id = " + poison), 3);
  (void)good;
}

TEST_P(OutboxDbTest, FetchIsOldestFirstAndUnknownIdsAreIgnored) {
  auto store = conn_->Store(60000);
  conn_->Begin();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(*store->Save("body-" + std::to_string(i), "q"));
  conn_->Commit();
  auto relay_conn = Connect();
  auto relay_store = relay_conn->Store(60000);
  Result<std::vector<OutboxRecord>> two = relay_store->FetchUnpublished(2);
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].id, ids[0]);
  EXPECT_EQ((*two)[0].body, "body-0");
  EXPECT_EQ((*two)[1].id, ids[1]);
  EXPECT_THAT(*relay_store->FetchUnpublished(0), IsEmpty());
  EXPECT_TRUE(relay_store->MarkPublished({ids[0], "not-an-id", "999999"}).ok());
  EXPECT_TRUE(relay_store->MarkFailed("not-an-id", "x").ok());
  EXPECT_EQ(Pending(), 2);
}

TEST_P(OutboxDbTest, AClaimHidesRowsFromAnotherRelayUntilItsLeaseExpires) {
  auto store = conn_->Store(60000);
  conn_->Begin();
  const std::string id = *store->Save("body", "q");
  conn_->Commit();
  auto a_conn = Connect();
  auto b_conn = Connect();
  auto a = a_conn->Store(200);  // short lease: relay A "dies" holding the row
  auto b = b_conn->Store(60000);
  ASSERT_EQ(a->FetchUnpublished(10)->size(), 1u);
  EXPECT_THAT(*b->FetchUnpublished(10), IsEmpty());
  // After A's lease expires the row is claimable again (at-least-once). Poll with a deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<OutboxRecord> got;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) {
    got = *b->FetchUnpublished(10);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].id, id);
}

TEST_P(OutboxDbTest, TwoRelaysDrainOneStoreWithoutDoublePublishing) {
  constexpr int kMessages = 300;
  auto store = conn_->Store(60000);
  std::set<std::string> encoded;
  conn_->Begin();
  for (int i = 0; i < kMessages; ++i) {
    const Envelope env = TrickyEnvelope("orders");
    encoded.insert(*Encode(env));
    ASSERT_TRUE(Outbox(*store).Write(env).ok());
  }
  conn_->Commit();

  RecordingTransport transport;  // shared: records what both relays publish
  auto run_relay = [&] {
    auto relay_conn = Connect();
    auto relay_store = relay_conn->Store(60000);
    RelayOptions options;
    options.batch_size = 7;
    options.sleeper = [](int64_t) {};
    OutboxRelay relay(transport, *relay_store, options);
    // Drain stops on an empty pass (the other relay may hold the rest): repeat until the store
    // has no pending row left.
    for (int round = 0; round < 1000; ++round) {
      RelayResult r = relay.Drain();
      EXPECT_TRUE(r.status.ok()) << r.status.message();
      if (relay_conn->Count("SELECT COUNT(*) FROM babelqueue_outbox WHERE status = 'pending'") ==
          0) {
        return;
      }
      std::this_thread::yield();
    }
  };
  std::thread first(run_relay), second(run_relay);
  first.join();
  second.join();

  const std::vector<std::string> bodies = transport.bodies();
  EXPECT_EQ(bodies.size(), static_cast<size_t>(kMessages)) << "a row was published twice or lost";
  EXPECT_EQ(std::set<std::string>(bodies.begin(), bodies.end()), encoded);
  EXPECT_EQ(Pending(), 0);
}

INSTANTIATE_TEST_SUITE_P(Stores, OutboxDbTest,
                         ::testing::Values(Backend::kPostgres, Backend::kSqlite),
                         [](const ::testing::TestParamInfo<Backend>& param_info) {
                           return param_info.param == Backend::kPostgres ? "Postgres" : "Sqlite";
                         });

TEST(PostgresSchemaTest, BodyIsBytesAndBadTableNamesAreRefused) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  queuebox::testing::TempPgDatabase db(url);
  PgConn conn(db.url());
  ASSERT_TRUE(CreatePostgresOutboxSchema(conn.raw()).ok());
  EXPECT_EQ(db.Scalar("SELECT data_type FROM information_schema.columns WHERE table_name = "
                      "'babelqueue_outbox' AND column_name = 'body'"),
            "bytea");
  Status bad = CreatePostgresOutboxSchema(conn.raw(), "x; DROP TABLE y");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(PostgresOutboxStore::Create(conn.raw(), {.table = "1bad", .lease_ms = 1}),
              StatusIs(StatusCode::kInvalidArgument,
                       "table name \"1bad\" must match [A-Za-z_][A-Za-z0-9_]* "
                       "(at most 63 characters)"));
}

TEST(PostgresSeenStoreTest, ClaimRememberForgetAndTtl) {
  std::string url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
  queuebox::testing::TempPgDatabase db(url);
  PgConn conn(db.url());
  ASSERT_TRUE(CreatePostgresSeenSchema(conn.raw()).ok());
  auto store = PostgresSeenStore::Create(conn.raw()).value();
  EXPECT_TRUE(*store->Claim("id-A"));
  EXPECT_FALSE(*store->Claim("id-A"));
  EXPECT_TRUE(*store->Seen("id-A"));
  EXPECT_FALSE(*store->Seen("id-B"));
  ASSERT_TRUE(store->Forget("id-A").ok());
  EXPECT_FALSE(*store->Seen("id-A"));
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM babelqueue_idempotency WHERE expires_at IS NULL"), "0");

  auto ttl =
      PostgresSeenStore::Create(conn.raw(), {.table = kDefaultIdempotencyTable, .ttl_ms = 2000})
          .value();
  ASSERT_TRUE(ttl->Remember("id-T").ok());
  EXPECT_TRUE(*ttl->Seen("id-T"));
  // Once expired (database clock), the id is not seen and a claim wins it again.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (*ttl->Seen("id-T") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(*ttl->Seen("id-T"));
  EXPECT_EQ(*ttl->DeleteExpired(), 1);
  EXPECT_TRUE(*ttl->Claim("id-T"));
}

}  // namespace
}  // namespace babelqueue
