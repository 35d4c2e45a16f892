// Unit tests of LoadConfig: YAML, QUEUEBOX_* variables, placeholders, secrets and every error
// path of the strict validation (QueueBox reference §12).
#include "queuebox/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "config/config_test_util.h"
#include "config/edit_distance_reference.h"
#include "config/render.h"
#include "config/schema.h"
#include "config/validate.h"
#include "destinations/registry.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::map<std::string, std::string>;

constexpr char kMinimal[] = "database:\n  url: /tmp/queuebox-test.db\n";

class ConfigTest : public testing::ConfigFileTest {
 protected:
  // The error message of a load that must fail with kInvalidArgument.
  std::string Error(const std::string& yaml, Env env = {}) {
    Result<Config> c = Load(yaml, std::move(env));
    EXPECT_FALSE(c.ok());
    if (c.ok()) return "";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().message();
    return c.status().message();
  }
};

TEST_F(ConfigTest, MinimalFileFillsEveryDefault) {
  Result<Config> c = Load(kMinimal);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.http_port, 8080);
  EXPECT_FALSE(c->server.management_port.has_value());
  EXPECT_EQ(c->server.address, "0.0.0.0");
  EXPECT_EQ(c->database.type, "sqlite");
  EXPECT_EQ(c->database.url, "/tmp/queuebox-test.db");
  EXPECT_EQ(c->database.pool_size, 10);
  EXPECT_EQ(c->database.connection_timeout_ms, 30000);
  EXPECT_EQ(c->database.startup_timeout_ms, 60000);
  EXPECT_TRUE(c->database.migrate);
  EXPECT_EQ(c->database.outbox_table, "outbox");
  EXPECT_EQ(c->database.columns.aggregate_type, "aggregate_type");
  EXPECT_EQ(c->database.columns.lease_expires_at, "lease_expires_at");
  EXPECT_EQ(c->outbox.poll_interval_ms, 100);
  EXPECT_EQ(c->outbox.batch_size, 100);
  EXPECT_EQ(c->outbox.concurrency, 8);
  EXPECT_EQ(c->outbox.retry_base_delay_ms, 1000);
  EXPECT_EQ(c->outbox.max_attempts, 5);
  EXPECT_EQ(c->outbox.claim_timeout_ms, 300000);
  EXPECT_EQ(c->outbox.pending_gauge_interval_ms, 5000);
  EXPECT_EQ(c->outbox.shutdown_timeout_ms, 30000);
  EXPECT_FALSE(c->outbox.notify);
  EXPECT_EQ(c->http.max_error_body_bytes, 2048);
  EXPECT_FALSE(c->admin.enabled);
  EXPECT_FALSE(c->admin.auth.has_value());
  EXPECT_EQ(c->admin.max_payload_bytes, 65536);
  EXPECT_FALSE(c->retention.enabled);
  EXPECT_EQ(c->retention.outbox.policy, "DISABLED");
  EXPECT_EQ(c->retention.outbox.cleanup_interval_ms, 3600000);
  EXPECT_EQ(c->retention.outbox.batch_size, 1000);
  EXPECT_EQ(c->logging.format, "json");
  EXPECT_EQ(c->logging.level, "info");
  EXPECT_TRUE(c->routes.empty());
  EXPECT_TRUE(c->destinations.empty());
}

