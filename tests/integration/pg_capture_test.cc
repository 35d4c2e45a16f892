// Change capture by logical replication (store/postgres/capture/pg_capture.h) against a real
// PostgreSQL with wal_level=logical: inserts into the outbox wake, updates, deletes and other
// tables do not; the slot's confirmed position advances; a restarted engine resumes from the
// recorded position; a second owner, files of another instance, changed settings and a dropped
// slot stop capture with their reasons; a PostgreSQL restart is survived by reconnecting; a
// stopped capture's slot reports the WAL it retains. Also the capture-mode wait
// (PostgresOutboxStore::NextWakeDelayMs).
//
// Each wait below has a deadline of tens of seconds that only bounds a failing run: the
// assertions are about outcomes and order (the stream is ordered, so a marker insert's wake
// proves every earlier change was read), never about how fast something happened.
#include "store/postgres/capture/pg_capture.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "queuebox/store.h"
#include "store/open_store.h"
#include "store/postgres/postgres_store.h"
#include "testing/env.h"
#include "testing/log_capture.h"
#include "testing/pg.h"
#include "testing/pg_server.h"

namespace queuebox::store::capture {
namespace {

using ::queuebox::testing::LogCapture;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using testing::TempPgDatabase;

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds timeout = 60s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return done();
}

std::string TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "qbcapture.XXXXXX").string();
  char* p = mkdtemp(tmpl.data());
  return p != nullptr ? p : "";
}

class PgCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    db_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_EQ(db_->Scalar("SHOW wal_level"), "logical")
        << "the test server needs wal_level=logical";
    Migrate(db_->url());
    db_->Exec("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox");
    root_ = TempDir();
    // Slots are named cluster-wide: one per test database.
    slot_ = db_->name();
  }
  void TearDown() override {
    engines_.clear();  // stop them before the database (and its slot) goes
    db_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  static void Migrate(const std::string& url) {
    DatabaseConfig config;
    config.type = "postgresql";
    config.url = url;
    config.connection_timeout_ms = 5000;
    auto store = OpenStore(config);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto report = (*store)->Migrate(std::nullopt);
    ASSERT_TRUE(report.ok()) << report.status().ToString();
  }

  PgCaptureOptions Options(const std::string& state = "state") {
    PgCaptureOptions o;
    o.state_directory = root_ + "/" + state;
    o.slot = slot_;
    o.connection.url = db_->url();
    o.connection.connection_timeout_ms = 5000;
    o.reconnect_initial_ms = 200;
    o.reconnect_cap_ms = 1000;
    o.status_interval = 200ms;
    return o;
  }

  PgCapture* Start(PgCaptureOptions o) {
    auto created = PgCapture::Create(std::move(o), [this] { ++wakes_; });
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (!created.ok()) return nullptr;
    EXPECT_TRUE((*created)->Start().ok());
    engines_.push_back(std::move(created).value());
    return engines_.back().get();
  }

  // Starts an engine and waits until it streams.
  PgCapture* Streaming(PgCaptureOptions o) {
    PgCapture* c = Start(std::move(o));
    if (c == nullptr) return nullptr;
    EXPECT_TRUE(WaitUntil([&] { return c->healthy(); }))
        << CaptureStateName(c->status().state) << ": " << c->status().reason;
    return c;
  }

  void InsertOutbox() { db_->Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')"); }

  // With publication `publication`: an outbox insert wakes once, `changes` wake nothing, and
  // `ignored` of them were read from the stream as outbox changes.
  void ExpectOnlyTheInsertsWake(const std::string& publication,
                                const std::vector<std::string>& changes, int64_t ignored) {
    db_->Exec("DROP PUBLICATION queuebox_outbox; CREATE PUBLICATION queuebox_outbox " +
              publication);
    PgCapture* c = Streaming(Options());
    ASSERT_NE(c, nullptr);
    InsertOutbox();
    ASSERT_TRUE(WaitUntil([&] { return c->insert_wakes() == 1; }));
    for (const std::string& change : changes) db_->Exec(change);
    // The marker: its wake comes after every change above was read (the stream is ordered).
    InsertOutbox();
    ASSERT_TRUE(WaitUntil([&] { return c->insert_wakes() >= 2; }));
    EXPECT_EQ(c->insert_wakes(), 2);
    EXPECT_EQ(c->outbox_changes_ignored(), ignored);
  }

  // Waits until the slot confirmed `lsn` (text) or later.
  bool ConfirmedAtLeast(const std::string& lsn) {
    return WaitUntil([&] {
      return db_->Scalar("SELECT coalesce(confirmed_flush_lsn >= '" + lsn +
                         "'::pg_lsn, false)::text FROM pg_replication_slots WHERE slot_name = '" +
                         slot_ + "'") == "true";
    });
  }

  std::unique_ptr<TempPgDatabase> db_;
  std::string root_, slot_;
  std::atomic<int64_t> wakes_{0};
  std::vector<std::unique_ptr<PgCapture>> engines_;
};

TEST_F(PgCaptureTest, FirstStartCreatesTheSlotAndRecordsTheStateThenAnInsertWakes) {
  PgCapture* c = Streaming(Options());
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(db_->Scalar("SELECT plugin || ' ' || slot_type || ' ' || (database = "
                        "current_database())::text FROM pg_replication_slots WHERE slot_name = '" +
                        slot_ + "'"),
            "pgoutput logical true");
  auto row = db_->Query(
      "SELECT state_id, config_fingerprint FROM queuebox_capture_state WHERE identity_name = "
      "'queuebox'");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][1], c->fingerprint());
  std::ifstream identity(root_ + "/state/identity");
  std::string state_id;
  identity >> state_id;
  EXPECT_EQ(state_id, row[0][0]);
  EXPECT_TRUE(std::filesystem::exists(root_ + "/state/offsets.dat"));

  const int64_t before = c->insert_wakes();
  InsertOutbox();
  EXPECT_TRUE(WaitUntil([&] { return c->insert_wakes() == before + 1; }));
  EXPECT_GE(wakes_.load(), c->wakes());  // every wake reached the callback
}

