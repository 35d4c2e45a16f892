// inbox_test_support.h: InboxUnderTest, the subject of the inbox store contract
// (tests/contract/inbox_store_contract_test.cc): a migrated SQLite or PostgreSQL store, or the
// in-memory twin (testing/memory_inbox_store.h) with its FakeStore outbox; plus the tables behind
// it, read and changed outside the store as another process would.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "store_test_support.h"
#include "testing/memory_inbox_store.h"

namespace queuebox::testing {

// An outbox row as the forward wrote it; numbers as text.
struct ForwardedOutboxRow {
  std::string topic;
  std::optional<std::string> key;
  std::string payload, headers, max_attempts, state, attempt;
};

class InboxUnderTest {
 public:
  virtual ~InboxUnderTest() = default;

  virtual InboxStore& inbox() = 0;
  // Another writer or claimer of the same tables (its own store and connections where the store
  // has them).
  virtual std::shared_ptr<InboxStore> OpenAnother() = 0;

  // Column `column` of inbox row `id` as text: "<null>" for NULL, "" when there is no such row.
  // Columns: source, idempotency_key, aggregate_id, event_type, correlation_id, payload, headers,
  // state, consumption, attempt, claim_token, last_error, claimed_at, processed_at,
  // lease_expires_at.
  virtual std::string Field(const std::string& id, const std::string& column) = 0;
  // scheduled_at of row `id` in UTC to the millisecond: "2000-01-01T00:00:05.000".
  virtual std::string ScheduledAtText(const std::string& id) = 0;
  // Milliseconds between two time columns (created_at, scheduled_at) of row `id` (b - a).
  virtual int64_t MsBetween(const std::string& id, const std::string& a, const std::string& b) = 0;
  // The id of the inbox row with idempotency key `key` ("" when none).
  virtual std::string IdOfKey(const std::string& key) = 0;
  // Rows of `table` ("inbox" or "outbox"), all or those whose `column` equals `value`, as text.
  virtual std::string Count(const std::string& table, const std::string& column = "",
                            const std::string& value = "") = 0;
  // The outbox rows in sequence order.
  virtual std::vector<ForwardedOutboxRow> OutboxRows() = 0;
  // True when lease_expires_at of row `id` is later than the database clock plus `seconds`.
  virtual bool LeaseLaterThanNowPlus(const std::string& id, int64_t seconds) = 0;

  // state = `state` (no other column changes).
  virtual void SetState(const std::string& id, const std::string& state) = 0;
  // lease_expires_at = the database clock plus `seconds`; nullopt: NULL.
  virtual void SetLease(const std::string& id, std::optional<int64_t> seconds) = 0;
  // created_at = the database clock plus `seconds`.
  virtual void SetCreatedAt(const std::string& id, int64_t seconds) = 0;
  // Moves the lease of `id` one hour into the past (an expired claim).
  void ExpireLease(const std::string& id) { SetLease(id, -3600); }
  // ExpireLease on every row in `processing`.
  virtual void ExpireEveryLease() = 0;
  // correlation_id = `value`.
  virtual void SetCorrelationId(const std::string& id, const std::string& value) = 0;
  // From now on, the tables refuse a second push row of one aggregate in `processing`.
  virtual void RefuseTwoInFlight() = 0;
  // From now on, an insert of an outbox row of `topic` fails (a trigger raises), so the
  // statement or transaction that makes it writes nothing.
  virtual void RefuseOutboxTopic(const std::string& topic) = 0;
};

// A migrated SQLite or PostgreSQL store and its database (StoreDb).
class SqlInboxUnderTest final : public InboxUnderTest {
 public:
  explicit SqlInboxUnderTest(const std::string& dialect) : db_(dialect) {}

  // Creates the database, opens the store and migrates it; check HasFatalFailure() after.
  void Create(const std::string& pg_url) {
    ASSERT_NO_FATAL_FAILURE(db_.CreateMigrated(pg_url, store_));
    ASSERT_NE(store_->inbox(), nullptr);
    ASSERT_TRUE(store_->inbox()->CheckSchema().ok());
  }

  StoreDb& db() { return db_; }
  OutboxStore& store() { return *store_; }

