// End to end: the container image (packaging/image, issue 33) built from this build's binary,
// loaded into podman and run against the suite's PostgreSQL on the host network, as QueueBox's
// own image is run: QueueBox's three QUEUEBOX_DATABASE_* variables plus a route, or a
// queuebox.yml mounted at /etc/queuebox/queuebox.yml.
//
// - The archive repeats byte for byte from the same inputs, is tagged queuebox-cpp:<version> and
//   :latest, holds at most 120 MB, and its config runs `queuebox run` as 10001 with a health check
//   that needs no shell.
// - Env only: it migrates, /health/ready answers 200, an inserted row reaches a receiver, the
//   health check passes, it runs as uid 10001 on a read-only root filesystem, logs JSON lines on
//   stdout, and SIGTERM ends it with exit code 0 within 30 s.
// - With a mounted queuebox.yml: a webhook is stored and forwarded, a route transform reshapes a
//   row.
// - A missing or wrong database URL ends with the same error as the binary outside the image.
// - `migrate` as the command migrates and exits 0; the SQLite default runs on the volume.
//
// Skips only where podman is absent (scripts/install-deps.sh installs it: CI runs this).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using testing::HttpReceiver;
using testing::TempDir;
using testing::TempPgDatabase;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const char* const kImgBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);
#ifdef QB_JSONATA_MODULE
constexpr const char* kImgModule = QB_JSONATA_MODULE;
#else
constexpr const char* kImgModule = "";  // built without transforms: no image
#endif
constexpr const char* kPodman = "/usr/bin/podman";
constexpr int64_t kImgMaxBytes = 120LL * 1000 * 1000;
// podman 4.3 on these machines: runc (crun refuses the hybrid cgroups), no CAP_SYS_RESOURCE to
// raise limits, no container networks.
const std::vector<std::string> kImgRunFlags = {
    "--runtime",        "runc",     "--network",       "host",       "--ulimit",
    "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--read-only"};

// podman's output without its own warning lines.
int Podman(const std::vector<std::string>& args, std::string* out = nullptr,
           std::chrono::milliseconds timeout = 120s) {
  std::string raw;
  int code = testing::RunCommand(kPodman, args, {}, &raw, timeout);
  if (out != nullptr) {
    out->clear();
    std::istringstream lines(raw);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("WARN[", 0) == 0 || line.rfind("time=", 0) == 0) continue;
      *out += line + "\n";
    }
  }
  return code;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string Sha256Of(const std::string& file) {
  std::string out;
  testing::RunCommand("/usr/bin/sha256sum", {file}, {}, &out);
  return out.substr(0, 64);
}

// True when 0.0.0.0:<port> can be bound now (the relay in the container binds it).
bool WildcardPortIsFree(int port) {
  int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool free = bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(sock);
  return free;
}

// Builds the archive with packaging/image/build.sh from this build's binary and module; `name`
// (QB_IMAGE_NAME) replaces queuebox-cpp in the tags when set. Appends the output to `log`.
int BuildArchive(const std::string& out_file, const std::string& name, std::string* log) {
  std::map<std::string, std::string> env = {{"QB_IMAGE_BINARY", kImgBinary},
                                            {"QB_IMAGE_MODULE", kImgModule},
                                            {"SOURCE_DATE_EPOCH", "1700000000"}};
  if (!name.empty()) env["QB_IMAGE_NAME"] = name;
  std::string out;
  int code = testing::RunCommand(
      "/bin/bash", {QUEUEBOX_SOURCE_DIR "/packaging/image/build.sh", out_file}, env, &out, 600s);
  *log += out;
  return code;
}

// The "image_id" and "layer" digests build.sh printed.
std::string Digests(const std::string& log) {
  std::smatch m;
  std::regex_search(
      log, m,
      std::regex(R"re("image_id": "sha256:([0-9a-f]{64})", "layer": "sha256:([0-9a-f]{64})")re"));
  return m.empty() ? "" : m[1].str() + " " + m[2].str();
}

