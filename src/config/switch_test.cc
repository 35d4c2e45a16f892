// Unit tests of what a QueueBox user brings along unchanged (issue 13): the database kind from
// the URL, the sources of configuration and their precedence (QueueBox reference §12.1), the
// default bind address, and the `auth` block of an http destination (§7.1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "config/config_test_util.h"
#include "queuebox/config.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Env = std::map<std::string, std::string>;

class SwitchTest : public testing::ConfigFileTest {
 protected:
  // A source with no --config and a default file in the test's folder (absent unless written).
  ConfigSource Source(Env env) {
    ConfigSource s;
    s.env = std::move(env);
    s.default_file = (dir_ / "etc-queuebox.yml").string();
    return s;
  }
  std::string Error(const ConfigSource& source) {
    Result<Config> c = LoadConfig(source);
    EXPECT_FALSE(c.ok());
    if (c.ok()) return "";
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    return c.status().message();
  }
};

// ---- 1. The database kind follows the URL ------------------------------------------------------

TEST_F(SwitchTest, QueueBoxMinimumDeploymentIsThreeVariables) {
  Result<Config> c = LoadConfig(Source({{"QUEUEBOX_DATABASE_URL", "jdbc:postgresql://db:5432/q"},
                                        {"QUEUEBOX_DATABASE_USERNAME", "queuebox"},
                                        {"QUEUEBOX_DATABASE_PASSWORD", "secret"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.type, "postgresql");
  EXPECT_EQ(c->database.username, "queuebox");
  EXPECT_EQ(c->database.password, "secret");
  EXPECT_EQ(c->origin.variables, 3);
  EXPECT_EQ(c->origin.file, "");
}

TEST_F(SwitchTest, DatabaseTypeIsTheKindOfTheUrl) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"postgresql://app@127.0.0.1:5432/app", "postgresql"},
      {"postgres://127.0.0.1/app", "postgresql"},
      {"jdbc:postgresql://127.0.0.1:5432/app?sslmode=disable", "postgresql"},
      {"/var/lib/queuebox/outbox.db", "sqlite"},
      {"outbox.db", "sqlite"},
      {"./data/outbox.db", "sqlite"},
      {"sqlite:outbox.db", "sqlite"},
      {"jdbc:sqlite:/tmp/o.db", "sqlite"},
  };
  for (const auto& [url, kind] : cases) {
    Result<Config> c = LoadConfig(Source({{"QUEUEBOX_DATABASE_URL", url}}));
    ASSERT_TRUE(c.ok()) << url << ": " << c.status().message();
    EXPECT_EQ(c->database.type, kind) << url;
  }
}

TEST_F(SwitchTest, AnExplicitTypeMustAgreeWithTheUrl) {
  Result<Config> ok = LoadConfig(Source(
      {{"QUEUEBOX_DATABASE_TYPE", "postgresql"}, {"QUEUEBOX_DATABASE_URL", "postgres://h/db"}}));
  EXPECT_TRUE(ok.ok()) << ok.status().message();
  std::string m = Error(Source({{"QUEUEBOX_DATABASE_TYPE", "sqlite"},
                                {"QUEUEBOX_DATABASE_URL", "postgresql://app:hunter2@h/db"}}));
  EXPECT_THAT(m, HasSubstr("database.type (from QUEUEBOX_DATABASE_TYPE): is sqlite but "
                           "database.url is a PostgreSQL URL; remove database.type"));
  EXPECT_THAT(m, Not(HasSubstr("hunter2")));
  m = Error(Source(
      {{"QUEUEBOX_DATABASE_TYPE", "postgresql"}, {"QUEUEBOX_DATABASE_URL", "/tmp/outbox.db"}}));
  EXPECT_THAT(m, HasSubstr("is postgresql but database.url is a SQLite file path"));
}

