// What the capture engine gets from the configuration (outbox.capture.* over database.*), and the
// public entry points of store/change_capture.h that need no server.
#include <gtest/gtest.h>

#include "store/change_capture.h"
#include "store/postgres/capture/pg_capture.h"

namespace queuebox::store::capture {
namespace {

// The values QueueBox's examples/cdc/queuebox.yml loads to.
DatabaseConfig ExampleDatabase() {
  DatabaseConfig db;
  db.type = "postgresql";
  db.url = "jdbc:postgresql://postgres:5432/queuebox";
  db.username = "queuebox";
  db.password = "queuebox";
  return db;
}

CaptureConfig ExampleCapture() {
  CaptureConfig cap;
  cap.mode = "postgres-logical";
  cap.enabled = true;
  cap.state_directory = "/var/lib/queuebox/capture";
  cap.reconciliation_interval_ms = 30000;
  return cap;
}

TEST(CaptureOptionsTest, QueueBoxsExampleReadsTheUrlsTargetAndTheDatabasesCredentials) {
  auto options = CaptureOptionsFor(ExampleDatabase(), ExampleCapture());
  ASSERT_TRUE(options.ok()) << options.status().message();
  EXPECT_EQ(options->identity, "queuebox");
  EXPECT_EQ(options->schema, "public");
  EXPECT_EQ(options->table, "outbox");
  EXPECT_EQ(options->publication, "queuebox_outbox");
  EXPECT_EQ(options->slot, "queuebox_outbox");
  EXPECT_EQ(options->connection.username, "queuebox");
  EXPECT_EQ(options->connection.password, "queuebox");
  auto target = ResolveCaptureTarget(options->connection);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->host, "postgres");
  EXPECT_EQ(target->port, "5432");
  EXPECT_EQ(target->database, "queuebox");
}

TEST(CaptureOptionsTest, ConnectionOverridesReachTheEngine) {
  DatabaseConfig db = ExampleDatabase();
  db.url = "postgresql://db.internal/shop";
  db.outbox_table = "app_outbox";
  CaptureConfig cap = ExampleCapture();
  cap.schema = "app";
  cap.slot_retention_warn_bytes = 4096;
  cap.connection.hostname = "replica.internal";
  cap.connection.port = 5433;
  cap.connection.database = "shop_replica";
  cap.connection.username = "capture_user";
  cap.connection.password = "capture_secret";
  auto options = CaptureOptionsFor(db, cap);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->schema, "app");
  EXPECT_EQ(options->table, "app_outbox");
  EXPECT_EQ(options->retention_warn_bytes, 4096);
  EXPECT_EQ(options->connection.username, "capture_user");
  EXPECT_EQ(options->connection.password, "capture_secret");
  auto target = ResolveCaptureTarget(options->connection);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->host, "replica.internal");
  EXPECT_EQ(target->port, "5433");
  EXPECT_EQ(target->database, "shop_replica");
}

TEST(ChangeCaptureTest, CheckCaptureConnectionNeedsOneHost) {
  DatabaseConfig db = ExampleDatabase();
  db.url = "postgresql://a.internal,b.internal/shop";
  CaptureConfig cap = ExampleCapture();
  Status s = CheckCaptureConnection(db, cap);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outbox.capture.connection.hostname"), std::string::npos);
  cap.connection.hostname = "a.internal";
  EXPECT_TRUE(CheckCaptureConnection(db, cap).ok());
  cap.mode = "polling";  // nothing to check
  cap.connection.hostname.reset();
  EXPECT_TRUE(CheckCaptureConnection(db, cap).ok());
}

TEST(ChangeCaptureTest, OpenChangeCaptureIsNullWhenCaptureIsOff) {
  CaptureConfig cap = ExampleCapture();
  cap.enabled = false;  // another replica owns capture
  auto off = OpenChangeCapture(ExampleDatabase(), cap, [] {});
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
  cap = CaptureConfig{};  // polling
  auto polling = OpenChangeCapture(ExampleDatabase(), cap, [] {});
  ASSERT_TRUE(polling.ok());
  EXPECT_EQ(*polling, nullptr);
  // Enabled: an engine, not started (no connection is made).
  auto on = OpenChangeCapture(ExampleDatabase(), ExampleCapture(), [] {});
  ASSERT_TRUE(on.ok()) << on.status().message();
  ASSERT_NE(*on, nullptr);
  EXPECT_FALSE((*on)->healthy());
  EXPECT_EQ((*on)->wakes(), 0);
  EXPECT_EQ((*on)->slot_retained_bytes(), -1);
}

TEST(ChangeCaptureTest, ReadCaptureReportIsNulloptWithoutPostgresLogical) {
  auto report = ReadCaptureReport(ExampleDatabase(), CaptureConfig{});
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->has_value());
}

}  // namespace
}  // namespace queuebox::store::capture