// One image for the suite, built twice: with the default tags (checked, not loaded, so that the
// machine's own queuebox-cpp tags stay where they are) and with tags of this run, loaded.
class ImageE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (access(kPodman, X_OK) != 0 || *kImgModule == '\0') return;
    dir_ = new TempDir();
    archive_ = dir_->File("image.tar");
    build_code_ = BuildArchive(archive_, "", &build_log_);
    if (build_code_ != 0) return;
    default_digests_ = Digests(build_log_);
    const std::string loaded = dir_->File("loaded.tar");
    tag_ = "localhost/queuebox-cpp-e2e-" + std::to_string(getpid());
    std::string log;
    build_code_ = BuildArchive(loaded, tag_, &log);
    build_log_ += log;
    if (build_code_ != 0) return;
    loaded_digests_ = Digests(log);
    image_ = loaded_digests_.substr(0, 64);
    // An image this machine already had (a build of the same inputs) stays after the suite.
    loaded_here_ = !image_.empty() && Podman({"image", "exists", image_}) != 0;
    std::string out;
    load_code_ = Podman({"load", "-i", loaded}, &out);
    build_log_ += out;
  }

  static void TearDownTestSuite() {
    if (loaded_here_) {
      Podman({"rmi", "-f", image_});
    } else if (!image_.empty()) {
      Podman({"untag", image_, tag_ + ":" QUEUEBOX_VERSION, tag_ + ":latest"});
    }
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    if (access(kPodman, X_OK) != 0) GTEST_SKIP() << "podman is not installed";
    if (*kImgModule == '\0') GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
    ASSERT_EQ(build_code_, 0) << build_log_;
    ASSERT_EQ(load_code_, 0) << build_log_;
    ASSERT_FALSE(image_.empty()) << build_log_;
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_TRUE(receiver_.Start().ok());
    name_ = "qb-image-e2e-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  void TearDown() override {
    if (!name_.empty()) Podman({"rm", "-f", "-v", name_});
  }

  // QueueBox's three variables, for this test's database.
  std::vector<std::string> DatabaseEnv() const {
    std::smatch m;
    std::regex_search(pg_->url(), m, std::regex(R"(@([^/]+)/([^?]+))"));
    return {"-e", "QUEUEBOX_DATABASE_URL=jdbc:postgresql://" + m[1].str() + "/" + m[2].str(),
            "-e", "QUEUEBOX_DATABASE_USERNAME=postgres",
            "-e", "QUEUEBOX_DATABASE_PASSWORD=not-checked-by-the-trust-cluster"};
  }

  // Starts the container detached with `args` before the image; returns podman's exit code.
  int StartContainer(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"run", "-d", "--name", name_};
    all.insert(all.end(), kImgRunFlags.begin(), kImgRunFlags.end());
    all.insert(all.end(), args.begin(), args.end());
    all.push_back(image_);
    std::string out;
    int code = Podman(all, &out);
    EXPECT_EQ(code, 0) << out;
    return code;
  }

  // The container's output, both streams.
  std::string Logs() {
    std::string out;
    Podman({"logs", name_}, &out);
    return out;
  }

  // The container's stdout alone.
  std::string Stdout() {
    std::string out;
    testing::RunCommand("/bin/sh", {"-c", std::string(kPodman) + " logs " + name_ + " 2>/dev/null"},
                        {}, &out);
    return out;
  }

  // Polls GET /health/ready on the port until 200 (true) or 30 s.
  bool WaitReady(int port) {
    httplib::Client c("127.0.0.1", port);
    c.set_connection_timeout(1);
    c.set_read_timeout(5);
    for (auto end = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(100ms)) {
      auto r = c.Get("/health/ready");
      if (r && r->status == 200) return true;
    }
    return false;
  }

  std::string Inspect(const std::string& format) {
    std::string out;
    Podman({"inspect", "--format", format, name_}, &out);
    return Trim(out);
  }

  std::unique_ptr<TempPgDatabase> pg_;
  HttpReceiver receiver_;
  TempDir local_;
  std::string name_;

  static inline TempDir* dir_ = nullptr;
  static inline std::string archive_, build_log_, image_, tag_, default_digests_, loaded_digests_;
  static inline int build_code_ = -1, load_code_ = -1;
  static inline bool loaded_here_ = false;
};