TEST_F(SwitchTest, SqlServerIsRefusedByThisBuild) {
  std::string m =
      Error(Source({{"QUEUEBOX_DATABASE_URL", "jdbc:sqlserver://db:1433;databaseName=q"}}));
  EXPECT_THAT(m, HasSubstr("database.url (from QUEUEBOX_DATABASE_URL): SQL Server is not "
                           "supported by this build"));
  m = Error(Source({{"QUEUEBOX_DATABASE_TYPE", "sqlserver"},
                    {"QUEUEBOX_DATABASE_URL", "jdbc:sqlserver://db:1433"}}));
  EXPECT_THAT(m, HasSubstr("database.type (from QUEUEBOX_DATABASE_TYPE): SQL Server is not "
                           "supported by this build"));
  m = Error(Source({{"QUEUEBOX_DATABASE_TYPE", "sqlserver"}}));
  EXPECT_THAT(m, HasSubstr("SQL Server is not supported by this build"));
}

TEST_F(SwitchTest, AnUnsupportedSchemeIsNotAFileName) {
  std::string m = Error(Source({{"QUEUEBOX_DATABASE_URL", "mysql://app:hunter2@db:3306/q"}}));
  EXPECT_THAT(m, HasSubstr("database.url (from QUEUEBOX_DATABASE_URL): uses the scheme 'mysql', "
                           "which QueueBox C++ does not support"));
  EXPECT_THAT(m, Not(HasSubstr("hunter2")));
  m = Error(Source({{"QUEUEBOX_DATABASE_URL", "jdbc:mysql://db:3306/q"}}));
  EXPECT_THAT(m, HasSubstr("uses the scheme 'jdbc:mysql'"));
  m = Error(Source({{"QUEUEBOX_DATABASE_URL", ""}}));
  EXPECT_THAT(m, HasSubstr("database.url (from QUEUEBOX_DATABASE_URL): is empty"));
}

TEST_F(SwitchTest, NoUrlKeepsTheEmbeddedDefaultAndAsksForOne) {
  std::string m = Error(Source({{"QUEUEBOX_OUTBOX_BATCHSIZE", "10"}}));
  EXPECT_THAT(m, HasSubstr("  - database.url: required key is missing"));
  EXPECT_THAT(m, Not(HasSubstr("database.type")));
}

// ---- 2. Where configuration comes from ---------------------------------------------------------

TEST_F(SwitchTest, TheDefaultFileIsReadWhenNothingNamesAFile) {
  ConfigSource s = Source({});
  std::ofstream(s.default_file) << "database: {url: /tmp/from-default.db}\n";
  Result<Config> c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/from-default.db");
  EXPECT_EQ(c->origin.file, s.default_file);
  EXPECT_EQ(c->origin.variables, 0);
}

TEST_F(SwitchTest, PrecedenceIsVariablesThenOneFile) {
  ConfigSource s = Source({});
  std::ofstream(s.default_file) << "database: {url: /tmp/default.db}\noutbox: {batchSize: 7}\n";
  std::string named = Write("named.yml", "database: {url: /tmp/named.db}\n");
  std::string given = Write("given.yml", "database: {url: /tmp/given.db}\n");
  // QUEUEBOX_CONFIG_FILE replaces the default file (they never merge).
  s.env = {{"QUEUEBOX_CONFIG_FILE", named}};
  Result<Config> c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/named.db");
  EXPECT_EQ(c->outbox.batch_size, 100);
  // --config replaces both.
  s.file = given;
  c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/given.db");
  // A variable wins over the file, key by key.
  s.env["QUEUEBOX_DATABASE_URL"] = "/tmp/variable.db";
  c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/variable.db");
  EXPECT_EQ(c->origin.file, given);
  EXPECT_EQ(c->origin.variables, 1);
}

TEST_F(SwitchTest, AGivenConfigFileMustExist) {
  ConfigSource s = Source({{"QUEUEBOX_DATABASE_URL", "/tmp/x.db"}});
  s.file = (dir_ / "absent.yml").string();
  std::string m = Error(s);
  EXPECT_THAT(m, HasSubstr("Cannot read the configuration file " + s.file));
}