TEST_F(ConfigTest, FullFileIsParsed) {
  Result<Config> c = Load(R"(
server: {httpPort: 9090, managementPort: 9091, address: 0.0.0.0}
database:
  type: postgresql
  url: postgresql://127.0.0.1:5432/app
  username: relay
  password: pw
  poolSize: 4
  migrate: false
  outboxTableName: events_outbox
  columnMapping:
    outbox: {aggregateType: kind, payload: body}
outbox: {pollIntervalMs: 50, batchSize: 20, notify: {enabled: true}}
http: {maxErrorBodyBytes: 512}
destinations:
  orders:
    type: http
    baseUrl: http://127.0.0.1:9000
    timeoutMs: 1500
    headers: {X-Team: billing, X-Count: 3}
  archive: {type: file, path: /tmp/archive.jsonl}
routes:
  - {topicPattern: "order.*", destination: orders, routingKeyTemplate: "{{ topic }}"}
  - {topicPattern: "**", destination: archive, routingKeyMissingFieldDefault: none}
admin:
  enabled: true
  auth: {type: bearer, token: t0ken}
retention:
  enabled: true
  outbox: {policy: AGE, maxAge: 7d, cleanupInterval: 30m, batchSize: 50}
logging: {format: text, level: debug}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.http_port, 9090);
  EXPECT_EQ(c->server.management_port, 9091);
  EXPECT_EQ(c->server.address, "0.0.0.0");
  EXPECT_EQ(c->database.type, "postgresql");
  EXPECT_EQ(c->database.username, "relay");
  EXPECT_EQ(c->database.password, "pw");
  EXPECT_EQ(c->database.pool_size, 4);
  EXPECT_FALSE(c->database.migrate);
  EXPECT_EQ(c->database.outbox_table, "events_outbox");
  EXPECT_EQ(c->database.columns.aggregate_type, "kind");
  EXPECT_EQ(c->database.columns.payload, "body");
  EXPECT_EQ(c->database.columns.topic, "topic");
  EXPECT_EQ(c->outbox.poll_interval_ms, 50);
  EXPECT_EQ(c->outbox.batch_size, 20);
  EXPECT_TRUE(c->outbox.notify);
  EXPECT_EQ(c->http.max_error_body_bytes, 512);

  ASSERT_EQ(c->destinations.size(), 2u);
  const DestinationConfig& orders = c->destinations.at("orders");
  EXPECT_EQ(orders.name, "orders");
  EXPECT_EQ(orders.type, "http");
  EXPECT_EQ(orders.options.at("baseUrl"), "http://127.0.0.1:9000");
  EXPECT_EQ(orders.options.at("timeoutMs"), 1500);
  EXPECT_EQ(orders.options.at("path"), "/");  // default filled
  EXPECT_FALSE(orders.options.contains("headers"));
  EXPECT_EQ(orders.headers,
            (std::map<std::string, std::string>{{"X-Count", "3"}, {"X-Team", "billing"}}));
  EXPECT_EQ(c->destinations.at("archive").options.at("path"), "/tmp/archive.jsonl");

  ASSERT_EQ(c->routes.size(), 2u);
  EXPECT_EQ(c->routes[0].topic_pattern, "order.*");
  EXPECT_EQ(c->routes[0].destination, "orders");
  EXPECT_EQ(c->routes[0].routing_key_template, "{{ topic }}");
  EXPECT_EQ(c->routes[0].routing_key_missing_field_default, "");
  EXPECT_FALSE(c->routes[1].routing_key_template.has_value());
  EXPECT_EQ(c->routes[1].routing_key_missing_field_default, "none");

  EXPECT_TRUE(c->admin.enabled);
  ASSERT_TRUE(c->admin.auth.has_value());
  EXPECT_EQ(c->admin.auth->type, "bearer");
  EXPECT_EQ(c->admin.auth->options.at("token"), "t0ken");
  EXPECT_TRUE(c->retention.enabled);
  EXPECT_EQ(c->retention.outbox.policy, "AGE");
  EXPECT_EQ(c->retention.outbox.max_age_ms, 7LL * 24 * 3600 * 1000);
  EXPECT_EQ(c->retention.outbox.cleanup_interval_ms, 30LL * 60 * 1000);
  EXPECT_EQ(c->retention.outbox.batch_size, 50);
  EXPECT_EQ(c->logging.format, "text");
  EXPECT_EQ(c->logging.level, "debug");
}

TEST_F(ConfigTest, UnknownKeySuggestsTheClosestKey) {
  EXPECT_EQ(Error(std::string(kMinimal) + "outbox:\n  batchSzie: 10\n"),
            "The configuration has 1 error. Fix each one and start QueueBox again.\n"
            "  - outbox.batchSzie: unknown key; did you mean batchSize?");
  EXPECT_THAT(Error(std::string(kMinimal) + "outbx:\n  batchSize: 10\n"),
              HasSubstr("  - outbx: unknown key; did you mean outbox?"));
  EXPECT_THAT(Error(std::string(kMinimal) + "outbox:\n  notify: {enabeld: true}\n"),
              HasSubstr("  - outbox.notify.enabeld: unknown key; did you mean enabled?"));
  // Nothing close: the message lists what the block takes.
  EXPECT_THAT(Error(std::string(kMinimal) + "http:\n  zzz: 1\n"),
              HasSubstr("  - http.zzz: unknown key; this block takes maxErrorBodyBytes"));
}

TEST_F(ConfigTest, WrongTypesAreReported) {
  std::string m = Error(std::string(kMinimal) +
                        "outbox: {batchSize: abc, concurrency: 2.5}\nadmin: {enabled: maybe}\n"
                        "server: 5\nlogging: {format: [json]}\n");
  EXPECT_THAT(m, HasSubstr("  - outbox.batchSize: must be a whole number, got 'abc'"));
  EXPECT_THAT(m, HasSubstr("  - outbox.concurrency: must be a whole number, got 2.5"));
  EXPECT_THAT(m, HasSubstr("  - admin.enabled: must be true or false, got 'maybe'"));
  EXPECT_THAT(m, HasSubstr("  - server: must be a block with the keys httpPort, managementPort, "
                           "address"));
  EXPECT_THAT(m, HasSubstr("  - logging.format: must be one of json, text, got [\"json\"]"));
  EXPECT_THAT(Error(std::string(kMinimal) + "destinations:\n  a: {type: file, path: {x: 1}}\n"),
              HasSubstr("  - destinations.a.path: must be a text value, not a block"));
  EXPECT_THAT(Error(std::string(kMinimal) + "outbox: {pollIntervalMs: soon}\n"),
              HasSubstr("outbox.pollIntervalMs: must be a whole number (milliseconds)"));
}