TEST_F(ImageE2ETest, TheArchiveRepeatsAndCarriesTheConfig) {
  // Same inputs and SOURCE_DATE_EPOCH: the same config and layer, byte for byte (the tags live
  // in manifest.json only), so the same image id. And again, the same archive.
  ASSERT_FALSE(default_digests_.empty()) << build_log_;
  EXPECT_EQ(default_digests_, loaded_digests_);
  std::string again = local_.File("again.tar"), log;
  ASSERT_EQ(BuildArchive(again, "", &log), 0) << log;
  EXPECT_EQ(Sha256Of(again), Sha256Of(archive_));
  EXPECT_LE(static_cast<int64_t>(std::filesystem::file_size(archive_)), kImgMaxBytes);
  std::string out;
  ASSERT_EQ(testing::RunCommand("/bin/tar", {"-xOf", archive_, "manifest.json"}, {}, &out), 0);
  EXPECT_EQ(Json::parse(out)[0]["RepoTags"],
            Json::array({"queuebox-cpp:" QUEUEBOX_VERSION, "queuebox-cpp:latest"}));

  ASSERT_EQ(Podman({"image", "inspect", image_}, &out), 0) << out;
  Json image = Json::parse(out)[0];
  EXPECT_LE(image["Size"].get<int64_t>(), kImgMaxBytes);
  EXPECT_THAT(image["RepoTags"].dump(), HasSubstr(tag_ + ":" QUEUEBOX_VERSION));
  const Json& config = image["Config"];
  EXPECT_EQ(config["User"], "10001:10001");
  EXPECT_EQ(config["Entrypoint"], Json::array({"queuebox"}));
  EXPECT_EQ(config["Cmd"], Json::array({"run"}));
  EXPECT_TRUE(config["ExposedPorts"].contains("8080/tcp")) << config.dump();
  ASSERT_EQ(Podman({"image", "inspect", "--format", "{{json .HealthCheck}}", image_}, &out), 0);
  EXPECT_EQ(Json::parse(out)["Test"], Json::array({"CMD", "queuebox", "probe"})) << out;
}

// The Kubernetes pod's view of the process: its host pid's uid and its root mount.
void ExpectUid10001OnReadOnlyRoot(const std::string& host_pid) {
  std::ifstream status("/proc/" + host_pid + "/status");
  std::string line, uid_line;
  while (std::getline(status, line)) {
    if (line.rfind("Uid:", 0) == 0) uid_line = line;
  }
  EXPECT_THAT(uid_line, ::testing::MatchesRegex(R"(Uid:\s+10001\s+10001\s+10001\s+10001)"));
  std::ifstream mounts("/proc/" + host_pid + "/mounts");
  bool root_ro = false;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, point, type, options;
    fields >> device >> point >> type >> options;
    if (point == "/") root_ro = options.rfind("ro,", 0) == 0 || options == "ro";
  }
  EXPECT_TRUE(root_ro) << "the root filesystem is not mounted read-only";
}

