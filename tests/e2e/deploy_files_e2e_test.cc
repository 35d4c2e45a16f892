// The deployment files QueueBox users start from (issue 33 item 3): packaging/compose/ and
// packaging/kubernetes/. Each is parsed with yaml-cpp and checked for the fields that make it
// work (image, QueueBox's three variables, read-only root, probes, Secret, ConfigMap, replicas,
// disruption budget, resources), then the relay runs with the file's own queuebox.yml against
// the suite's PostgreSQL and answers 200 on the probe paths the files name, and `queuebox probe`
// (the image's health check) passes while it runs and fails once it stopped.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::TempDir;
using testing::TempPgDatabase;
using namespace std::chrono_literals;

const char* const kDeployBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);
const std::string kCompose = QUEUEBOX_SOURCE_DIR "/packaging/compose/";
const std::string kKube = QUEUEBOX_SOURCE_DIR "/packaging/kubernetes/";

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  for (const auto& item : list) out.push_back(item.as<std::string>());
  return out;
}

// A compose value as compose interpolates it when nothing is set: ${X:-default} -> default.
std::string Interpolated(const std::string& value) {
  return std::regex_replace(value, std::regex(R"(\$\{[A-Z_]+:-([^}]*)\})"), "$1");
}

class DeployFilesE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    port_ = testing::UnusedLoopbackPort();
  }

  // The file's variables with the database and the port moved to this test's.
  std::map<std::string, std::string> RelayEnv(std::map<std::string, std::string> vars) {
    std::smatch m;
    std::regex_search(pg_->url(), m, std::regex(R"(@([^/]+)/([^?]+))"));
    vars["QUEUEBOX_DATABASE_URL"] = "jdbc:postgresql://" + m[1].str() + "/" + m[2].str();
    vars["QUEUEBOX_DATABASE_USERNAME"] = "postgres";
    vars["QUEUEBOX_SERVER_HTTPPORT"] = std::to_string(port_);
    vars["QUEUEBOX_CPP_DEFAULT_CONFIG_FILE"] = dir_.File("absent.yml");
    return vars;
  }

  // True once /health/ready answers 200 through `c`, false after 30 s of asking every 100 ms.
  static bool AnswersReady(httplib::Client& c) {
    for (int i = 0; i < 300; ++i, std::this_thread::sleep_for(100ms)) {
      auto r = c.Get("/health/ready");
      if (r && r->status == 200) return true;
    }
    return false;
  }

  // Runs the relay on `config` with `env`, asks each path for 200, checks `queuebox probe`,
  // stops it with SIGTERM, and checks that the probe then fails.
  void ServeAndProbe(const std::string& config, const std::map<std::string, std::string>& env,
                     const std::vector<std::string>& paths) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(kDeployBinary, {"--config", config, "check-config"}, env, &out),
              0)
        << out;
    ChildProcess relay(kDeployBinary, {"--config", config, "run"}, env, dir_.File("relay.log"));
    httplib::Client c("127.0.0.1", port_);
    c.set_connection_timeout(1);
    ASSERT_TRUE(AnswersReady(c)) << relay.Log();
    for (const auto& path : paths) {
      auto r = c.Get(path);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 200) << path << " " << r->body;
    }
    EXPECT_EQ(testing::RunCommand(kDeployBinary, {"--config", config, "probe"}, env, &out), 0)
        << out;
    EXPECT_THAT(out, HasSubstr("/health/ready: 200"));
    EXPECT_EQ(
        testing::RunCommand(kDeployBinary, {"--config", config, "probe", "--path", "/health/live"},
                            env, &out),
        0)
        << out;
    relay.Kill(SIGTERM);
    EXPECT_EQ(relay.Wait(30s), 0) << relay.Log();
    EXPECT_EQ(testing::RunCommand(kDeployBinary, {"--config", config, "probe"}, env, &out), 1)
        << out;
    EXPECT_THAT(out, HasSubstr("no answer"));
  }

  std::unique_ptr<TempPgDatabase> pg_;
  TempDir dir_;
  int port_ = 0;
};