TEST_F(ConfigTest, OutOfRangeValuesAreReported) {
  std::string m = Error(std::string(kMinimal) +
                        "server: {httpPort: 70000}\noutbox: {batchSize: 0, claimTimeoutMs: -5}\n");
  EXPECT_THAT(m, HasSubstr("  - server.httpPort: must be between 1 and 65535, got 70000"));
  EXPECT_THAT(m, HasSubstr("  - outbox.batchSize: must be between 1 and 2147483647, got 0"));
  EXPECT_THAT(m, HasSubstr("  - outbox.claimTimeoutMs: must be at least 1, got -5"));
  EXPECT_THAT(Error(std::string(kMinimal) + "server: {httpPort: 8080, managementPort: 8080}\n"),
              HasSubstr("server.managementPort: must differ from server.httpPort (both are "
                        "8080)"));
}

TEST_F(ConfigTest, EnumsNeedTheExactCase) {
  std::string m = Error(
      "logging: {level: INFO}\nretention: {outbox: {policy: age, maxAge: 1d}}\n"
      "database: {url: /tmp/x.db, type: mysql}\n");
  EXPECT_THAT(m, HasSubstr("  - logging.level: must be one of debug, info, warn, error (exact "
                           "case); did you mean info?"));
  EXPECT_THAT(m, HasSubstr("  - retention.outbox.policy: must be one of AGE, COUNT, DISABLED "
                           "(exact case); did you mean AGE?"));
  EXPECT_THAT(m, HasSubstr("  - database.type: must be one of postgresql, sqlite, sqlserver, got "
                           "'mysql'"));
}

TEST_F(ConfigTest, MissingRequiredKeys) {
  std::string m = Error("database: {type: sqlite}\nroutes:\n  - {topicPattern: a}\n");
  EXPECT_THAT(m, HasSubstr("  - database.url: required key is missing"));
  EXPECT_THAT(m, HasSubstr("  - routes[0].destination: required key is missing"));
  EXPECT_THAT(Error(std::string(kMinimal) + "destinations:\n  a: {type: http}\n"),
              HasSubstr("  - destinations.a.baseUrl: required key is missing"));
}

