// outbox.capture.* (QueueBox reference §12.2, Appendix A): QueueBox's own capture example loads
// unchanged, every rule across the keys is reported at its key, and the keys come from the
// environment like any other.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "queuebox/config.h"
#include "store/change_capture.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// QueueBox's examples/cdc/queuebox.yml, as it ships.
constexpr char kQueueBoxCdcExample[] = R"(# Embedded change data capture on PostgreSQL.
database:
  type: postgresql
  url: jdbc:postgresql://postgres:5432/queuebox
  username: queuebox
  password: queuebox

outbox:
  pollIntervalMs: 100
  capture:
    mode: postgres-logical
    enabled: true
    identity: queuebox
    stateDirectory: /var/lib/queuebox/capture
    publication: queuebox_outbox
    slot: queuebox_outbox
    reconciliationIntervalMs: 30000

destinations:
  receiver:
    type: http
    baseUrl: http://receiver:8080
    path: /events

routes:
  - topicPattern: "order.*"
    destination: receiver
)";

constexpr char kPg[] = "database: {type: postgresql, url: 'postgresql://db.internal/shop'}\n";

class CaptureConfigTest : public testing::ConfigFileTest {
 protected:
  std::string Error(const std::string& yaml, std::map<std::string, std::string> env = {}) {
    Result<Config> c = Load(yaml, std::move(env));
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(CaptureConfigTest, QueueBoxsCaptureExampleLoadsUnchanged) {
  Result<Config> c = Load(kQueueBoxCdcExample);
  ASSERT_TRUE(c.ok()) << c.status().message();
  const CaptureConfig& cap = c->outbox.capture;
  EXPECT_EQ(cap.mode, "postgres-logical");
  EXPECT_TRUE(cap.enabled);
  EXPECT_EQ(cap.identity, "queuebox");
  EXPECT_EQ(cap.state_directory, "/var/lib/queuebox/capture");
  EXPECT_EQ(cap.publication, "queuebox_outbox");
  EXPECT_EQ(cap.slot, "queuebox_outbox");
  EXPECT_EQ(cap.reconciliation_interval_ms, 30000);
  EXPECT_EQ(cap.schema, std::nullopt);

  EXPECT_EQ(c->database.username, "queuebox");
  EXPECT_EQ(c->database.outbox_table, "outbox");
  // The capture connection names one host and a database (the engine's mapping of these values
  // is tested in store/postgres/capture/capture_options_test.cc).
  EXPECT_TRUE(CheckCaptureConnection(c->database, cap).ok());
}

// The PostgreSQL tab of QueueBox's how-to "Capture changes", with its placeholder.
TEST_F(CaptureConfigTest, QueueBoxsCaptureHowToLoadsUnchanged) {
  Result<Config> c = Load(R"(database:
  type: postgresql
  url: jdbc:postgresql://db.internal:5432/queuebox
  username: queuebox
  password: ${DB_PASSWORD}

outbox:
  capture:
    mode: postgres-logical
    enabled: true
    identity: queuebox
    stateDirectory: /var/lib/queuebox/capture
    publication: queuebox_outbox
    slot: queuebox_outbox
    reconciliationIntervalMs: 1000
)",
                          {{"DB_PASSWORD", "s3cret"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.password, "s3cret");
  EXPECT_TRUE(c->outbox.capture.enabled);
  EXPECT_EQ(c->outbox.capture.reconciliation_interval_ms, 1000);
}

TEST_F(CaptureConfigTest, TheDefaultIsPolling) {
  Result<Config> c = Load(kPg);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->outbox.capture.mode, "polling");
  EXPECT_FALSE(c->outbox.capture.enabled);
  EXPECT_EQ(c->outbox.capture.reconciliation_interval_ms, 1000);
  EXPECT_EQ(c->outbox.capture.slot_retention_warn_bytes, int64_t{1} << 30);
}

TEST_F(CaptureConfigTest, ConnectionOverridesAreBound) {
  Result<Config> c = Load(std::string(kPg) + R"(outbox:
  capture:
    mode: postgres-logical
    enabled: true
    stateDirectory: /state
    schema: app
    connection: {hostname: replica.internal, port: 5433, database: shop_replica,
                 username: capture_user, password: capture_secret}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const CaptureConfig& cap = c->outbox.capture;
  EXPECT_EQ(cap.schema, "app");
  EXPECT_EQ(cap.connection.hostname, "replica.internal");
  EXPECT_EQ(cap.connection.port, 5433);
  EXPECT_EQ(cap.connection.database, "shop_replica");
  EXPECT_EQ(cap.connection.username, "capture_user");
  EXPECT_EQ(cap.connection.password, "capture_secret");
  EXPECT_TRUE(CheckCaptureConnection(c->database, cap).ok());
}

TEST_F(CaptureConfigTest, EveryRuleAcrossTheKeysIsReportedAtOnce) {
  std::string m = Error(R"(database: {url: /tmp/qb.db}
outbox:
  capture:
    mode: postgres-logical
    enabled: true
    identity: Orders-Capture
    slot: "1slot"
    publication: pub
)");
  EXPECT_THAT(m, HasSubstr("outbox.capture.mode: postgres-logical needs database.type postgresql"));
  EXPECT_THAT(m, HasSubstr("outbox.capture.stateDirectory: required when outbox.capture.enabled"));
  EXPECT_THAT(m, HasSubstr("outbox.capture.identity: must match ^[a-z][a-z0-9_]{0,62}$ (got "
                           "'Orders-Capture')"));
  EXPECT_THAT(m, HasSubstr("outbox.capture.slot: must match"));
  EXPECT_THAT(m, Not(HasSubstr("outbox.capture.publication")));
}

TEST_F(CaptureConfigTest, SqlServerCdcIsNotInThisBuild) {
  EXPECT_THAT(Error(std::string(kPg) + "outbox: {capture: {mode: sqlserver-cdc}}\n"),
              HasSubstr("outbox.capture.mode: sqlserver-cdc is not supported by this build of "
                        "QueueBox C++"));
}

TEST_F(CaptureConfigTest, EnabledNeedsACaptureModeAndAnUnknownModeIsNamed) {
  EXPECT_THAT(Error(std::string(kPg) + "outbox: {capture: {enabled: true, stateDirectory: /s}}\n"),
              HasSubstr("outbox.capture.enabled: true needs outbox.capture.mode postgres-logical"));
  EXPECT_THAT(Error(std::string(kPg) + "outbox: {capture: {mode: logical}}\n"),
              HasSubstr("outbox.capture.mode: must be one of polling, postgres-logical, "
                        "sqlserver-cdc"));
  EXPECT_THAT(Error(std::string(kPg) + "outbox: {capture: {slott: x}}\n"),
              HasSubstr("outbox.capture.slott: unknown key; did you mean slot?"));
  EXPECT_THAT(Error(std::string(kPg) + "outbox: {capture: {reconciliationIntervalMs: 0}}\n"),
              HasSubstr("outbox.capture.reconciliationIntervalMs: must be at least 1"));
}

TEST_F(CaptureConfigTest, AUrlWithSeveralHostsNeedsTheCaptureHostname) {
  const std::string yaml =
      R"(database: {type: postgresql, url: 'postgresql://a.internal,b.internal/shop'}
outbox:
  capture: {mode: postgres-logical, enabled: true, stateDirectory: /s)";
  EXPECT_THAT(Error(yaml + "}\n"),
              HasSubstr("outbox.capture.connection.hostname: database.url names several hosts"));
  Result<Config> ok = Load(yaml + ", connection: {hostname: a.internal}}\n");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

TEST_F(CaptureConfigTest, KeysComeFromTheEnvironmentToo) {
  Result<Config> c = Load(kPg, {{"QUEUEBOX_OUTBOX_CAPTURE_MODE", "postgres-logical"},
                                {"QUEUEBOX_OUTBOX_CAPTURE_RECONCILIATIONINTERVALMS", "5000"},
                                {"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_PASSWORD", "from-env"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->outbox.capture.mode, "postgres-logical");
  EXPECT_EQ(c->outbox.capture.reconciliation_interval_ms, 5000);
  EXPECT_EQ(c->outbox.capture.connection.password, "from-env");
}

}  // namespace
}  // namespace queuebox