TEST_F(PgCaptureTest, UpdatesDeletesAndOtherTablesDoNotWake) {
  db_->Exec("CREATE TABLE orders (id int PRIMARY KEY)");
  ExpectOnlyTheInsertsWake("FOR ALL TABLES",
                           {"UPDATE outbox SET state = 'sent'", "DELETE FROM outbox",
                            "INSERT INTO orders VALUES (1)", "UPDATE orders SET id = 2"},
                           2);  // the update and the delete were read, not woken
}

// A publication of the inserts and the id column only (docs/capture.md): capture needs no more
// than "an outbox insert committed", so it wakes as with QueueBox's documented one, and the
// relay's updates and deletes never reach the stream.
TEST_F(PgCaptureTest, AnInsertOnlyPublicationOfTheIdColumnWakes) {
  ExpectOnlyTheInsertsWake("FOR TABLE outbox (id) WITH (publish = 'insert')",
                           {"UPDATE outbox SET state = 'sent'", "DELETE FROM outbox"},
                           0);  // not published: nothing to read
}

TEST_F(PgCaptureTest, ConfirmedPositionAdvancesWithInsertsAndWhileTheOutboxIsQuiet) {
  PgCapture* c = Streaming(Options());
  ASSERT_NE(c, nullptr);
  InsertOutbox();
  const std::string after_insert = db_->Scalar("SELECT pg_current_wal_lsn()::text");
  EXPECT_TRUE(ConfirmedAtLeast(after_insert));
  // Traffic on a table outside the publication only: the slot still follows the WAL end.
  db_->Exec("CREATE TABLE busy (n int); INSERT INTO busy SELECT generate_series(1, 1000)");
  const std::string after_busy = db_->Scalar("SELECT pg_current_wal_lsn()::text");
  EXPECT_TRUE(ConfirmedAtLeast(after_busy));
  EXPECT_TRUE(WaitUntil([&] {
    auto lsn = ParseLsn(c->status().confirmed_lsn);
    return lsn && *lsn >= *ParseLsn(after_busy);
  }));
  auto offsets = StateDirectory(root_ + "/state").ReadOffsets();
  ASSERT_TRUE(offsets.ok());
  ASSERT_TRUE(offsets->lsn.has_value());
  EXPECT_GE(*offsets->lsn, *ParseLsn(after_insert));
}