// Found by fuzz/config_yaml_fuzz: a value with bytes that are not UTF-8 loaded, then
// RenderMasked (check-config, the start log) threw nlohmann's type_error 316 and the process
// terminated. YAML is UTF-8 text; so are the QUEUEBOX_* values we bind.
TEST_F(ConfigTest, TextThatIsNotUtf8IsRefused) {
  std::string m = Error(std::string(kMinimal) + "server:\n  address: \"127.0.0.1\xff\"\n");
  EXPECT_THAT(m, HasSubstr("is not valid UTF-8: line 4, column 22"));
  std::string e = Error(kMinimal, {{"QUEUEBOX_SERVER_ADDRESS", "127.0.0.1\xc3"}});
  EXPECT_THAT(e, HasSubstr("QUEUEBOX_SERVER_ADDRESS: the value is not valid UTF-8"));
  Result<Config> ok = Load(std::string(kMinimal) + "# caf\xc3\xa9 \xe2\x98\x83\n");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

// Found by config_yaml_fuzz: a NUL in a value loaded as a byte that is not UTF-8 (yaml-cpp), then
// RenderMasked (check-config, the start log) threw from json::dump and the process terminated.
// Control characters YAML does not allow are refused with their place; a printout never throws.
TEST_F(ConfigTest, ControlCharactersAreRefusedAndRenderingNeverThrows) {
  const std::string text("database:\n  url: jdb# The ?TTP fan-ouA rout\0_matchcpasswokdsql://leiv",
                         69);
  EXPECT_THAT(Error(text), HasSubstr("contains the control character U+0000, which YAML does not "
                                     "allow: line 2, column 34"));
  EXPECT_THAT(Error(std::string(kMinimal) + "server:\n  address: \"a\x7f\"\n"),
              HasSubstr("control character U+007F"));
  Result<Config> tabs = Load(std::string(kMinimal) + "#\tcomment\r\n");
  EXPECT_TRUE(tabs.ok()) << tabs.status().message();
  Result<Config> config = Load(kMinimal);
  ASSERT_TRUE(config.ok());
  config->database.url = std::string(
      "jdbc:sqlite:/tmp/a\xa0"
      "b");  // not UTF-8
  std::string rendered;
  EXPECT_NO_THROW(rendered = RenderMasked(*config));
  EXPECT_THAT(rendered, HasSubstr("url: \"jdbc:sqlite:/tmp/a\xef\xbf\xbd"));
}

TEST_F(ConfigTest, RouteToMissingDestination) {
  std::string m = Error(std::string(kMinimal) +
                        "destinations:\n  orders: {type: file, path: /tmp/o}\n"
                        "routes:\n  - {topicPattern: a, destination: order}\n"
                        "  - {topicPattern: b, destination: zzzzzzzz}\n");
  EXPECT_THAT(m, HasSubstr("  - routes[0].destination: no destination is named 'order'; did you "
                           "mean orders?"));
  EXPECT_THAT(m, HasSubstr("  - routes[1].destination: no destination is named 'zzzzzzzz'; "
                           "destinations are orders"));
  EXPECT_THAT(Error(std::string(kMinimal) + "routes:\n  - {topicPattern: a, destination: x}\n"),
              HasSubstr("routes[0].destination: no destination is named 'x'; define it under "
                        "destinations"));
}

TEST_F(ConfigTest, DestinationTypeIsRequiredAndKnown) {
  std::string m = Error(std::string(kMinimal) +
                        "destinations:\n  billing: {baseUrl: http://127.0.0.1:1}\n"
                        "  mail: {type: smtp}\n  feed: {type: htttp, baseUrl: x}\n");
  EXPECT_THAT(m, HasSubstr("  - destinations.billing: missing type; set one of " +
                           KnownDestinationTypes() + "\n"));
  EXPECT_THAT(m, HasSubstr("  - destinations.mail.type: unknown type 'smtp'; set one of " +
                           KnownDestinationTypes()));
  EXPECT_THAT(m, HasSubstr("  - destinations.feed.type: unknown type 'htttp'; did you mean http? "
                           "set one of " +
                           KnownDestinationTypes()));
  EXPECT_THAT(m, HasSubstr("The configuration has 3 errors."));
}

TEST_F(ConfigTest, KeyOfAnotherDestinationTypeNamesTheType) {
  std::string m = Error(std::string(kMinimal) +
                        "destinations:\n"
                        "  orders: {type: http, baseUrl: 'http://127.0.0.1:1', fsync: false}\n"
                        "  log: {type: file, path: /tmp/l, baseUrl: 'http://127.0.0.1:1'}\n");
  EXPECT_THAT(m, HasSubstr("  - destinations.orders.fsync: unknown key for type http; type file "
                           "takes it"));
  EXPECT_THAT(m, HasSubstr("  - destinations.log.baseUrl: unknown key for type file; type http "
                           "takes it"));
  // A key no type takes gets a did-you-mean.
  EXPECT_THAT(Error(std::string(kMinimal) +
                    "destinations:\n  o: {type: http, baseUrl: 'http://h', timeoutMS: 5}\n"),
              HasSubstr("destinations.o.timeoutMS: unknown key; did you mean timeoutMs?"));
}

TEST_F(ConfigTest, DestinationBlockValidatorRuns) {
  // http's validator refuses credentials in baseUrl; the problem carries the block's path.
  std::string m = Error(std::string(kMinimal) +
                        "destinations:\n  o: {type: http, baseUrl: 'http://u:p@127.0.0.1:1'}\n");
  EXPECT_THAT(m, HasSubstr("  - destinations.o.baseUrl: "));
  EXPECT_THAT(m, HasSubstr("The configuration has 1 error."));
}

TEST_F(ConfigTest, BadGlobsAreReported) {
  std::string m = Error(std::string(kMinimal) +
                        "destinations:\n  a: {type: file, path: /tmp/a}\n"
                        "routes:\n  - {topicPattern: 'order.***', destination: a}\n"
                        "  - {topicPattern: '  ', destination: a}\n");
  EXPECT_THAT(m, HasSubstr("  - routes[0].topicPattern: the topic pattern 'order.***' contains "
                           "'***'"));
  EXPECT_THAT(m, HasSubstr("  - routes[1].topicPattern: the topic pattern is blank"));
}

TEST_F(ConfigTest, BadDurationsAreReported) {
  std::string m = Error(std::string(kMinimal) +
                        "retention:\n  outbox: {policy: AGE, maxAge: 7 days, "
                        "cleanupInterval: 10}\n");
  EXPECT_THAT(m, HasSubstr("  - retention.outbox.maxAge: must be a duration <whole "
                           "number><s|m|h|d> such as 30s, 15m, 24h or 7d, got '7 days'"));
  EXPECT_THAT(m, HasSubstr("  - retention.outbox.cleanupInterval: must be a duration"));
  for (const char* bad : {"-1d", "1w", "d", "1.5h"}) {
    EXPECT_THAT(
        Error(std::string(kMinimal) + "retention:\n  outbox: {cleanupInterval: '" + bad + "'}\n"),
        HasSubstr("retention.outbox.cleanupInterval: must be a duration"))
        << bad;
  }
  Result<Config> ok = Load(std::string(kMinimal) +
                           "retention:\n  outbox: {policy: COUNT, maxCount: 5, "
                           "cleanupInterval: 45s}\n");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->retention.outbox.cleanup_interval_ms, 45000);
  EXPECT_EQ(ok->retention.outbox.max_count, 5);
}