TEST_F(DeployFilesE2ETest, TheComposeFileRunsTheImageAsQueueBoxsDoes) {
  YAML::Node compose = YAML::LoadFile(kCompose + "docker-compose.yml");
  const YAML::Node services = compose["services"];
  ASSERT_TRUE(services["postgres"] && services["queuebox"] && services["receiver"]);
  const YAML::Node relay = services["queuebox"];
  EXPECT_EQ(relay["image"].as<std::string>().rfind("queuebox-cpp:", 0), 0u);
  EXPECT_EQ(relay["depends_on"]["postgres"]["condition"].as<std::string>(), "service_healthy");
  std::map<std::string, std::string> env;
  for (const auto& kv : relay["environment"]) {
    env[kv.first.as<std::string>()] = Interpolated(kv.second.as<std::string>());
  }
  EXPECT_EQ(env.size(), 3u);  // QueueBox's three variables, nothing else
  for (const char* name :
       {"QUEUEBOX_DATABASE_URL", "QUEUEBOX_DATABASE_USERNAME", "QUEUEBOX_DATABASE_PASSWORD"}) {
    EXPECT_FALSE(env[name].empty()) << name;
  }
  EXPECT_EQ(env["QUEUEBOX_DATABASE_URL"], "jdbc:postgresql://postgres:5432/queuebox");
  EXPECT_TRUE(relay["read_only"].as<bool>());
  EXPECT_THAT(Strings(relay["tmpfs"]), ::testing::Contains("/tmp"));
  EXPECT_THAT(Strings(relay["ports"]), ::testing::Contains("8080:8080"));
  EXPECT_THAT(Strings(relay["healthcheck"]["test"]),
              ::testing::ElementsAre("CMD", "queuebox", "probe"));
  EXPECT_THAT(Strings(relay["volumes"]),
              ::testing::Contains("./queuebox.yml:/etc/queuebox/queuebox.yml:ro"));
  EXPECT_TRUE(std::filesystem::exists(kCompose + "receiver.py"));

  // Its queuebox.yml: a webhook source and an HTTP destination, at the receiver service.
  YAML::Node config = YAML::LoadFile(kCompose + "queuebox.yml");
  EXPECT_TRUE(config["sources"]["stripe"]["path"]);
  EXPECT_EQ(config["destinations"]["receiver"]["type"].as<std::string>(), "http");
  EXPECT_THAT(config["destinations"]["receiver"]["baseUrl"].as<std::string>(),
              HasSubstr("//receiver:"));
  // The compose healthcheck (queuebox probe) and the stripe route the comment posts to.
  ServeAndProbe(kCompose + "queuebox.yml", RelayEnv(env), {"/health/ready", "/health/live"});
}

std::map<std::string, YAML::Node> KubeObjects() {
  std::map<std::string, YAML::Node> by_kind;
  for (const auto& entry : std::filesystem::directory_iterator(kKube)) {
    YAML::Node doc = YAML::LoadFile(entry.path().string());
    by_kind[doc["kind"].as<std::string>()] = doc;
  }
  return by_kind;
}

// The probe paths of the container, after checking the Deployment's fields.
std::vector<std::string> CheckDeployment(std::map<std::string, YAML::Node>& k) {
  const YAML::Node deploy = k["Deployment"];
  EXPECT_EQ(deploy["spec"]["replicas"].as<int>(), 2);
  const YAML::Node pod = deploy["spec"]["template"]["spec"];
  const YAML::Node labels = deploy["spec"]["template"]["metadata"]["labels"];
  for (const YAML::Node& selector : {deploy["spec"]["selector"]["matchLabels"],
                                     k["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"],
                                     k["Service"]["spec"]["selector"]}) {
    for (const auto& kv : selector) {
      EXPECT_EQ(labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
    }
  }
  EXPECT_EQ(k["PodDisruptionBudget"]["spec"]["minAvailable"].as<int>(), 1);
  EXPECT_GE(pod["terminationGracePeriodSeconds"].as<int>(), 30);
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 10001);
  const YAML::Node c = pod["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>().rfind("queuebox-cpp", 0), 0u);
  EXPECT_TRUE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "http");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 8080);
  EXPECT_EQ(c["envFrom"][0]["secretRef"]["name"].as<std::string>(),
            k["Secret"]["metadata"]["name"].as<std::string>());
  for (const char* key : {"cpu", "memory"}) EXPECT_TRUE(c["resources"]["requests"][key]) << key;
  EXPECT_TRUE(c["resources"]["limits"]["memory"]);
  std::map<std::string, std::string> mounts;
  for (const auto& m : c["volumeMounts"]) {
    mounts[m["mountPath"].as<std::string>()] = m["name"].as<std::string>();
  }
  std::map<std::string, YAML::Node> volumes;
  for (const auto& v : pod["volumes"]) {
    volumes[v["name"].as<std::string>()] = static_cast<const YAML::Node&>(v);
  }
  EXPECT_EQ(volumes[mounts["/etc/queuebox"]]["configMap"]["name"].as<std::string>(),
            k["ConfigMap"]["metadata"]["name"].as<std::string>());
  EXPECT_TRUE(volumes[mounts["/tmp"]]["emptyDir"]);
  std::vector<std::string> paths;
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(c[probe]["httpGet"]["port"].as<std::string>(), "http") << probe;
    paths.push_back(c[probe]["httpGet"]["path"].as<std::string>());
  }
  EXPECT_EQ(paths[0], "/health/ready");  // QueueBox's documented probe paths
  EXPECT_EQ(paths[1], "/health/live");
  return paths;
}