TEST_F(ImageE2ETest, RunsOnQueueBoxsThreeVariablesAndARoute) {
  // QueueBox's `docker run`: its three variables and a route. The host network shares the
  // ports of the machine, so the port moves only when 8080 is taken.
  const int port = WildcardPortIsFree(8080) ? 8080 : testing::UnusedLoopbackPort();
  std::vector<std::string> args = DatabaseEnv();
  for (std::string kv :
       {"QUEUEBOX_ROUTES_0_TOPICPATTERN=order.*", "QUEUEBOX_ROUTES_0_DESTINATION=receiver",
        "QUEUEBOX_DESTINATIONS_RECEIVER_TYPE=http",
        "QUEUEBOX_DESTINATIONS_RECEIVER_PATH=/events"}) {
    args.insert(args.end(), {"-e", kv});
  }
  args.insert(args.end(), {"-e", "QUEUEBOX_DESTINATIONS_RECEIVER_BASEURL=" + receiver_.BaseUrl()});
  if (port != 8080)
    args.insert(args.end(), {"-e", "QUEUEBOX_SERVER_HTTPPORT=" + std::to_string(port)});
  ASSERT_EQ(StartContainer(args), 0);
  ASSERT_TRUE(WaitReady(port)) << Logs();
  EXPECT_NE(pg_->Scalar("SELECT count(*) FROM outbox"), "");  // migrated at start

  pg_->Exec(
      "INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'o-1', "
      "'{\"id\": 1}')");
  ASSERT_TRUE(receiver_.WaitForRequests(1, 30s)) << Logs();
  EXPECT_EQ(receiver_.Requests()[0].target, "/events");
  EXPECT_EQ(receiver_.Requests()[0].Header("X-Topic"), "order.created");

  // The image's health check, and the process as Kubernetes would run it.
  std::string out;
  EXPECT_EQ(Podman({"healthcheck", "run", name_}, &out), 0) << out;
  EXPECT_EQ(Podman({"exec", name_, "queuebox", "probe"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("/health/ready: 200"));
  EXPECT_EQ(Inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
  ExpectUid10001OnReadOnlyRoot(Inspect("{{.State.Pid}}"));

  // SIGTERM: a graceful stop, exit code 0, well within Kubernetes' 30 s grace.
  auto start = std::chrono::steady_clock::now();
  ASSERT_EQ(Podman({"kill", "--signal", "TERM", name_}), 0);
  ASSERT_EQ(Podman({"wait", name_}, &out, 60s), 0) << out;
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(Trim(out), "0") << Logs();
  EXPECT_LT(took, 30s);
  // Every log line is on stdout, one JSON object each.
  std::istringstream lines(Stdout());
  int json_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    EXPECT_TRUE(Json::accept(line)) << line;
    ++json_lines;
  }
  EXPECT_GE(json_lines, 3);
  EXPECT_THAT(Stdout(), HasSubstr("Stop signal received"));
}

TEST_F(ImageE2ETest, AMountedQueueboxYmlAddsAWebhookAndATransform) {
  const int port = testing::UnusedLoopbackPort();
  local_.Write("queuebox.yml",
               "server:\n  httpPort: " + std::to_string(port) +
                   "\nsources:\n  payments:\n    path: /payments\n"
                   "    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n"
                   "routes:\n  - topicPattern: 'order.*'\n    destination: receiver\n"
                   "    transform:\n      expression: '{\"orderId\": id, \"via\": \"image\"}'\n"
                   "  - topicPattern: 'payment.*'\n    destination: receiver\n"
                   "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
                   receiver_.BaseUrl() + "\n    path: /events\n");
  std::filesystem::permissions(local_.File("queuebox.yml"), std::filesystem::perms::others_read,
                               std::filesystem::perm_options::add);
  std::vector<std::string> args = DatabaseEnv();
  args.insert(args.end(), {"-v", local_.File("queuebox.yml") + ":/etc/queuebox/queuebox.yml:ro"});
  ASSERT_EQ(StartContainer(args), 0);
  ASSERT_TRUE(WaitReady(port)) << Logs();

  httplib::Client c("127.0.0.1", port);
  auto r =
      c.Post("/inbox/payments", R"({"id":"evt_1","type":"payment.succeeded"})", "application/json");
  ASSERT_TRUE(r) << Logs();
  EXPECT_EQ(r->status, 202) << r->body;
  ASSERT_TRUE(receiver_.WaitForRequests(1, 30s)) << Logs();
  EXPECT_EQ(receiver_.Requests()[0].Header("X-Topic"), "payment.succeeded");
  EXPECT_EQ(Json::parse(receiver_.Requests()[0].body)["id"], "evt_1");
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM inbox WHERE source = 'payments'"), "1");

  pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('order.created', '{\"id\": 42}')");
  ASSERT_TRUE(receiver_.WaitForRequests(2, 30s)) << Logs();
  EXPECT_EQ(Json::parse(receiver_.Requests()[1].body),
            Json::parse(R"({"orderId":42,"via":"image"})"));
  EXPECT_THAT(Logs(), HasSubstr("file /etc/queuebox/queuebox.yml"));
}

// The first line of the reason both print, from the container and from the binary on the host
// with the same variables (and no file).
std::string FirstErrorLine(const std::string& output) {
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '{') continue;  // JSON log lines carry timestamps
    return line;
  }
  return "";
}