TEST_F(ConfigTest, RetentionPolicyNeedsItsLimit) {
  EXPECT_THAT(Error(std::string(kMinimal) + "retention:\n  outbox: {policy: AGE}\n"),
              HasSubstr("  - retention.outbox.maxAge: required when retention.outbox.policy is "
                        "AGE"));
  EXPECT_THAT(Error(std::string(kMinimal) + "retention:\n  outbox: {policy: COUNT}\n"),
              HasSubstr("  - retention.outbox.maxCount: required when retention.outbox.policy "
                        "is COUNT"));
}

TEST_F(ConfigTest, SecretFromFileDropsTheTrailingNewline) {
  std::string pw = Write("db-password", "s3cret-value\n");
  std::string token = Write("token", "tok-1\r\n");
  Result<Config> c = Load(
      "database:\n  type: postgresql\n  url: postgres://127.0.0.1/app\n"
      "  password: file:" +
      pw +
      "\n"
      "admin:\n  enabled: true\n  auth: {type: bearer, token: 'file:" +
      token + "'}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.password, "s3cret-value");
  EXPECT_EQ(c->admin.auth->options.at("token"), "tok-1");
}

TEST_F(ConfigTest, MissingSecretFileNamesTheKeyNotTheContent) {
  std::string missing = (dir_ / "nope").string();
  std::string m = Error(std::string(kMinimal) +
                        "admin:\n  enabled: true\n"
                        "  auth: {type: api-key, key: 'file:" +
                        missing + "'}\n");
  EXPECT_THAT(m, HasSubstr("  - admin.auth.key: cannot read the secret file '" + missing +
                           "': No such file or directory"));
  EXPECT_THAT(m, HasSubstr("The configuration has 1 error."));  // no admin guard on top
}

TEST_F(ConfigTest, EnvironmentOverridesKeys) {
  Result<Config> c = Load(std::string(kMinimal) +
                              "outbox: {batchSize: 100}\n"
                              "destinations:\n  orders: {type: file, path: /tmp/o}\n"
                              "  Order-Api: {type: http, baseUrl: 'http://127.0.0.1:1'}\n"
                              "routes:\n  - {topicPattern: old, destination: orders}\n"
                              "  - {topicPattern: old2, destination: orders}\n",
                          {
                              {"QUEUEBOX_OUTBOX_BATCHSIZE", "7"},
                              {"QUEUEBOX_OUTBOX_POLL__INTERVAL__MS", "250"},
                              {"QUEUEBOX_OUTBOX_NOTIFY_ENABLED", "TRUE"},
                              {"QUEUEBOX_DATABASE_COLUMNMAPPING_OUTBOX_AGGREGATETYPE", "kind"},
                              {"QUEUEBOX_ROUTES_0_TOPICPATTERN", "order.*"},
                              {"QUEUEBOX_ROUTES_0_DESTINATION", "new_dest"},
                              {"QUEUEBOX_DESTINATIONS_NEW__DEST_TYPE", "file"},
                              {"QUEUEBOX_DESTINATIONS_NEW__DEST_PATH", "/tmp/new"},
                              {"QUEUEBOX_DESTINATIONS_NEW__DEST_HEADERS_X__TEAM", "ops"},
                              {"QUEUEBOX_DESTINATIONS_ORDERAPI_TIMEOUTMS", "900"},
                              {"QUEUEBOX_CONFIG_FILE", "/ignored/when/a/file/is/given"},
                              {"OTHER_VAR", "not ours"},
                          });
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->outbox.batch_size, 7);
  EXPECT_EQ(c->outbox.poll_interval_ms, 250);
  EXPECT_TRUE(c->outbox.notify);
  EXPECT_EQ(c->database.columns.aggregate_type, "kind");
  // A list set by env replaces the YAML list.
  ASSERT_EQ(c->routes.size(), 1u);
  EXPECT_EQ(c->routes[0].topic_pattern, "order.*");
  EXPECT_EQ(c->routes[0].destination, "new_dest");
  // `__` is a literal `_`; new map keys are lower case.
  ASSERT_EQ(c->destinations.count("new_dest"), 1u);
  EXPECT_EQ(c->destinations.at("new_dest").options.at("path"), "/tmp/new");
  EXPECT_EQ(c->destinations.at("new_dest").headers.at("x_team"), "ops");
  // An existing map key is matched ignoring case, '-' and '_'.
  EXPECT_EQ(c->destinations.at("Order-Api").options.at("timeoutMs"), 900);
  EXPECT_EQ(c->destinations.size(), 3u);
}