  InboxStore& inbox() override { return *store_->inbox(); }
  std::shared_ptr<InboxStore> OpenAnother() override {
    std::shared_ptr<OutboxStore> store = db_.Open();
    return std::shared_ptr<InboxStore>(store, store->inbox());
  }
  std::string Field(const std::string& id, const std::string& column) override {
    return db_.Scalar("SELECT " + column + " FROM inbox WHERE id = '" + id + "'");
  }
  std::string ScheduledAtText(const std::string& id) override {
    return Field(id, db_.pg() ? "to_char(scheduled_at AT TIME ZONE 'UTC', "
                                "'YYYY-MM-DD\"T\"HH24:MI:SS.MS')"
                              : "substr(scheduled_at, 1, 23)");
  }
  int64_t MsBetween(const std::string& id, const std::string& a, const std::string& b) override {
    std::string v =
        db_.pg() ? Field(id, "round(EXTRACT(EPOCH FROM " + b + " - " + a + ") * 1000)")
                 : Field(id, "round((julianday(" + b + ") - julianday(" + a + ")) * 86400000.0)");
    return static_cast<int64_t>(std::stod(v));
  }
  std::string IdOfKey(const std::string& key) override {
    return db_.Scalar("SELECT id FROM inbox WHERE idempotency_key = '" + key + "'");
  }
  std::string Count(const std::string& table, const std::string& column,
                    const std::string& value) override {
    const std::string where = column.empty() ? "1 = 1" : column + " = '" + value + "'";
    return db_.Scalar("SELECT count(*) FROM " + table + " WHERE " + where);
  }
  std::vector<ForwardedOutboxRow> OutboxRows() override {
    std::vector<ForwardedOutboxRow> out;
    for (const auto& r : db_.Query("SELECT topic, key, payload, headers, max_attempts, state, "
                                   "attempt FROM outbox ORDER BY sequence")) {
      out.push_back({r[0], r[1] == "<null>" ? std::nullopt : std::optional<std::string>(r[1]), r[2],
                     r[3], r[4], r[5], r[6]});
    }
    return out;
  }
  bool LeaseLaterThanNowPlus(const std::string& id, int64_t seconds) override {
    return db_.Scalar("SELECT count(*) FROM inbox WHERE id = '" + id + "' AND lease_expires_at > " +
                      db_.NowPlus(seconds)) == "1";
  }
  void SetState(const std::string& id, const std::string& state) override {
    db_.Exec("UPDATE inbox SET state = '" + state + "' WHERE id = '" + id + "'");
  }
  void SetLease(const std::string& id, std::optional<int64_t> seconds) override {
    db_.Exec("UPDATE inbox SET lease_expires_at = " + (seconds ? db_.NowPlus(*seconds) : "NULL") +
             " WHERE id = '" + id + "'");
  }
  void SetCreatedAt(const std::string& id, int64_t seconds) override {
    db_.Exec("UPDATE inbox SET created_at = " + db_.NowPlus(seconds) + " WHERE id = '" + id + "'");
  }
  void ExpireEveryLease() override {
    db_.Exec("UPDATE inbox SET lease_expires_at = " + db_.NowPlus(-3600) +
             " WHERE state = 'processing'");
  }
  void SetCorrelationId(const std::string& id, const std::string& value) override {
    db_.Exec("UPDATE inbox SET correlation_id = '" + value + "' WHERE id = '" + id + "'");
  }
  void RefuseTwoInFlight() override {
    db_.Exec(
        "CREATE UNIQUE INDEX test_one_in_flight ON inbox (aggregate_id) WHERE state = "
        "'processing' AND consumption = 'push'");
  }
  void RefuseOutboxTopic(const std::string& topic) override {
    if (db_.pg()) {
      db_.Exec(
          "CREATE FUNCTION qb_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE "
          "EXCEPTION 'refused by a trigger'; END $$");
      db_.Exec("CREATE TRIGGER qb_refuse BEFORE INSERT ON outbox FOR EACH ROW WHEN (NEW.topic = '" +
               topic + "') EXECUTE FUNCTION qb_refuse()");
    } else {
      db_.Exec("CREATE TRIGGER qb_refuse BEFORE INSERT ON outbox WHEN NEW.topic = '" + topic +
               "' BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END");
    }
  }