TEST_F(DeployFilesE2ETest, TheKubernetesFilesRunTwoProbedReplicas) {
  std::map<std::string, YAML::Node> k = KubeObjects();
  for (const char* kind :
       {"Deployment", "Secret", "ConfigMap", "Service", "PodDisruptionBudget", "Kustomization"}) {
    ASSERT_TRUE(k.count(kind)) << kind;
  }
  std::set<std::string> listed;
  for (const auto& r : k["Kustomization"]["resources"]) listed.insert(r.as<std::string>());
  EXPECT_EQ(listed.size(), 5u);
  for (const auto& file : listed) EXPECT_TRUE(std::filesystem::exists(kKube + file)) << file;
  std::vector<std::string> paths = CheckDeployment(k);

  std::map<std::string, std::string> env;
  for (const auto& kv : k["Secret"]["stringData"]) {
    env[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  EXPECT_EQ(env.size(), 3u);  // QueueBox's three variables
  EXPECT_TRUE(env.count("QUEUEBOX_DATABASE_URL") && env.count("QUEUEBOX_DATABASE_USERNAME") &&
              env.count("QUEUEBOX_DATABASE_PASSWORD"));
  std::string yml = k["ConfigMap"]["data"]["queuebox.yml"].as<std::string>();
  EXPECT_EQ(YAML::Load(yml)["server"]["httpPort"].as<int>(), 8080);  // the containerPort
  dir_.Write("queuebox.yml", yml);
  ServeAndProbe(dir_.File("queuebox.yml"), RelayEnv(env), paths);
}

// `queuebox probe` asks the port that serves health: the management port when one is set (the
// data port then answers 404 there), on the address the ports bind.
TEST_F(DeployFilesE2ETest, TheProbeAsksTheManagementPortWhenSet) {
  const int management = testing::UnusedLoopbackPort();
  std::map<std::string, std::string> env = RelayEnv({});
  env["QUEUEBOX_SERVER_MANAGEMENTPORT"] = std::to_string(management);
  env["QUEUEBOX_SERVER_ADDRESS"] = "127.0.0.1";
  dir_.Write("empty.yml", "logging:\n  format: json\n");
  const std::string config = dir_.File("empty.yml");
  ChildProcess relay(kDeployBinary, {"--config", config, "run"}, env, dir_.File("relay.log"));
  httplib::Client c("127.0.0.1", management);
  c.set_connection_timeout(1);
  ASSERT_TRUE(AnswersReady(c)) << relay.Log();
  std::string out;
  EXPECT_EQ(testing::RunCommand(kDeployBinary, {"--config", config, "probe"}, env, &out), 0) << out;
  EXPECT_THAT(out,
              HasSubstr("http://127.0.0.1:" + std::to_string(management) + "/health/ready: 200"));
  relay.Kill(SIGTERM);
  EXPECT_EQ(relay.Wait(30s), 0) << relay.Log();
}

}  // namespace
}  // namespace queuebox