TEST_F(ConfigTest, EnvironmentSetsAdminAuthAndSecretFiles) {
  std::string pw = Write("pw", "from-file\n");
  Result<Config> c = Load("database: {type: postgresql, url: 'postgresql://127.0.0.1/app'}\n",
                          {{"QUEUEBOX_DATABASE_PASSWORD", "file:" + pw},
                           {"QUEUEBOX_ADMIN_ENABLED", "true"},
                           {"QUEUEBOX_ADMIN_AUTH_TYPE", "api-key"},
                           {"QUEUEBOX_ADMIN_AUTH_KEY", "k-1"},
                           {"QUEUEBOX_ADMIN_AUTH_HEADERNAME", "X-Key"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.password, "from-file");
  ASSERT_TRUE(c->admin.auth.has_value());
  EXPECT_EQ(c->admin.auth->type, "api-key");
  EXPECT_EQ(c->admin.auth->options.at("key"), "k-1");
  EXPECT_EQ(c->admin.auth->options.at("headerName"), "X-Key");

  std::string m = Error(kMinimal, {{"QUEUEBOX_DATABASE_PASSWORD", "file:" + pw + ".missing"}});
  EXPECT_THAT(m, HasSubstr("  - database.password (from QUEUEBOX_DATABASE_PASSWORD): cannot read "
                           "the secret file '" +
                           pw + ".missing'"));
}

TEST_F(ConfigTest, EnvironmentAloneIsAConfiguration) {
  ConfigSource source;
  source.default_file = (dir_ / "no-default.yml").string();
  source.env = {{"QUEUEBOX_DATABASE_URL", "/tmp/env-only.db"},
                {"QUEUEBOX_SERVER_HTTPPORT", "8181"}};
  Result<Config> c = LoadConfig(source);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/env-only.db");
  EXPECT_EQ(c->server.http_port, 8181);
}

TEST_F(ConfigTest, FileFromQueueboxConfigFile) {
  ConfigSource source;
  source.default_file = (dir_ / "no-default.yml").string();
  source.env = {{"QUEUEBOX_CONFIG_FILE", Write("named.yml", "database: {url: /tmp/named.db}\n")}};
  Result<Config> c = LoadConfig(source);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/named.db");

  // A named file that does not exist is skipped, as in QueueBox; with nothing else set that is
  // "no configuration" naming the file.
  source.env = {{"QUEUEBOX_CONFIG_FILE", (dir_ / "absent.yml").string()}};
  c = LoadConfig(source);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("2. The file " + (dir_ / "absent.yml").string() +
                                              ", which QUEUEBOX_CONFIG_FILE names"));
}

TEST_F(ConfigTest, NoSourceNamesTheSources) {
  ConfigSource source;
  source.default_file = (dir_ / "no-default.yml").string();
  source.env = {{"HOME", "/root"}, {"QUEUEBOX_SERVICE_HOST", "10.0.0.1"}};
  Result<Config> c = LoadConfig(source);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr("No configuration was found"), HasSubstr("--config"),
                    HasSubstr("QUEUEBOX_CONFIG_FILE"), HasSubstr("QUEUEBOX_DATABASE_URL")));
}

TEST_F(ConfigTest, UnboundQueueboxVariableIsAnError) {
  std::string m = Error(kMinimal, {
                                      {"QUEUEBOX_OUTBOX_BATCHSZIE", "5"},
                                      {"QUEUEBOX_ROUTES_X_DESTINATION", "a"},
                                      // Kubernetes service links: ignored.
                                      {"QUEUEBOX_SERVICE_HOST", "10.0.0.1"},
                                      {"QUEUEBOX_SERVICE_PORT_HTTP", "80"},
                                      {"QUEUEBOX_PORT", "tcp://10.0.0.1:80"},
                                      {"QUEUEBOX_PORT_8080_TCP_ADDR", "10.0.0.1"},
                                  });
  EXPECT_THAT(m, HasSubstr("The configuration has 2 errors."));
  EXPECT_THAT(m, HasSubstr("  - QUEUEBOX_OUTBOX_BATCHSZIE: this QUEUEBOX_ variable names no "
                           "configuration key; did you mean QUEUEBOX_OUTBOX_BATCHSIZE?"));
  EXPECT_THAT(m, HasSubstr("  - QUEUEBOX_ROUTES_X_DESTINATION: this QUEUEBOX_ variable names no "
                           "configuration key"));
}

TEST_F(ConfigTest, ErrorsNameTheVariableAValueCameFrom) {
  std::string m = Error(kMinimal, {{"QUEUEBOX_OUTBOX_BATCHSIZE", "0"}});
  EXPECT_THAT(m, HasSubstr("  - outbox.batchSize (from QUEUEBOX_OUTBOX_BATCHSIZE): must be "
                           "between 1 and 2147483647, got 0"));
  // Two variables for one key.
  EXPECT_THAT(
      Error(kMinimal, {{"QUEUEBOX_OUTBOX_BATCHSIZE", "1"}, {"QUEUEBOX_OUTBOX_BATCH__SIZE", "2"}}),
      HasSubstr("  - QUEUEBOX_OUTBOX_BATCH__SIZE: sets outbox.batchSize, which "
                "QUEUEBOX_OUTBOX_BATCHSIZE sets too"));
  // A list from env must be numbered without gaps.
  EXPECT_THAT(
      Error(std::string(kMinimal) + "destinations: {a: {type: file, path: /tmp/a}}\n",
            {{"QUEUEBOX_ROUTES_1_TOPICPATTERN", "x"}, {"QUEUEBOX_ROUTES_1_DESTINATION", "a"}}),
      HasSubstr("  - routes[0]: missing route"));
}