TEST_F(PgCaptureTest, ARestartedEngineResumesFromTheRecordedPosition) {
  PgCapture* first = Streaming(Options());
  ASSERT_NE(first, nullptr);
  InsertOutbox();
  ASSERT_TRUE(WaitUntil([&] { return first->insert_wakes() == 1; }));
  first->Stop();  // confirms what it handled
  auto recorded = StateDirectory(root_ + "/state").ReadOffsets();
  ASSERT_TRUE(recorded.ok() && recorded->lsn.has_value());

  // Three transactions while no one reads the slot.
  for (int i = 0; i < 3; ++i) InsertOutbox();
  PgCapture* second = Start(Options());
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return second->insert_wakes() >= 3; }));
  EXPECT_EQ(second->status().start_lsn, FormatLsn(*recorded->lsn));
  InsertOutbox();  // the marker
  ASSERT_TRUE(WaitUntil([&] { return second->insert_wakes() >= 4; }));
  // The insert the first engine handled was not read again.
  EXPECT_EQ(second->insert_wakes(), 4);
}

TEST_F(PgCaptureTest, ASecondOwnerIsRefusedAndTheFirstKeepsWaking) {
  LogCapture logs;
  PgCapture* owner = Streaming(Options("one"));
  ASSERT_NE(owner, nullptr);
  PgCapture* second = Start(Options("two"));
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return second->status().state == CaptureState::kStopped; }));
  EXPECT_TRUE(second->status().owned_elsewhere);
  EXPECT_FALSE(second->status().recovery_required);
  EXPECT_EQ(second->streams(), 0);
  EXPECT_GE(second->wakes(), 1);  // it woke delivery, which goes on by SQL
  EXPECT_TRUE(logs.Has("Capture identity already has an active owner")) << logs.All();
  // Its state directory was never written: only the owner's state exists.
  EXPECT_FALSE(std::filesystem::exists(root_ + "/two/identity"));

  const int64_t before = owner->insert_wakes();
  InsertOutbox();
  EXPECT_TRUE(WaitUntil([&] { return owner->insert_wakes() == before + 1; }));
  EXPECT_TRUE(owner->healthy());
}

TEST_F(PgCaptureTest, StateFromAnotherInstanceOrAnEmptyVolumeNeedsRecovery) {
  LogCapture logs;
  PgCapture* first = Streaming(Options());
  ASSERT_NE(first, nullptr);
  first->Stop();

  // Files of another instance: another state id in the identity file.
  std::filesystem::copy(root_ + "/state", root_ + "/other");
  std::ofstream(root_ + "/other/identity") << "5f1c7a5e-0000-4000-8000-00000000abcd";
  PgCapture* foreign = Start(Options("other"));
  ASSERT_TRUE(WaitUntil([&] { return foreign->status().state == CaptureState::kStopped; }));
  EXPECT_TRUE(foreign->status().recovery_required);
  EXPECT_THAT(foreign->status().reason, HasSubstr("belong to another instance"));
  EXPECT_EQ(foreign->streams(), 0);
  EXPECT_TRUE(logs.Has("Capture requires explicit state recovery")) << logs.All();
  EXPECT_TRUE(logs.Has("pg_drop_replication_slot")) << "the log line says how to recover";

  // An empty volume while the database says capture ran.
  PgCapture* empty = Start(Options("empty"));
  ASSERT_TRUE(WaitUntil([&] { return empty->status().state == CaptureState::kStopped; }));
  EXPECT_THAT(empty->status().reason, HasSubstr("missing"));

  // Changed settings: another schema.table makes the recorded position meaningless.
  db_->Exec("CREATE SCHEMA app; CREATE TABLE app.outbox (id int)");
  PgCaptureOptions moved = Options();
  moved.schema = "app";
  PgCapture* changed = Start(moved);
  ASSERT_TRUE(WaitUntil([&] { return changed->status().state == CaptureState::kStopped; }));
  EXPECT_THAT(changed->status().reason, HasSubstr("settings changed"));

  // None of them changed the recorded state: the owner's own files still resume.
  PgCapture* again = Streaming(Options());
  ASSERT_NE(again, nullptr);
}

