// A QueueBox user's habits against the queuebox binary (issue 13 items 1-3): the database kind
// from the URL, the three-variable deployment, the default configuration file, `--config` after
// the subcommand, the "no source" message, and the bind address of the ports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sqlite3.h>

#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;
using testing::TempDir;
using Env = std::map<std::string, std::string>;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);

// Every run names a default file in its own folder, so this host's /etc/queuebox never counts.
Env Hermetic(const TempDir& dir, Env env = {}) {
  env.emplace("QUEUEBOX_CPP_DEFAULT_CONFIG_FILE", dir.File("etc-queuebox.yml"));
  return env;
}

bool WaitFor(const std::function<bool()>& cond, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return cond();
}

// The local address a TCP socket listens on for `port` ("0.0.0.0", "127.0.0.1"), read from
// /proc/net/tcp (no traffic); "" when nothing listens.
std::string ListeningAddress(int port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string slot, local, remote, state;
    f >> slot >> local >> remote >> state;
    if (state != "0A") continue;  // TCP_LISTEN
    size_t colon = local.find(':');
    if (std::stoi(local.substr(colon + 1), nullptr, 16) != port) continue;
    uint32_t a = static_cast<uint32_t>(std::stoul(local.substr(0, colon), nullptr, 16));
    return std::to_string(a & 0xFF) + "." + std::to_string((a >> 8) & 0xFF) + "." +
           std::to_string((a >> 16) & 0xFF) + "." + std::to_string(a >> 24);
  }
  return "";
}

int HealthStatus(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(5);
  auto r = c.Get("/health");
  return r ? r->status : -1;
}

// `queuebox migrate` on dir's q.yml; its output in `out`.
int Migrate(const TempDir& dir, std::string* out) {
  return RunCommand(kBinary, {"migrate", "--config", dir.File("q.yml")}, Hermetic(dir), out);
}

TEST(SwitchE2ETest, ConfigIsAcceptedAfterTheSubcommand) {
  TempDir dir;
  dir.Write("q.yml", "database:\n  url: " + dir.File("outbox.db") + "\n");
  std::string out;
  EXPECT_EQ(Migrate(dir, &out), 0) << out;
  EXPECT_EQ(RunCommand(kBinary, {"check-config", "-c", dir.File("q.yml")}, Hermetic(dir), &out), 0)
      << out;
  EXPECT_THAT(out, HasSubstr("# Read from: file " + dir.File("q.yml")));
  EXPECT_EQ(
      RunCommand(kBinary, {"dead", "list", "--config", dir.File("q.yml")}, Hermetic(dir), &out), 0)
      << out;
  EXPECT_EQ(RunCommand(kBinary, {"--config", dir.File("q.yml"), "status"}, Hermetic(dir), &out), 0)
      << out;
}

// A renamed table with the bundled migrations on: `run` refuses before it connects, and so does
// check-config (it said "valid" while `run` exited 1). With migrate false both accept it.
TEST(SwitchE2ETest, CheckConfigRefusesMigratingARenamedSchemaAsRunDoes) {
  TempDir dir;
  const std::string renamed = "database:\n  url: " + dir.File("outbox.db") +
                              "\n  outboxTableName: qb_outbox\n  columnMapping:\n    outbox:\n"
                              "      payload: body\n";
  dir.Write("q.yml", renamed + "  migrate: true\n");
  std::string out;
  EXPECT_EQ(RunCommand(kBinary, {"check-config", "-c", dir.File("q.yml")}, Hermetic(dir), &out), 1)
      << out;
  EXPECT_THAT(out, AllOf(HasSubstr("database.outboxTableName and "
                                   "database.columnMapping.outbox.payload"),
                         HasSubstr("Set 'database.migrate' to false"),
                         Not(HasSubstr("The configuration is valid"))));
  EXPECT_EQ(
      RunCommand(kBinary, {"run", "--until-idle", "-c", dir.File("q.yml")}, Hermetic(dir), &out), 1)
      << out;
  EXPECT_THAT(out, HasSubstr("Set 'database.migrate' to false"));
  dir.Write("q.yml", renamed + "  migrate: false\n");
  EXPECT_EQ(RunCommand(kBinary, {"check-config", "-c", dir.File("q.yml")}, Hermetic(dir), &out), 0)
      << out;
}

TEST(SwitchE2ETest, TheDefaultFileIsReadWithoutAnyFlag) {
  TempDir dir;
  dir.Write("etc-queuebox.yml", "database:\n  url: " + dir.File("outbox.db") + "\n");
  std::string out;
  EXPECT_EQ(RunCommand(kBinary, {"check-config"}, Hermetic(dir), &out), 0) << out;
  EXPECT_THAT(out, AllOf(HasSubstr("# Read from: file " + dir.File("etc-queuebox.yml")),
                         HasSubstr("type: \"sqlite\"")));
  // QUEUEBOX_CONFIG_FILE names another file; a variable wins over both.
  dir.Write("named.yml", "database:\n  url: " + dir.File("named.db") + "\n");
  EXPECT_EQ(RunCommand(kBinary, {"check-config"},
                       Hermetic(dir, {{"QUEUEBOX_CONFIG_FILE", dir.File("named.yml")},
                                      {"QUEUEBOX_OUTBOX_BATCHSIZE", "7"}}),
                       &out),
            0)
      << out;
  EXPECT_THAT(out, AllOf(HasSubstr(dir.File("named.db")), HasSubstr("batchSize: 7"),
                         HasSubstr("# Read from: file " + dir.File("named.yml") +
                                   " and 1 QUEUEBOX_* variable")));
}

