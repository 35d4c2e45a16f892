// End to end: JSONata transforms (QueueBox reference §8) in the queuebox binary, against a real
// PostgreSQL and a real HTTP receiver on loopback.
//
// - QueueBox's documented transform examples (tests/vendor/queuebox/transform_examples.json,
//   vendored from its docs) run unchanged: the documented YAML with only `baseUrl` pointed at the
//   receiver, the documented row in, the documented body out.
// - The runaway cases end at their limit with the configured onError outcome while the other
//   messages keep flowing, and queuebox_transform_failures_total counts them.
// - An expression that does not compile stops the start (and check-config) with its key path.
// - A relay without transforms never loads the engine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "testing/env.h"
#include "testing/http_receiver.h"
#include "testing/pg.h"
#include "testing/process.h"
#include "testing/source_dir.h"

namespace queuebox {
namespace {

using ::testing::AnyOf;
using testing::ChildProcess;
using ::testing::HasSubstr;
using testing::HttpReceiver;
using testing::TempDir;
using testing::TempPgDatabase;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const char* const kBinary = testing::QueueboxBinary(QB_QUEUEBOX_BIN);
constexpr const char* kExamples =
    QUEUEBOX_SOURCE_DIR "/tests/vendor/queuebox/transform_examples.json";

Json LoadExamples() {
  std::ifstream in(kExamples);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

// SQL text literal with dollar quoting (payloads hold quotes).
std::string Literal(const std::string& s) { return "$qb$" + s + "$qb$"; }

class TransformE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string url;
    QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", url);
    pg_ = std::make_unique<TempPgDatabase>(url);
    ASSERT_TRUE(receiver_.Start().ok());
    http_port_ = testing::UnusedLoopbackPort();
  }

  // The relay's own settings, then `tail` (destinations, routes) as given.
  std::string WriteConfig(const std::string& tail, const std::string& name = "queuebox") {
    std::string yaml = "database:\n  type: postgresql\n  url: " + pg_->url() +
                       "\n  startupTimeoutMs: 20000\n"
                       "server:\n  httpPort: " +
                       std::to_string(http_port_) +
                       "\noutbox:\n  pollIntervalMs: 50\n  batchSize: 50\n"
                       "  claimTimeoutMs: 120000\n  retryBaseDelayMs: 50\n"
                       "  shutdownTimeoutMs: 5000\n"
                       "logging:\n  format: json\n  level: info\n" +
                       tail;
    dir_.Write(name + ".yml", yaml);
    return dir_.File(name + ".yml");
  }

  void Migrate(const std::string& config) {
    std::string out;
    ASSERT_EQ(testing::RunCommand(kBinary, {"--config", config, "migrate"}, {}, &out), 0) << out;
  }

  // True when this binary was built with transforms; false (and the test skips) otherwise.
  bool BuiltWithTransforms() {
    std::string config = WriteConfig(
        "destinations:\n  d: {type: http, baseUrl: 'http://127.0.0.1:1'}\n"
        "routes:\n  - {topicPattern: '**', destination: d, transform: {expression: '$'}}\n",
        "probe");
    std::string out;
    testing::RunCommand(kBinary, {"--config", config, "check-config"}, {}, &out);
    return out.find("this build has no JSONata transforms") == std::string::npos;
  }

  int RunUntilIdle(const std::string& config, std::string* out) {
    return testing::RunCommand(
        kBinary, {"--config", config, "run", "--until-idle", "--idle-timeout-ms", "120000"}, {},
        out, std::chrono::seconds(180));
  }

  int64_t Count(const std::string& where) {
    return std::stoll(pg_->Scalar("SELECT count(*) FROM outbox WHERE " + where));
  }

  std::string Metrics() {
    httplib::Client c("127.0.0.1", http_port_);
    c.set_connection_timeout(5);
    c.set_read_timeout(5);
    auto r = c.Get("/metrics");
    return r ? r->body : "";
  }