// QueueBox's .env.example keeps QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml in env-only
// deployments: a named file that does not exist is skipped (and reported), not an error.
TEST_F(SwitchTest, AMissingNamedFileLeavesTheVariables) {
  std::string absent = (dir_ / "absent.yml").string();
  Result<Config> c = LoadConfig(
      Source({{"QUEUEBOX_CONFIG_FILE", absent}, {"QUEUEBOX_DATABASE_URL", "/tmp/env.db"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->database.url, "/tmp/env.db");
  EXPECT_EQ(c->origin.skipped, absent);
  EXPECT_EQ(c->origin.file, "");
}

TEST_F(SwitchTest, NoSourceAtAllNamesEverySource) {
  std::string m = Error(Source({{"HOME", "/root"}, {"QUEUEBOX_SERVICE_HOST", "10.0.0.1"}}));
  EXPECT_THAT(m, AllOf(HasSubstr("No configuration was found"),
                       HasSubstr("1. The QUEUEBOX_* environment variables, for example "
                                 "QUEUEBOX_DATABASE_URL, QUEUEBOX_DATABASE_USERNAME and "
                                 "QUEUEBOX_DATABASE_PASSWORD"),
                       HasSubstr("2. The file " + (dir_ / "etc-queuebox.yml").string()),
                       HasSubstr("QUEUEBOX_CONFIG_FILE"), HasSubstr("--config"),
                       HasSubstr("Set the environment variables, or write the file.")));
  // An empty file is no configuration either.
  ConfigSource s = Source({});
  std::ofstream(s.default_file) << "# nothing yet\n";
  EXPECT_THAT(Error(s), HasSubstr("No configuration was found"));
  std::string absent = (dir_ / "absent.yml").string();
  EXPECT_THAT(Error(Source({{"QUEUEBOX_CONFIG_FILE", absent}})),
              HasSubstr("2. The file " + absent + ", which QUEUEBOX_CONFIG_FILE names"));
}

TEST_F(SwitchTest, TheDefaultFileVariableIsOursAndNotAKey) {
  Result<Config> c = LoadConfig(Source({{"QUEUEBOX_CPP_DEFAULT_CONFIG_FILE", "/nowhere.yml"},
                                        {"QUEUEBOX_DATABASE_URL", "/tmp/x.db"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->origin.variables, 1);
  std::string file = Write("moved.yml", "database: {url: /tmp/moved.db}\n");
  ASSERT_EQ(setenv(kDefaultConfigFileVar, file.c_str(), 1), 0);
  ConfigSource s = ProcessConfigSource("");
  unsetenv(kDefaultConfigFileVar);
  EXPECT_EQ(s.default_file, file);
  EXPECT_EQ(ConfigSource().default_file, "/etc/queuebox/queuebox.yml");
}

// The container image sets QUEUEBOX_CPP_LOG_STREAM=stdout: not a key, and alone it is still no
// configuration, so the image without variables fails as the binary does outside it.
TEST_F(SwitchTest, TheLogStreamVariableIsOursAndNotAKey) {
  Result<Config> c =
      LoadConfig(Source({{kLogStreamVar, "stdout"}, {"QUEUEBOX_DATABASE_URL", "/tmp/x.db"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->origin.variables, 1);
  EXPECT_THAT(Error(Source({{kLogStreamVar, "stdout"}})), HasSubstr("No configuration was found"));
}

// ---- 3. Reachable where QueueBox is reachable --------------------------------------------------

TEST_F(SwitchTest, ThePortsServeEveryInterfaceByDefault) {
  Result<Config> c = LoadConfig(Source({{"QUEUEBOX_DATABASE_URL", "/tmp/x.db"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.address, "0.0.0.0");
  EXPECT_EQ(c->server.http_port, 8080);
  c = LoadConfig(
      Source({{"QUEUEBOX_DATABASE_URL", "/tmp/x.db"}, {"QUEUEBOX_SERVER_ADDRESS", "127.0.0.1"}}));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->server.address, "127.0.0.1");
}

// ---- 6. Destination auth (validation; delivery is tested against real servers) ----------------

constexpr char kDb[] = "database: {url: /tmp/x.db}\n";

TEST_F(SwitchTest, Oauth2BlockAsQueueBoxDocumentsIt) {
  Result<Config> c = Load(std::string(kDb) + R"(
http:
  blockPrivateAddresses: true
destinations:
  protected-api:
    type: http
    baseUrl: https://api.example.com
    path: /events
    auth:
      type: oauth2
      clientId: queuebox
      clientSecret: ${CLIENT_SECRET}
      tokenUrl: https://auth.example.com/oauth/token
      scope: api:write
      extraParams:
        audience: https://api.example.com
)",
                          {{"CLIENT_SECRET", "cs-123"}});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_TRUE(c->http.block_private_addresses);
  const DestinationConfig& d = c->destinations.at("protected-api");
  EXPECT_EQ(d.options["auth"]["type"], "oauth2");
  // The destination binds the block (src/destinations/http/http_auth_test.cc); here: the values
  // as loaded, the placeholder resolved.
  const auto& auth = d.options["auth"];
  EXPECT_EQ(auth["clientId"], "queuebox");
  EXPECT_EQ(auth["clientSecret"], "cs-123");
  EXPECT_EQ(auth["scope"], "api:write");
  EXPECT_EQ(auth["extraParams"]["audience"], "https://api.example.com");
  std::string printed = RenderMasked(*c);
  EXPECT_THAT(printed, Not(HasSubstr("cs-123")));
}

TEST_F(SwitchTest, AuthBlocksAreStrict) {
  Result<Config> c = Load(std::string(kDb) + R"(
destinations:
  a: {type: http, baseUrl: http://h, auth: {type: oauth2, clientId: q, tokenUrl: 'http://h/t'}}
  f: {type: http, baseUrl: http://h, auth: {type: oauth2, clientId: q, clientSecret: s,
                                            tokenUrl: 'http://u:p@h/t'}}
  b: {type: http, baseUrl: http://h, auth: {type: basic, username: u}}
  c: {type: http, baseUrl: http://h, auth: {type: bearer, token: t}}
  d: {type: http, baseUrl: http://h, auth: {headerValue: v}}
  e: {type: http, baseUrl: http://h, auth: {type: header, headerValue: v, scope: x}}
)");
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_THAT(m, HasSubstr("destinations.a.auth.clientSecret: required key is missing"));
  EXPECT_THAT(m, HasSubstr("destinations.f.auth.tokenUrl: must not contain credentials"));
  EXPECT_THAT(m, HasSubstr("destinations.b.auth.password: required key is missing"));
  EXPECT_THAT(m, HasSubstr("destinations.c.auth.type: "));
  EXPECT_THAT(m, HasSubstr("basic, header, oauth2"));
  EXPECT_THAT(m, HasSubstr("destinations.d.auth"));
  EXPECT_THAT(m, HasSubstr("destinations.e.auth.scope: unknown key for type header; type oauth2 "
                           "takes it"));
  EXPECT_THAT(m, Not(HasSubstr("u:p@")));
}

TEST_F(SwitchTest, AuthFromVariablesWithSecretsFromFiles) {
  std::string secret = Write("pw", "s3cret-pw\n");
  Result<Config> c = LoadConfig(Source({
      {"QUEUEBOX_DATABASE_URL", "/tmp/x.db"},
      {"QUEUEBOX_DESTINATIONS_LEGACY_TYPE", "http"},
      {"QUEUEBOX_DESTINATIONS_LEGACY_BASEURL", "https://legacy.example.com"},
      {"QUEUEBOX_DESTINATIONS_LEGACY_AUTH_TYPE", "basic"},
      {"QUEUEBOX_DESTINATIONS_LEGACY_AUTH_USERNAME", "queuebox"},
      {"QUEUEBOX_DESTINATIONS_LEGACY_AUTH_PASSWORD", "file:" + secret},
      {"QUEUEBOX_DESTINATIONS_STATIC_TYPE", "http"},
      {"QUEUEBOX_DESTINATIONS_STATIC_BASEURL", "https://static.example.com"},
      {"QUEUEBOX_DESTINATIONS_STATIC_AUTH_TYPE", "header"},
      {"QUEUEBOX_DESTINATIONS_STATIC_AUTH_HEADERVALUE", "Bearer st-456"},
  }));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->destinations.at("legacy").options["auth"]["password"], "s3cret-pw");
  // headerName defaults to Authorization.
  EXPECT_EQ(c->destinations.at("static").options["auth"]["headerName"], "Authorization");
  std::string printed = RenderMasked(*c);
  EXPECT_THAT(printed, AllOf(Not(HasSubstr("s3cret-pw")), Not(HasSubstr("st-456"))));
}

}  // namespace
}  // namespace queuebox