TEST_F(ConfigTest, PlaceholdersWithAndWithoutDefault) {
  Result<Config> c = Load(
      "database: {url: '${DB_DIR}/q.db'}\nserver: {address: '${BIND:-0.0.0.0}', "
      "httpPort: '${PORT:-8088}'}\nlogging: {level: '${LEVEL:-warn}'}\n",
      {{"DB_DIR", "/var/lib/qb"}, {"LEVEL", ""}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/var/lib/qb/q.db");
  EXPECT_EQ(c->server.address, "0.0.0.0");
  EXPECT_EQ(c->server.http_port, 8088);
  EXPECT_EQ(c->logging.level, "warn");  // empty counts as unset with :-

  std::string m = Error("database: {url: '${MISSING_DIR}/q.db'}\nserver: {address: '${oops'}\n");
  EXPECT_THAT(m, HasSubstr("  - database.url: placeholder ${MISSING_DIR} names an unset "
                           "environment variable; set MISSING_DIR or write "
                           "${MISSING_DIR:-<default>}"));
  EXPECT_THAT(m, HasSubstr("  - server.address: a placeholder starts with ${ but has no "
                           "closing }"));
}

TEST_F(ConfigTest, ManyProblemsAreReportedInOneMessage) {
  std::string m = Error(R"(
outbox:
  batchSzie: 10
destinations:
  orders: {type: file, path: /tmp/o, baseUrl: 'http://127.0.0.1:1'}
  billing: {path: /tmp/b}
routes:
  - {topicPattern: 'a.*', destination: nowhere}
)");
  EXPECT_THAT(m, HasSubstr("The configuration has 5 errors. Fix each one and start QueueBox "
                           "again.\n  - "));
  EXPECT_THAT(m, HasSubstr("  - outbox.batchSzie: unknown key; did you mean batchSize?"));
  EXPECT_THAT(m, HasSubstr("  - database.url: required key is missing"));
  EXPECT_THAT(m, HasSubstr("  - destinations.orders.baseUrl: unknown key for type file; type "
                           "http takes it"));
  EXPECT_THAT(m, HasSubstr("  - destinations.billing: missing type; set one of"));
  EXPECT_THAT(m, HasSubstr("  - routes[0].destination: no destination is named 'nowhere'"));
  size_t lines = std::count(m.begin(), m.end(), '\n');
  EXPECT_EQ(lines, 5u);
}

TEST_F(ConfigTest, AdminGuardNeedsAuthOrInsecure) {
  std::string m = Error(std::string(kMinimal) + "admin: {enabled: true}\n");
  EXPECT_THAT(m, HasSubstr(std::string("  - admin.auth: ") + cfg::kAdminGuardMessage));
  EXPECT_THAT(m, HasSubstr("Set 'admin.auth' to a bearer token, an API key, or an HMAC "
                           "signature."));
  EXPECT_TRUE(Load(std::string(kMinimal) + "admin: {enabled: true, insecure: true}\n").ok());
  EXPECT_TRUE(Load(std::string(kMinimal) + "admin: {enabled: false}\n").ok());
  EXPECT_THAT(Error(std::string(kMinimal) + "admin: {enabled: true, auth: {token: x}}\n"),
              HasSubstr("  - admin.auth: missing type; set one of api-key, bearer, hmac"));
  EXPECT_THAT(Error(std::string(kMinimal) + "admin: {enabled: true, auth: {type: bearer, "
                                            "key: x}}\n"),
              HasSubstr("  - admin.auth.key: unknown key for type bearer; type api-key takes "
                        "it"));
}

TEST_F(ConfigTest, HmacAuthDefaultsAndChecks) {
  Result<Config> c = Load(std::string(kMinimal) +
                          "admin:\n  enabled: true\n  auth: {type: hmac, secret: s, "
                          "timestampHeader: X-Ts}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const nlohmann::json& o = c->admin.auth->options;
  EXPECT_EQ(o.at("signaturePayloadFormat"), "TIMESTAMP_DOT_BODY");
  EXPECT_EQ(o.at("algorithm"), "HmacSHA256");
  EXPECT_EQ(o.at("headerName"), "X-Signature");
  EXPECT_EQ(o.at("signaturePrefix"), "sha256=");
  EXPECT_EQ(o.at("timestampTolerance"), 300000);

  c = Load(std::string(kMinimal) +
           "admin:\n  auth: {type: hmac, secret: s, signaturePayloadFormat: body}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->admin.auth->options.at("signaturePayloadFormat"), "BODY");

  EXPECT_THAT(Error(std::string(kMinimal) + "admin:\n  auth: {type: hmac, secret: s, "
                                            "signaturePayloadFormat: timestamp-dot-body}\n"),
              HasSubstr("  - admin.auth.signaturePayloadFormat: timestamp-dot-body needs "
                        "timestampHeader"));
  EXPECT_THAT(Error(std::string(kMinimal) +
                    "admin:\n  auth: {type: hmac, secret: s, signaturePayloadFormat: Body}\n"),
              HasSubstr("admin.auth.signaturePayloadFormat: must be one of BODY, "
                        "TIMESTAMP_DOT_BODY, body, timestamp-dot-body (exact case)"));
}

// The option table and the admin auth agree: HmacSHA1 is accepted, and timestampTolerance is
// milliseconds (a duration text is refused, as for every *Ms-style value).
TEST_F(ConfigTest, HmacAlgorithmAndToleranceAgreeWithTheAuth) {
  Result<Config> c = Load(std::string(kMinimal) +
                          "admin:\n  auth: {type: hmac, secret: s, algorithm: HmacSHA1, "
                          "timestampHeader: X-Ts, timestampTolerance: 60000}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->admin.auth->options.at("algorithm"), "HmacSHA1");
  EXPECT_EQ(c->admin.auth->options.at("timestampTolerance"), 60000);
  EXPECT_THAT(Error(std::string(kMinimal) +
                    "admin:\n  auth: {type: hmac, secret: s, timestampTolerance: 5m}\n"),
              HasSubstr("  - admin.auth.timestampTolerance: must be a whole number "
                        "(milliseconds), got '5m'"));
}

TEST_F(ConfigTest, DatabaseUrlMatchesTheType) {
  for (const char* url : {"postgresql://127.0.0.1/app", "postgres://u@127.0.0.1:5432/app",
                          "jdbc:postgresql://127.0.0.1/app"}) {
    Result<Config> c = Load(std::string("database: {type: postgresql, url: '") + url + "'}\n");
    EXPECT_TRUE(c.ok()) << url << ": " << c.status().message();
  }
  std::string m = Error("database: {type: postgresql, url: /var/lib/q.db}\n");
  EXPECT_THAT(m, HasSubstr("  - database.type: is postgresql but database.url is a SQLite file "
                           "path"));
  m = Error("database: {type: sqlite, url: 'postgresql://app:hunter2@127.0.0.1/app'}\n");
  EXPECT_THAT(m, HasSubstr("  - database.type: is sqlite but database.url is a PostgreSQL URL"));
  EXPECT_THAT(m, Not(HasSubstr("hunter2")));
  // Without a type the URL decides (issue 13 item 1; switch_test.cc has the other kinds).
  Result<Config> c = Load("database: {url: 'postgresql://app:hunter2@127.0.0.1/app'}\n");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.type, "postgresql");
}

TEST_F(ConfigTest, IdentifiersAreChecked) {
  std::string m = Error(
      "database: {url: /tmp/x.db, outboxTableName: 'out-box', "
      "columnMapping: {outbox: {topic: '1topic'}}}\n");
  EXPECT_THAT(m, HasSubstr("  - database.outboxTableName: must be a SQL identifier"));
  EXPECT_THAT(m, HasSubstr("  - database.columnMapping.outbox.topic: must be a SQL identifier"));
}

TEST_F(ConfigTest, YamlSyntaxErrorNamesTheLine) {
  Result<Config> c = Load("database:\n  url: [unclosed\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("is not valid YAML: line"));
  c = Load("- a\n- b\n");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("must hold a map of sections"));
}

TEST_F(ConfigTest, ProcessEnvironmentReadsThisProcess) {
  ASSERT_EQ(setenv("QB_CONFIG_TEST_VAR", "a=b", 1), 0);
  std::map<std::string, std::string> env = ProcessEnvironment();
  unsetenv("QB_CONFIG_TEST_VAR");
  EXPECT_EQ(env["QB_CONFIG_TEST_VAR"], "a=b");
}

// The banded distance agrees with the full table whenever the answer is within the limit, and
// says "over" (limit + 1) otherwise. A long unknown name once cost O(n * m) per candidate (the
// config_env fuzz target ran at 30 inputs/s).
TEST(LevenshteinTest, BandedDistanceMatchesTheFullTable) {
  auto full = [](std::string_view a, std::string_view b) {
    return queuebox::testing::FullEditDistance(a, b);
  };
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u, (seed >> 16) & 0x7fff; };
  for (int round = 0; round < 2000; ++round) {
    std::string a, b;
    for (size_t n = next() % 12; n > 0; --n) a += static_cast<char>('a' + next() % 3);
    for (size_t n = next() % 12; n > 0; --n) b += static_cast<char>('a' + next() % 3);
    const size_t limit = next() % 6;
    const size_t want = full(a, b);
    EXPECT_EQ(cfg::Levenshtein(a, b, limit), want <= limit ? want : limit + 1)
        << "a=" << a << " b=" << b << " limit=" << limit;
  }
}

TEST(LevenshteinTest, LongUnknownNameStillGetsItsSuggestionOrNone) {
  EXPECT_EQ(cfg::DidYouMean("batchSzie", {"batchSize", "concurrency"}), "batchSize");
  EXPECT_EQ(cfg::DidYouMean(std::string(4000, 'x'), {"batchSize", "concurrency"}), std::nullopt);
}

}  // namespace
}  // namespace queuebox