  std::unique_ptr<TempPgDatabase> pg_;
  HttpReceiver receiver_;
  TempDir dir_;
  int http_port_ = 0;
};

// The documented YAML, with `baseUrl` pointed at the receiver (the one change: the docs name
// hosts such as https://api.partner.example). Examples that document an expression without a
// block run as a route transform.
std::string ExampleYaml(const Json& example, const std::string& receiver) {
  std::string yaml;
  if (example["yaml"].is_string()) {
    yaml = example["yaml"].get<std::string>();
  } else {
    std::string indented;
    std::istringstream lines(example["expr"].get<std::string>());
    for (std::string line; std::getline(lines, line);) indented += "          " + line + "\n";
    yaml =
        "destinations:\n  receiver:\n    type: http\n    baseUrl: https://receiver.example\n"
        "    path: /events\nroutes:\n  - topicPattern: \"order.*\"\n    destination: receiver\n"
        "    transform:\n      expression: |\n" +
        indented;
  }
  return std::regex_replace(yaml, std::regex(R"(baseUrl: \S+)"), "baseUrl: " + receiver);
}

TEST_F(TransformE2ETest, QueueBoxDocumentedExamplesRunUnchanged) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  bool migrated = false;
  int ran = 0;
  for (const Json& example : LoadExamples()) {
    const std::string stage = example["stage"];
    if (stage != "route" && stage != "destination") continue;
    SCOPED_TRACE(example["name"].get<std::string>());
    const std::string yaml = ExampleYaml(example, receiver_.BaseUrl());
    std::string config = WriteConfig(yaml, "example" + std::to_string(ran));
    if (!migrated) {
      Migrate(config);
      migrated = true;
    }
    pg_->Exec("TRUNCATE outbox");
    receiver_.Clear();
    const Json& vars = example["bindings"];
    const std::string id = vars["messageId"];
    // The row of the example, with the id and created_at the expected body shows.
    pg_->Exec("INSERT INTO outbox (id, topic, payload, created_at) VALUES ('" + id + "', '" +
              example["topic"].get<std::string>() + "', " + Literal(example["input"].dump()) +
              "::jsonb, '" + vars["timestamp"].get<std::string>() + "')");
    std::string out;
    ASSERT_EQ(RunUntilIdle(config, &out), 0) << out;
    ASSERT_EQ(receiver_.RequestCount(), 1u) << out;
    testing::ReceivedRequest got = receiver_.Requests()[0];
    EXPECT_EQ(got.Header("X-Message-Id"), id);
    EXPECT_EQ(got.Header("X-Topic"), example["topic"]);
    // The documented output (the payload's own key order is PostgreSQL jsonb's, so the bodies
    // are compared as JSON values).
    EXPECT_EQ(Json::parse(got.body), example["result"]) << got.body;
    std::smatch path;
    std::regex_search(yaml, path, std::regex(R"(path: (\S+))"));
    EXPECT_EQ(got.target, path[1].str());
    // The row keeps its payload and is sent.
    EXPECT_EQ(Count("state = 'sent' AND payload = " + Literal(example["input"].dump()) + "::jsonb"),
              1);
    ++ran;
  }
  EXPECT_EQ(ran, 7);  // every route and destination example of the file
}