TEST_F(PgCaptureTest, ADroppedSlotNeedsRecoveryEvenWhileStreaming) {
  LogCapture logs;
  PgCapture* c = Streaming(Options());
  ASSERT_NE(c, nullptr);
  // End the sender and drop the slot before the engine reconnects.
  ASSERT_TRUE(WaitUntil([&] {
    db_->Exec(
        "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE "
        "slot_name = '" +
        slot_ + "' AND active_pid IS NOT NULL");
    return db_->Scalar(
               "SELECT count(pg_drop_replication_slot(slot_name)) FROM "
               "pg_replication_slots WHERE slot_name = '" +
               slot_ + "' AND NOT active") == "1";
  }));
  ASSERT_TRUE(WaitUntil([&] { return c->status().state == CaptureState::kStopped; }));
  EXPECT_TRUE(c->status().recovery_required);
  EXPECT_THAT(c->status().reason, HasSubstr("disappeared while capture state remains"));
  EXPECT_EQ(
      db_->Scalar("SELECT count(*) FROM pg_replication_slots WHERE slot_name = '" + slot_ + "'"),
      "0")
      << "no new slot: it would start from the present";
  EXPECT_TRUE(logs.Has("Capture requires explicit state recovery")) << logs.All();
}

TEST_F(PgCaptureTest, AMissingPublicationIsRetriedUntilItExists) {
  db_->Exec("DROP PUBLICATION queuebox_outbox");
  PgCapture* c = Start(Options());
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(WaitUntil([&] { return c->status().state == CaptureState::kRetrying; }));
  EXPECT_THAT(c->status().reason, HasSubstr("CREATE PUBLICATION queuebox_outbox"));
  EXPECT_EQ(db_->Scalar("SELECT count(*) FROM pg_publication"), "0") << "never created by us";
  // A publication of other tables only would never show an outbox insert.
  db_->Exec("CREATE TABLE orders (id int); CREATE PUBLICATION queuebox_outbox FOR TABLE orders");
  ASSERT_TRUE(WaitUntil([&] {
    return c->status().reason.find("does not publish the inserts of public.outbox") !=
           std::string::npos;
  })) << c->status().reason;
  db_->Exec("ALTER PUBLICATION queuebox_outbox ADD TABLE outbox");
  EXPECT_TRUE(WaitUntil([&] { return c->healthy(); })) << c->status().reason;
}