TEST(SwitchE2ETest, NoSourceAtAllNamesTheSources) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(RunCommand(kBinary, {"run"}, Hermetic(dir), &out), 1) << out;
  EXPECT_THAT(out, AllOf(HasSubstr("No configuration was found"),
                         HasSubstr("QUEUEBOX_DATABASE_URL, QUEUEBOX_DATABASE_USERNAME and "
                                   "QUEUEBOX_DATABASE_PASSWORD"),
                         HasSubstr("2. The file " + dir.File("etc-queuebox.yml"))));
}

TEST(SwitchE2ETest, CheckConfigRefusesWhatThisBuildCannotOpen) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(
      RunCommand(kBinary, {"check-config"},
                 Hermetic(dir, {{"QUEUEBOX_DATABASE_URL", "mysql://app:hunter2@db/shop"}}), &out),
      1);
  EXPECT_THAT(out, AllOf(HasSubstr("database.url (from QUEUEBOX_DATABASE_URL): uses the scheme "
                                   "'mysql'"),
                         Not(HasSubstr("hunter2"))));
  EXPECT_FALSE(std::ifstream("mysql:").good()) << "the URL must not become a file name";
  EXPECT_EQ(RunCommand(kBinary, {"check-config"},
                       Hermetic(dir, {{"QUEUEBOX_DATABASE_URL",
                                       "jdbc:sqlserver://db:1433;databaseName=queuebox"}}),
                       &out),
            1);
  EXPECT_THAT(out, HasSubstr("SQL Server is not supported by this build"));
}

// QueueBox's minimum deployment: three variables, a jdbc:postgresql:// URL, no type.
TEST(SwitchE2ETest, ThreeVariablesRunOnPostgresql) {
  std::string admin_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", admin_url);
  testing::TempPgDatabase pg(admin_url);
  // postgresql://postgres@127.0.0.1:54329/<db> -> jdbc:postgresql://127.0.0.1:54329/<db>
  std::string rest = pg.url().substr(pg.url().find('@') + 1);
  std::string user = pg.url().substr(std::string("postgresql://").size(),
                                     pg.url().find('@') - std::string("postgresql://").size());
  TempDir dir;
  Env env =
      Hermetic(dir, {{"QUEUEBOX_DATABASE_URL", "jdbc:postgresql://" + rest},
                     {"QUEUEBOX_DATABASE_USERNAME", user},
                     {"QUEUEBOX_DATABASE_PASSWORD", "not-checked-by-trust-auth"},
                     {"QUEUEBOX_SERVER_ADDRESS", "127.0.0.1"},
                     {"QUEUEBOX_SERVER_HTTPPORT", std::to_string(testing::UnusedLoopbackPort())}});
  std::string out;
  ASSERT_EQ(RunCommand(kBinary, {"check-config"}, env, &out), 0) << out;
  EXPECT_THAT(out, AllOf(HasSubstr("type: \"postgresql\""), HasSubstr("# Read from: 5 QUEUEBOX_"),
                         Not(HasSubstr("not-checked-by-trust-auth"))));
  ASSERT_EQ(RunCommand(kBinary, {"migrate"}, env, &out), 0) << out;
  EXPECT_EQ(pg.Scalar("SELECT count(*) FROM outbox"), "0");
  EXPECT_EQ(RunCommand(kBinary, {"run", "--until-idle"}, env, &out), 0) << out;
}

// QueueBox serves its port on every interface; server.address restricts it. Read from the
// kernel's socket table: no traffic leaves loopback.
TEST(SwitchE2ETest, ThePortServesEveryInterfaceUnlessRestricted) {
  TempDir dir;
  dir.Write("q.yml", "database:\n  url: " + dir.File("outbox.db") + "\n");
  std::string out;
  ASSERT_EQ(Migrate(dir, &out), 0) << out;
  for (const std::string address : {"", "127.0.0.1"}) {
    int port = testing::UnusedLoopbackPort();
    Env env = Hermetic(dir, {{"QUEUEBOX_SERVER_HTTPPORT", std::to_string(port)}});
    if (!address.empty()) env["QUEUEBOX_SERVER_ADDRESS"] = address;
    ChildProcess relay(kBinary, {"run", "--config", dir.File("q.yml")}, env,
                       dir.File("relay" + address + ".log"));
    ASSERT_TRUE(WaitFor([&] { return HealthStatus(port) == 200; }, 20s)) << relay.Log();
    EXPECT_EQ(ListeningAddress(port), address.empty() ? "0.0.0.0" : address) << relay.Log();
    relay.Kill(SIGTERM);
    EXPECT_EQ(relay.Wait(20s), std::optional<int>(0));
  }
}

// A schema kept without V24's table (database.migrate false, as a switching user may run): the
// relay says once that the console's per-minute counts cover this replica only, and neither
// fails nor warns about the table while it runs.
TEST(SwitchE2ETest, ASchemaWithoutTheConsoleActivityTableRunsAndSaysSoOnce) {
  TempDir dir;
  dir.Write("q.yml", "database:\n  url: " + dir.File("outbox.db") + "\n  migrate: false\n");
  std::string out;
  ASSERT_EQ(Migrate(dir, &out), 0) << out;
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("outbox.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE queuebox_console_activity", nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  ASSERT_EQ(RunCommand(kBinary, {"run", "--until-idle", "--config", dir.File("q.yml")},
                       Hermetic(dir), &out),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("per-minute counts cover this replica only"));
  EXPECT_THAT(out, Not(HasSubstr("\"level\":\"warn\"")));
}

}  // namespace
}  // namespace queuebox