// The source stage (QueueBox reference §8, §11.1 step 7): the documented source examples run
// unchanged behind a webhook source (the documented source block; the relay forwards the row and
// a `**` route delivers it to the receiver). The stored payload and the delivered body are the
// documented result, and the inbox row's id is the $messageId the transform saw.
TEST_F(TransformE2ETest, QueueBoxDocumentedSourceExamplesRunUnchanged) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  int ran = 0;
  for (const Json& example : LoadExamples()) {
    if (example["stage"] != "source") continue;
    SCOPED_TRACE(example["name"].get<std::string>());
    std::string source_yaml;
    if (example["yaml"].is_string()) {
      source_yaml = example["yaml"].get<std::string>();
    } else {
      // An expression documented without a block: a webhook source that stores its value.
      source_yaml =
          "sources:\n  github:\n    path: /github\n    idempotencyKeyPath: $.id\n    topic: "
          "github\n"
          "    transform:\n      expression: '" +
          example["expr"].get<std::string>() + "'\n";
    }
    const std::string config = WriteConfig(
        source_yaml + "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
            receiver_.BaseUrl() + "\n    path: /events\nroutes:\n  - topicPattern: \"**\"\n" +
            "    destination: receiver\n",
        "source" + std::to_string(ran));
    if (ran == 0) Migrate(config);
    pg_->Exec("TRUNCATE outbox; TRUNCATE inbox");
    receiver_.Clear();
    ChildProcess relay(kBinary, {"--config", config, "run"}, {},
                       dir_.File("source" + std::to_string(ran) + ".log"));
    httplib::Client c("127.0.0.1", http_port_);
    c.set_connection_timeout(2);
    c.set_read_timeout(10);
    bool up = false;
    for (int i = 0; i < 300 && !up; ++i) {
      auto r = c.Get("/health/ready");
      up = r && r->status == 200;
      if (!up) std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(up) << relay.Log();
    httplib::Headers headers;
    for (auto it = example["bindings"]["headers"].begin();
         it != example["bindings"]["headers"].end(); ++it) {
      if (it.key() != "Content-Type") headers.emplace(it.key(), it.value().get<std::string>());
    }
    auto r = c.Post("/inbox/github", headers, example["input"].dump(), "application/json");
    ASSERT_TRUE(r) << relay.Log();
    ASSERT_EQ(r->status, 202) << r->body;
    const std::string id = Json::parse(r->body)["messageId"];
    auto stored =
        pg_->Query("SELECT payload::text, idempotency_key FROM inbox WHERE id = '" + id + "'");
    ASSERT_EQ(stored.size(), 1u);
    EXPECT_EQ(Json::parse(stored[0][0]), example["result"]);
    bool delivered = false;
    for (int i = 0; i < 300 && !delivered; ++i) {
      delivered = receiver_.RequestCount() >= 1;
      if (!delivered) std::this_thread::sleep_for(50ms);
    }
    ASSERT_TRUE(delivered) << relay.Log();
    EXPECT_EQ(Json::parse(receiver_.Requests()[0].body), example["result"]);
    ++ran;
  }
  EXPECT_EQ(ran, 2);  // every source example of the file
}