TEST_F(ImageE2ETest, AMissingOrWrongDatabaseUrlEndsAsOutsideTheImage) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"QUEUEBOX_DATABASE_URL=mysql://127.0.0.1/shop"},
      {"QUEUEBOX_DATABASE_URL=jdbc:postgresql://127.0.0.1:1/shop",
       "QUEUEBOX_DATABASE_USERNAME=postgres", "QUEUEBOX_DATABASE_PASSWORD=x",
       "QUEUEBOX_DATABASE_STARTUPTIMEOUTMS=1500"}};
  for (const auto& vars : cases) {
    SCOPED_TRACE(::testing::PrintToString(vars));
    std::vector<std::string> run = {"run", "--rm"};
    run.insert(run.end(), kImgRunFlags.begin(), kImgRunFlags.end());
    // Both read /etc/queuebox/queuebox.yml when no variable is set; a host that has one (the
    // Debian package) moves the default file of both to the same absent path.
    std::map<std::string, std::string> host_env;
    if (std::filesystem::exists("/etc/queuebox/queuebox.yml")) {
      const std::string absent = "QUEUEBOX_CPP_DEFAULT_CONFIG_FILE=/nonexistent/queuebox.yml";
      run.insert(run.end(), {"-e", absent});
      host_env[absent.substr(0, absent.find('='))] = absent.substr(absent.find('=') + 1);
    }
    for (const auto& kv : vars) {
      run.insert(run.end(), {"-e", kv});
      host_env[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
    }
    run.push_back(image_);
    std::string in_image, on_host;
    EXPECT_EQ(Podman(run, &in_image), 1) << in_image;
    EXPECT_EQ(testing::RunCommand(kImgBinary, {"run"}, host_env, &on_host), 1) << on_host;
    EXPECT_FALSE(FirstErrorLine(on_host).empty()) << on_host;
    EXPECT_EQ(FirstErrorLine(in_image), FirstErrorLine(on_host)) << in_image << "\n" << on_host;
  }
}

// `docker run <image> migrate`, as QueueBox's entrypoint allows: the command replaces `run`.
TEST_F(ImageE2ETest, MigrateIsACommandArgument) {
  std::vector<std::string> run = {"run", "--rm"};
  run.insert(run.end(), kImgRunFlags.begin(), kImgRunFlags.end());
  std::vector<std::string> env = DatabaseEnv();
  run.insert(run.end(), env.begin(), env.end());
  run.insert(run.end(), {image_, "migrate"});
  std::string out;
  ASSERT_EQ(Podman(run, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("migration(s): V1, "));
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM outbox"), "0");
}

// The SQLite default writes only to the volume /var/lib/queuebox (declared by the image, owned by
// 10001), so it runs with a read-only root as well.
TEST_F(ImageE2ETest, SqliteWritesToTheVolumeOnly) {
  const int port = testing::UnusedLoopbackPort();
  ASSERT_EQ(StartContainer({"-e", "QUEUEBOX_DATABASE_URL=/var/lib/queuebox/outbox.db", "-e",
                            "QUEUEBOX_SERVER_HTTPPORT=" + std::to_string(port)}),
            0);
  ASSERT_TRUE(WaitReady(port)) << Logs();
  EXPECT_THAT(Stdout(), HasSubstr(R"("database":"sqlite")"));
  std::string out;
  ASSERT_EQ(Podman({"kill", "--signal", "TERM", name_}), 0);
  ASSERT_EQ(Podman({"wait", name_}, &out, 60s), 0) << out;
  EXPECT_EQ(Trim(out), "0") << Logs();
}

}  // namespace
}  // namespace queuebox