TEST_F(PgCaptureTest, AStoppedCapturesSlotReportsTheWalItRetains) {
  LogCapture logs;
  PgCapture* first = Streaming(Options());
  ASSERT_NE(first, nullptr);
  first->Stop();
  std::filesystem::remove(root_ + "/state/offsets.dat");  // the next engine stops for recovery
  PgCaptureOptions o = Options();
  o.retention_check_interval = 100ms;
  o.retention_warn_bytes = 4096;
  PgCapture* stopped = Start(o);
  ASSERT_TRUE(WaitUntil([&] { return stopped->status().state == CaptureState::kStopped; }));
  db_->Exec(
      "CREATE TABLE filler (s text); INSERT INTO filler SELECT repeat('x', 100) FROM "
      "generate_series(1, 2000)");
  ASSERT_TRUE(WaitUntil([&] { return stopped->status().slot_retained_bytes > 4096; }));
  EXPECT_TRUE(WaitUntil([&] { return logs.Has("retains more WAL than the threshold"); }))
      << logs.All();

  PgSettings settings;
  settings.url = db_->url();
  auto conn = PgConnection::Connect(settings);
  ASSERT_TRUE(conn.ok());
  auto info = ReadSlotInfo(**conn, slot_);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_FALSE((*info)->active);
  EXPECT_EQ((*info)->plugin, "pgoutput");
  EXPECT_GT((*info)->retained_bytes, 4096);
  EXPECT_GE((*info)->restart_retained_bytes, (*info)->retained_bytes);
  auto none = ReadSlotInfo(**conn, "no_such_slot");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST_F(PgCaptureTest, CaptureSurvivesAPostgresRestart) {
  testing::PrivatePostgres pg("-c wal_level=logical");
  Status init = pg.Init();
  ASSERT_TRUE(init.ok()) << init.ToString();
  Migrate(pg.url());
  {
    PgSettings s;
    s.url = pg.url();
    auto conn = PgConnection::Connect(s);
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE((*conn)->Exec("CREATE PUBLICATION queuebox_outbox FOR TABLE outbox").ok());
  }
  PgCaptureOptions o = Options();
  o.connection.url = pg.url();
  PgCapture* c = Streaming(o);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(pg.Stop().ok());
  ASSERT_TRUE(WaitUntil([&] { return c->status().state == CaptureState::kRetrying; }));
  const int64_t wakes_while_down = c->wakes();
  ASSERT_TRUE(pg.Start().ok());
  ASSERT_TRUE(WaitUntil([&] { return c->streams() == 2 && c->healthy(); })) << c->status().reason;
  EXPECT_GT(c->wakes(), wakes_while_down) << "every attempt wakes delivery";
  PgSettings s;
  s.url = pg.url();
  auto conn = PgConnection::Connect(s);
  ASSERT_TRUE(conn.ok());
  const int64_t before = c->insert_wakes();
  ASSERT_TRUE((*conn)->Exec("INSERT INTO outbox (topic, payload) VALUES ('t', '{}')").ok());
  EXPECT_TRUE(WaitUntil([&] { return c->insert_wakes() == before + 1; }));
  c->Stop();
}

TEST_F(PgCaptureTest, NextWakeDelayIsTheNearestFutureDueTimeCappedByTheMaximum) {
  DatabaseConfig config;
  config.type = "postgresql";
  config.url = db_->url();
  auto store = PostgresOutboxStore::Open(config);
  ASSERT_TRUE(store.ok());
  auto delay = (*store)->NextWakeDelayMs(60000);
  ASSERT_TRUE(delay.ok()) << delay.status().ToString();
  EXPECT_EQ(*delay, 60000) << "nothing due in the future";
  db_->Exec("INSERT INTO outbox (topic, payload) VALUES ('due', '{}')");  // due now: not future
  EXPECT_EQ(*(*store)->NextWakeDelayMs(60000), 60000);
  db_->Exec(
      "INSERT INTO outbox (topic, payload, scheduled_at) VALUES ('later', '{}', "
      "clock_timestamp() + interval '30 seconds')");
  delay = (*store)->NextWakeDelayMs(60000);
  EXPECT_GT(*delay, 20000);
  EXPECT_LE(*delay, 30000);
  EXPECT_EQ(*(*store)->NextWakeDelayMs(5000), 5000) << "capped by the maximum";
  db_->Exec(
      "INSERT INTO outbox (topic, payload, state, lease_expires_at) VALUES ('leased', '{}', "
      "'processing', clock_timestamp() + interval '10 seconds')");
  delay = (*store)->NextWakeDelayMs(60000);
  EXPECT_GT(*delay, 1000);
  EXPECT_LE(*delay, 10000) << "a lease deadline is nearer";
  db_->Exec(
      "UPDATE outbox SET scheduled_at = clock_timestamp() + interval '1 millisecond' "
      "WHERE topic = 'later'");
  delay = (*store)->NextWakeDelayMs(60000);
  EXPECT_GE(*delay, 1) << "never below 1 ms";
  EXPECT_EQ((*store)->NextWakeDelayMs(0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace queuebox::store::capture