// Key expressions come before the paths and read the original body; the transform's $messageId
// is the row's id; onError Fail answers 422 and stores nothing (a repeat too), Skip stores the
// original body.
TEST_F(TransformE2ETest, WebhookKeyExpressionsAndTransformOutcomes) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  const std::string config = WriteConfig(
      "inbox:\n  relay:\n    enabled: false\n"
      "sources:\n"
      "  shop:\n    path: /shop\n    idempotencyKeyPath: $.never\n"
      "    idempotencyKeyExpression: '\"order-\" & order.id'\n"
      "    aggregateIdExpression: customer.id\n"
      "    eventTypeExpression: $lowercase(kind)\n"
      "    topic: \"{{ eventType }}\"\n"
      "    transform:\n      expression: '{\"id\": $messageId, \"key\": $idempotencyKey, "
      "\"type\": $eventType, \"total\": order.total}'\n"
      "  strict:\n    path: /strict\n    idempotencyKeyPath: $.id\n    topic: strict\n"
      "    transform:\n      expression: '$error(\"no\")'\n      onError: Fail\n"
      "  lenient:\n    path: /lenient\n    idempotencyKeyPath: $.id\n    topic: lenient\n"
      "    transform:\n      expression: '$error(\"no\")'\n      onError: Skip\n"
      "destinations:\n  d: {type: http, baseUrl: 'http://127.0.0.1:1'}\n"
      "routes:\n  - {topicPattern: '**', destination: d}\n");
  Migrate(config);
  ChildProcess relay(kBinary, {"--config", config, "run"}, {}, dir_.File("keys.log"));
  httplib::Client c("127.0.0.1", http_port_);
  c.set_connection_timeout(2);
  c.set_read_timeout(10);
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    auto r = c.Get("/health/ready");
    up = r && r->status == 200;
    if (!up) std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(up) << relay.Log();

  auto r = c.Post("/inbox/shop",
                  R"({"kind":"ORDER.PAID","order":{"id":42,"total":9.5},"customer":{"id":"c-7"}})",
                  "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const std::string id = Json::parse(r->body)["messageId"];
  auto row = pg_->Query(
      "SELECT idempotency_key, aggregate_id, event_type, payload::text FROM inbox WHERE id = '" +
      id + "'");
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row[0][0], "order-42");
  EXPECT_EQ(row[0][1], "c-7");
  EXPECT_EQ(row[0][2], "order.paid");
  EXPECT_EQ(Json::parse(row[0][3]),
            (Json{{"id", id}, {"key", "order-42"}, {"type", "order.paid"}, {"total", 9.5}}));

  for (int i = 0; i < 2; ++i) {
    auto failed = c.Post("/inbox/strict", R"({"id":"s-1"})", "application/json");
    ASSERT_TRUE(failed);
    EXPECT_EQ(failed->status, 422);
    EXPECT_THAT(failed->body, HasSubstr(R"({"error":"Transform failed: )"));
    EXPECT_THAT(failed->body, HasSubstr("no"));
  }
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM inbox WHERE source = 'strict'"), "0");

  auto skipped = c.Post("/inbox/lenient", R"({"id":"l-1","a":1})", "application/json");
  ASSERT_TRUE(skipped);
  EXPECT_EQ(skipped->status, 202) << skipped->body;
  EXPECT_EQ(Json::parse(pg_->Scalar("SELECT payload::text FROM inbox WHERE source = 'lenient'")),
            (Json{{"id", "l-1"}, {"a", 1}}));
  EXPECT_THAT(Metrics(),
              HasSubstr("queuebox_inbox_rejections_total{reason=\"transform_failed\"} 2"));
}