 private:
  StoreDb db_;
  std::unique_ptr<OutboxStore> store_;
};

// The in-memory twin (MemoryInboxStore over a FakeStore outbox); every writer shares it.
class MemoryInboxUnderTest final : public InboxUnderTest {
 public:
  InboxStore& inbox() override { return inbox_; }
  std::shared_ptr<InboxStore> OpenAnother() override {
    return std::shared_ptr<InboxStore>(std::shared_ptr<void>(), &inbox_);  // not owned
  }
  std::string Field(const std::string& id, const std::string& column) override {
    const std::optional<MemoryInboxStore::Row> r = inbox_.Get(id);
    if (!r) return "";
    const auto text = [](const std::optional<std::string>& v) { return v.value_or("<null>"); };
    const auto time = [](const std::optional<int64_t>& ms) {
      return ms.has_value() ? std::to_string(*ms) : std::string("<null>");
    };
    if (column == "source") return r->source;
    if (column == "idempotency_key") return r->idempotency_key;
    if (column == "aggregate_id") return text(r->aggregate_id);
    if (column == "event_type") return text(r->event_type);
    if (column == "correlation_id") return text(r->correlation_id);
    if (column == "payload") return r->payload;
    if (column == "headers") return r->headers;
    if (column == "state") return r->state;
    if (column == "consumption") return std::string(ConsumptionName(r->consumption));
    if (column == "attempt") return std::to_string(r->attempt);
    if (column == "claim_token") return r->claim_token.empty() ? "<null>" : r->claim_token;
    if (column == "last_error") return text(r->last_error);
    if (column == "claimed_at") return time(r->claimed_at_ms);
    if (column == "processed_at") return time(r->processed_at_ms);
    if (column == "lease_expires_at") return time(r->lease_expires_at_ms);
    ADD_FAILURE() << "MemoryInboxUnderTest has no column " << column;
    return "";
  }
  std::string ScheduledAtText(const std::string& id) override {
    const std::optional<MemoryInboxStore::Row> r = inbox_.Get(id);
    if (!r) return "";
    const std::time_t t = static_cast<std::time_t>(r->scheduled_at_ms / 1000);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[96];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03d", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<int>(r->scheduled_at_ms % 1000));
    return buf;
  }
  int64_t MsBetween(const std::string& id, const std::string& a, const std::string& b) override {
    const std::optional<MemoryInboxStore::Row> r = inbox_.Get(id);
    EXPECT_TRUE(r.has_value()) << id;
    return r ? TimeOf(*r, b) - TimeOf(*r, a) : 0;
  }
  std::string IdOfKey(const std::string& key) override {
    for (const auto& r : inbox_.All()) {
      if (r.idempotency_key == key) return r.id;
    }
    return "";
  }
  std::string Count(const std::string& table, const std::string& column,
                    const std::string& value) override {
    int64_t n = 0;
    if (table == "outbox") {
      if (!column.empty() && column != "key") ADD_FAILURE() << "no outbox column " << column;
      for (const FakeStore::Row& r : outbox_.All()) {
        if (column.empty() || r.row.key == value) ++n;
      }
      return std::to_string(n);
    }
    for (const auto& r : inbox_.All()) {
      if (column.empty() || Field(r.id, column) == value) ++n;
    }
    return std::to_string(n);
  }
  std::vector<ForwardedOutboxRow> OutboxRows() override {
    std::vector<FakeStore::Row> rows = outbox_.All();
    std::sort(rows.begin(), rows.end(), [](const FakeStore::Row& a, const FakeStore::Row& b) {
      return a.row.sequence < b.row.sequence;
    });
    std::vector<ForwardedOutboxRow> out;
    for (const FakeStore::Row& r : rows) {
      out.push_back({r.row.topic, r.row.key, r.row.payload, r.row.headers,
                     std::to_string(r.row.max_attempts), r.state, std::to_string(r.row.attempt)});
    }
    return out;
  }
  bool LeaseLaterThanNowPlus(const std::string& id, int64_t seconds) override {
    const std::optional<MemoryInboxStore::Row> r = inbox_.Get(id);
    return r && r->lease_expires_at_ms && *r->lease_expires_at_ms > inbox_.NowMs() + seconds * 1000;
  }
  void SetState(const std::string& id, const std::string& state) override {
    EXPECT_TRUE(inbox_.Update(id, [&](MemoryInboxStore::Row& r) { r.state = state; }));
  }
  void SetLease(const std::string& id, std::optional<int64_t> seconds) override {
    std::optional<int64_t> at;
    if (seconds) at = inbox_.NowMs() + *seconds * 1000;
    EXPECT_TRUE(inbox_.Update(id, [&](MemoryInboxStore::Row& r) { r.lease_expires_at_ms = at; }));
  }
  void SetCreatedAt(const std::string& id, int64_t seconds) override {
    const int64_t at = inbox_.NowMs() + seconds * 1000;
    EXPECT_TRUE(inbox_.Update(id, [&](MemoryInboxStore::Row& r) { r.created_at_ms = at; }));
  }
  void ExpireEveryLease() override {
    for (const auto& r : inbox_.All()) {
      if (r.state == kInboxStateProcessing) ExpireLease(r.id);
    }
  }
  void SetCorrelationId(const std::string& id, const std::string& value) override {
    EXPECT_TRUE(inbox_.Update(id, [&](MemoryInboxStore::Row& r) { r.correlation_id = value; }));
  }
  void RefuseTwoInFlight() override { inbox_.set_check_one_in_flight(true); }
  void RefuseOutboxTopic(const std::string& topic) override { outbox_.set_refused_topic(topic); }

 private:
  static int64_t TimeOf(const MemoryInboxStore::Row& r, const std::string& column) {
    if (column == "created_at") return r.created_at_ms;
    if (column == "scheduled_at") return r.scheduled_at_ms;
    ADD_FAILURE() << "MemoryInboxUnderTest has no time column " << column;
    return 0;
  }

  FakeStore outbox_;
  MemoryInboxStore inbox_{outbox_};
};

// The subject of test parameter `param`: "memory" (the twin), or "sqlite" and "postgresql" (a
// migrated store; PostgreSQL needs QB_TEST_PG_URL). `subject` stays empty when the test is skipped
// or has failed; `sql`, when given, receives the SQL subject.
inline void CreateInboxUnderTest(const std::string& param, std::unique_ptr<InboxUnderTest>& subject,
                                 SqlInboxUnderTest** sql = nullptr) {
  if (param == "memory") {
    subject = std::make_unique<MemoryInboxUnderTest>();
    return;
  }
  std::string pg_url;
  if (param == "postgresql") QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  auto created = std::make_unique<SqlInboxUnderTest>(param);
  created->Create(pg_url);
  if (::testing::Test::HasFatalFailure()) return;
  if (sql != nullptr) *sql = created.get();
  subject = std::move(created);
}

}  // namespace queuebox::testing