// The runaway cases of issue 16, each with another onError, next to 300 ordinary messages.
TEST_F(TransformE2ETest, RunawaysEndAtTheirLimitWithTheirOnErrorWhileOthersFlow) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  std::string config = WriteConfig(
      "destinations:\n"
      "  receiver:\n    type: http\n    baseUrl: " +
      receiver_.BaseUrl() +
      "\n    path: /events\n    timeoutMs: 10000\n"
      "routes:\n"
      "  - topicPattern: runaway.recursion\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '($f := function($x){ $f($x + 1) + 1 }; $f(0))'\n"
      "      onError: Dead\n"
      "  - topicPattern: runaway.loop\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '($f := function($x){ $f($x + 1) }; $f(0))'\n"
      "      onError: Fail\n"
      "  - topicPattern: runaway.range\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '[1..5000000]'\n"
      "      timeoutMs: 60000\n"
      "      onError: Skip\n"
      "  - topicPattern: runaway.regex\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '$match($pad(\"\", 40, \"a\") & \"b\", /^(a+)+$/)'\n"
      "      onError: Dead\n"
      "  - topicPattern: runaway.big\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '($d := function($s, $n){ $n = 0 ? $s : $d($s & $s, $n - 1) }; "
      "$d(\"abcdefghijklmnopqrstuvwxy\", 21))'\n"
      "      timeoutMs: 60000\n"
      "      onError: Fail\n"
      "  - topicPattern: \"**\"\n    destination: receiver\n"
      "    transform:\n"
      "      expression: '{\"n\": n, \"id\": $messageId}'\n"
      "      timeoutMs: 10000\n");
  Migrate(config);
  pg_->Exec(
      "INSERT INTO outbox (topic, payload, max_attempts) VALUES "
      "('runaway.recursion', '{\"r\":1}', 1), ('runaway.loop', '{\"r\":2}', 1), "
      "('runaway.range', '{\"r\":3}', 1), ('runaway.regex', '{\"r\":4}', 1), "
      "('runaway.big', '{\"r\":5}', 1)");
  pg_->Exec(
      "INSERT INTO outbox (topic, key, payload) SELECT 'normal.event', 'k' || (i % 10), "
      "jsonb_build_object('n', i) FROM generate_series(1, 300) AS i");

  ChildProcess relay(kBinary, {"--config", config, "run"}, {}, dir_.File("relay.log"));
  auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline &&
         Count("state NOT IN ('sent', 'dead')") > 0) {
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_EQ(Count("state NOT IN ('sent', 'dead')"), 0) << relay.Log();

  auto row = [&](const std::string& topic) {
    auto r =
        pg_->Query("SELECT state, attempt, last_error FROM outbox WHERE topic = '" + topic + "'");
    EXPECT_EQ(r.size(), 1u) << topic;
    return r.empty() ? std::vector<std::string>{"", "", ""} : r[0];
  };
  // Infinite recursion: the depth limit (maxDepth 100); Dead: dead at once.
  auto recursion = row("runaway.recursion");
  EXPECT_EQ(recursion[0], "dead");
  EXPECT_EQ(recursion[1], "0");
  EXPECT_THAT(recursion[2], HasSubstr("Transform dead-lettered the message: D1011"));
  // A tail-recursive loop: the 100 ms timeout; Fail: the retry path, dead after max_attempts.
  auto loop = row("runaway.loop");
  EXPECT_EQ(loop[0], "dead");
  EXPECT_EQ(loop[1], "1");
  EXPECT_EQ(loop[2],
            "Transform failed: D1012: The evaluation ran longer than 100 ms and was stopped");
  // A 5,000,000-element range: the memory limit; Skip: the row's payload is delivered.
  auto range = row("runaway.range");
  EXPECT_EQ(range[0], "sent");
  // $match with a catastrophic regex: the timeout inside the regex; Dead.
  auto regex = row("runaway.regex");
  EXPECT_EQ(regex[0], "dead");
  EXPECT_EQ(regex[1], "0");
  EXPECT_EQ(regex[2],
            "Transform dead-lettered the message: D1012: The evaluation ran longer than 100 ms "
            "and was stopped");
  // A 50 MB result: the memory limit; Fail.
  auto big = row("runaway.big");
  EXPECT_EQ(big[0], "dead");
  EXPECT_EQ(big[1], "1");
  EXPECT_THAT(big[2], AnyOf(HasSubstr("of memory and was stopped"), HasSubstr("over the limit")));

  // Everything else was delivered, transformed.
  EXPECT_EQ(Count("topic = 'normal.event' AND state = 'sent'"), 300);
  std::map<std::string, std::string> ids;  // id -> n
  for (const auto& r : pg_->Query("SELECT id, payload->>'n' FROM outbox")) ids[r[0]] = r[1];
  std::set<std::string> transformed;
  int skipped = 0;
  for (const auto& req : receiver_.Requests()) {
    Json body = Json::parse(req.body);
    const std::string id = req.Header("X-Message-Id");
    if (body.contains("r")) {
      EXPECT_EQ(body, Json({{"r", 3}}));  // Skip delivered the range row's payload as is
      ++skipped;
      continue;
    }
    EXPECT_EQ(body, Json({{"n", std::stoi(ids[id])}, {"id", id}}));
    transformed.insert(id);
  }
  EXPECT_EQ(transformed.size(), 300u);
  EXPECT_EQ(skipped, 1);

  std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("queuebox_transform_failures_total{strategy=\"dead\"} 2"));
  EXPECT_THAT(metrics, HasSubstr("queuebox_transform_failures_total{strategy=\"fail\"} 4"));
  EXPECT_THAT(metrics, HasSubstr("queuebox_transform_failures_total{strategy=\"skip\"} 1"));
  relay.Kill(SIGTERM);
  ASSERT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
  EXPECT_THAT(relay.Log(), HasSubstr("\"jsonata_engine\":\"loaded\""));
}

// POST /admin/transform/test in the binary (reference §13.2): QueueBox's documented requests
// (the how-to's curl and the HTTP API page) answer the documented result behind bearer auth; a
// wrong token is 401 and an oversized body 413, both in the endpoint's error shape.
TEST_F(TransformE2ETest, TheTransformTestEndpointAnswersTheDocumentedRequests) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  std::string config = WriteConfig(
      "admin:\n  enabled: true\n  maxPayloadBytes: 4096\n"
      "  auth: {type: bearer, token: the-admin-token}\n"
      "destinations:\n  receiver:\n    type: http\n    baseUrl: " +
      receiver_.BaseUrl() + "\nroutes:\n  - topicPattern: \"**\"\n    destination: receiver\n");
  Migrate(config);
  ChildProcess relay(kBinary, {"--config", config, "run"}, {}, dir_.File("admin.log"));
  httplib::Client c("127.0.0.1", http_port_);
  c.set_connection_timeout(5);
  c.set_read_timeout(30);
  const httplib::Headers auth = {{"Authorization", "Bearer the-admin-token"}};
  bool live = false;
  for (auto deadline = std::chrono::steady_clock::now() + 60s;
       !live && std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(100ms)) {
    auto r = c.Get("/health/live");
    live = r && r->status == 200;
  }
  ASSERT_TRUE(live) << relay.Log();

  int ran = 0;
  for (const Json& example : LoadExamples()) {
    if (example["stage"] != "admin") continue;
    SCOPED_TRACE(example["name"].get<std::string>());
    auto r = c.Post("/admin/transform/test", auth, example["request"].dump(), "application/json");
    ASSERT_TRUE(r) << relay.Log();
    EXPECT_EQ(r->status, 200) << r->body;
    Json answer = Json::parse(r->body);
    EXPECT_EQ(answer["success"], true);
    EXPECT_EQ(answer["result"], example["result"]);
    EXPECT_EQ(answer["context"]["topic"], example["request"]["mockTopic"]);
    EXPECT_EQ(answer["context"]["attempt"], 0);
    EXPECT_EQ(answer["context"]["messageId"].get<std::string>().size(), 36u);
    ++ran;
  }
  EXPECT_EQ(ran, 2);

  auto r = c.Post("/admin/transform/test", auth,
                  R"({"expression": "Account.Order[0", "payload": 1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Json::parse(r->body),
            Json({{"success", false},
                  {"error",
                   "Invalid expression: S0203 at position 15: Expected \"]\" before end "
                   "of expression"}}));
  r = c.Post("/admin/transform/test", {{"Authorization", "Bearer wrong"}},
             R"({"expression": "$", "payload": 1})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Json::parse(r->body), Json({{"success", false}, {"error", "Invalid bearer token"}}));
  r = c.Post("/admin/transform/test", auth, std::string(5000, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(Json::parse(r->body),
            Json({{"success", false}, {"error", "Request body exceeds 4096 bytes"}}));
  // Nothing was sent or written.
  EXPECT_EQ(receiver_.RequestCount(), 0u);
  EXPECT_EQ(Count("true"), 0);
  relay.Kill(SIGTERM);
  ASSERT_EQ(relay.Wait(30s), std::optional<int>(0)) << relay.Log();
}

// Reference §8 / §13.6: every expression compiles at start; the error names the key path,
// JSONata's code and position, and the start stops before the database is touched.
TEST_F(TransformE2ETest, AnExpressionThatDoesNotCompileStopsTheStart) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  std::string config = WriteConfig(
      "destinations:\n"
      "  partner:\n    type: http\n    baseUrl: " +
      receiver_.BaseUrl() +
      "\n    transform:\n      expression: '{\"a\": }'\n"
      "routes:\n"
      "  - topicPattern: \"order.*\"\n    destination: partner\n"
      "    transform:\n      expression: 'Account.Order[0'\n");
  const std::string errors =
      "The configuration has 2 errors. Fix each one and start QueueBox again.\n"
      "  - destinations.partner.transform.expression: S0211 at position 7: The symbol \"}\" "
      "cannot be used as a unary operator\n"
      "  - routes[0].transform.expression: S0203 at position 15: Expected \"]\" before end of "
      "expression";
  std::string out;
  EXPECT_EQ(testing::RunCommand(kBinary, {"--config", config, "check-config"}, {}, &out), 1);
  EXPECT_THAT(out, HasSubstr(errors));
  EXPECT_EQ(testing::RunCommand(kBinary, {"--config", config, "run", "--until-idle"}, {}, &out), 1);
  EXPECT_THAT(out, HasSubstr("QueueBox did not start. Reason: " + errors));
  // Nothing was migrated: the start stopped before the database.
  EXPECT_EQ(pg_->Scalar("SELECT count(*) FROM information_schema.tables WHERE table_name = "
                        "'outbox'"),
            "0");
  // onError in another letter case does not load.
  config = WriteConfig(
      "destinations:\n  d: {type: http, baseUrl: 'http://127.0.0.1:1'}\n"
      "routes:\n  - {topicPattern: '**', destination: d, transform: {expression: '$', onError: "
      "fail}}\n",
      "lowercase");
  EXPECT_EQ(testing::RunCommand(kBinary, {"--config", config, "check-config"}, {}, &out), 1);
  EXPECT_THAT(out, HasSubstr("routes[0].transform.onError: must be one of Fail, Skip, Dead (exact "
                             "case); did you mean Fail?"));
}

// A relay without transforms keeps its footprint: it never loads the JSONata engine (reported
// at stop); the same relay with one route transform does.
TEST_F(TransformE2ETest, ARelayWithoutTransformsNeverLoadsTheEngine) {
  const std::string destinations =
      "destinations:\n  receiver:\n    type: http\n    baseUrl: " + receiver_.BaseUrl() + "\n";
  std::string plain = WriteConfig(
      destinations + "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n", "plain");
  Migrate(plain);
  pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('a', '{\"n\":1}'), ('b', '{\"n\":2}')");
  std::string out;
  ASSERT_EQ(RunUntilIdle(plain, &out), 0) << out;
  EXPECT_EQ(receiver_.RequestCount(), 2u);
  EXPECT_THAT(out, HasSubstr("\"jsonata_engine\":\"not loaded\""));
  std::smatch rss;
  ASSERT_TRUE(std::regex_search(out, rss, std::regex(R"re("max_rss_kb":"(\d+)")re")));
  const long plain_rss_kb = std::stol(rss[1]);

  if (!BuiltWithTransforms()) return;
  std::string transformed =
      WriteConfig(destinations +
                      "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
                      "    transform: {expression: '{\"n\": n}', timeoutMs: 10000}\n",
                  "transformed");
  pg_->Exec("INSERT INTO outbox (topic, payload) VALUES ('c', '{\"n\":3}')");
  ASSERT_EQ(RunUntilIdle(transformed, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("\"jsonata_engine\":\"loaded\""));
  ASSERT_TRUE(std::regex_search(out, rss, std::regex(R"re("max_rss_kb":"(\d+)")re")));
  std::printf("peak RSS: %ld KiB without transforms, %ld KiB with one route transform\n",
              plain_rss_kb, std::stol(rss[1]));
}

#ifdef QB_JSONATA_MODULE
// A copy of the binary as <dir>/bin/queuebox, without the module; returns its path.
std::string InstallBinary(const TempDir& dir) {
  std::filesystem::create_directories(dir.File("bin"));
  const std::string bin = dir.File("bin/queuebox");
  std::filesystem::copy_file(kBinary, bin);
  return bin;
}

// The engine is a module (libqueuebox_jsonata.so) that the binary looks for beside itself and in
// ../lib/queuebox/ from its folder. A binary without it still runs configurations without
// transforms; one with a transform is refused, naming each path tried and why it did not load.
TEST_F(TransformE2ETest, WithoutItsModuleATransformIsRefusedWithThePathsTried) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  namespace fs = std::filesystem;
  TempDir install;  // outside the build tree: the build's own module is not a candidate
  const std::string bin = InstallBinary(install);
  const std::string destinations =
      "destinations:\n  receiver:\n    type: http\n    baseUrl: " + receiver_.BaseUrl() + "\n";
  const std::string plain = WriteConfig(
      destinations + "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n", "plain");
  const std::string transformed =
      WriteConfig(destinations +
                      "routes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
                      "    transform: {expression: '{\"n\": n}'}\n",
                  "transformed");
  std::string out;
  EXPECT_EQ(testing::RunCommand(bin, {"--config", plain, "check-config"}, {}, &out), 0) << out;
  EXPECT_EQ(testing::RunCommand(bin, {"--config", transformed, "check-config"}, {}, &out), 1);
  EXPECT_THAT(out, HasSubstr("routes[0].transform.expression: the JSONata engine could not load: "
                             "The JSONata engine did not load: its module "
                             "libqueuebox_jsonata.so could not be loaded: " +
                             install.File("bin/libqueuebox_jsonata.so") +
                             ": cannot open shared object file: No such file or directory; " +
                             install.File("lib/queuebox/libqueuebox_jsonata.so") +
                             ": cannot open shared object file: No such file or directory."));
  // The installed layout: <prefix>/bin/queuebox and <prefix>/lib/queuebox/.
  fs::create_directories(install.File("lib/queuebox"));
  fs::copy_file(QB_JSONATA_MODULE, install.File("lib/queuebox/libqueuebox_jsonata.so"));
  EXPECT_EQ(testing::RunCommand(bin, {"--config", transformed, "check-config"}, {}, &out), 0)
      << out;
}

// A module cut short (an interrupted copy, a full disk) is refused with a reason, and the next
// path is tried: dlopen would map it past its end and the process would die of SIGBUS.
TEST_F(TransformE2ETest, ATruncatedModuleIsRefusedAndTheNextPathIsTried) {
  if (!BuiltWithTransforms()) GTEST_SKIP() << "built without QUEUEBOX_WITH_TRANSFORMS";
  namespace fs = std::filesystem;
  TempDir install;  // outside the build tree: the build's own module is not a candidate
  const std::string bin = InstallBinary(install);
  const std::string truncated = install.File("bin/libqueuebox_jsonata.so");
  fs::copy_file(QB_JSONATA_MODULE, truncated);
  fs::resize_file(truncated, fs::file_size(truncated) / 4);
  const std::string transformed = WriteConfig(
      "destinations:\n  receiver:\n    type: http\n    baseUrl: " + receiver_.BaseUrl() +
          "\nroutes:\n  - topicPattern: \"**\"\n    destination: receiver\n"
          "    transform: {expression: '{\"n\": n}'}\n",
      "transformed");
  std::string out;
  EXPECT_EQ(testing::RunCommand(bin, {"--config", transformed, "check-config"}, {}, &out), 1)
      << out;
  EXPECT_THAT(out, HasSubstr("could not be loaded: " + truncated + ": truncated ("));
  fs::create_directories(install.File("lib/queuebox"));
  fs::copy_file(QB_JSONATA_MODULE, install.File("lib/queuebox/libqueuebox_jsonata.so"));
  EXPECT_EQ(testing::RunCommand(bin, {"--config", transformed, "check-config"}, {}, &out), 0)
      << out;
}
#endif

}  // namespace
}  // namespace queuebox
