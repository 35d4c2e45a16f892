// The providers' own libraries as judges of the source auth (issue 36 item 4): requests signed by
// npm `standardwebhooks` (Webhook.sign) and `stripe` (webhooks.generateTestHeaderString), and the
// bad inputs made from them (tests/judges/webhooks/sign_cases.js, run at build time at a fixed
// clock, which the sources are given), posted to real sources on the data port over a real inbox
// store (SQLite and PostgreSQL). Each case gets its documented answer; only the accepted ones are
// stored, under the provider's message id, without their signature headers; no log line quotes
// a secret or a signature.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "webhook_test_support.h"
#include "config/load.h"
#include "sources/http/http_source.h"
#include "testing/log_capture.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::queuebox::testing::LogCapture;
using testing::DialectName;

json JudgeCases() {
  std::ifstream in(QB_WEBHOOK_JUDGE_CASES);
  EXPECT_TRUE(in.good()) << QB_WEBHOOK_JUDGE_CASES;
  return json::parse(in, nullptr, false);
}

// The two sources the cases are signed for, keyed by the provider's message id alone.
std::string JudgeSourcesYaml(const json& secrets) {
  auto list = [](const json& s) { return "[\"" + s["previous"].get<std::string>() + "\"]"; };
  return "inbox:\n  basePath: /inbox\nsources:\n"
         "  sw:\n    path: /sw\n    topic: \"{{ source }}\"\n    auth:\n"
         "      type: standard-webhooks\n      secret: \"" +
         secrets["sw"]["active"].get<std::string>() +
         "\"\n      previousSecrets: " + list(secrets["sw"]) +
         "\n  stripe:\n    path: /stripe\n    topic: \"{{ source }}\"\n"
         "    eventTypePath: $.type\n    auth:\n      type: stripe\n      secret: \"" +
         secrets["stripe"]["active"].get<std::string>() +
         "\"\n      previousSecrets: " + list(secrets["stripe"]) + "\n";
}

Config LoadJudgeConfig(const std::string& database_url, const std::string& yaml) {
  char tmpl[] = "/tmp/qb_judges_cfg_XXXXXX";
  int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(tmpl);
    out << "database:\n  url: \"" << database_url << "\"\n" << yaml;
  }
  ConfigSource source;
  source.file = tmpl;
  source.default_file = "/nonexistent/queuebox.yml";
  auto loaded = LoadConfig(source);
  std::remove(tmpl);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? std::move(loaded).value() : Config{};
}

class WebhookJudgesTest : public testing::WebhookSourcesTest {
 protected:
  void SetUp() override {
    AdminStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    judged_ = JudgeCases();
    ASSERT_TRUE(judged_.is_object());
    sources::WebhookOptions options;
    const int64_t now_ms = judged_["now"].get<int64_t>() * 1000;
    options.now_ms = [now_ms] { return now_ms; };
    StartSources(LoadJudgeConfig(db_->config().url, JudgeSourcesYaml(judged_["secrets"])),
                 store_.get(), options, nullptr);
  }

  json judged_;
};

TEST_P(WebhookJudgesTest, EachSignedCaseGetsItsAnswerAndOnlyTheAcceptedAreStored) {
  LogCapture logs;
  std::set<std::string> stored_keys;
  std::vector<std::string> never_logged;
  ASSERT_GE(judged_["cases"].size(), 30u);
  for (const json& c : judged_["cases"]) {
    const std::string name = c["name"];
    httplib::Headers headers;
    for (const auto& [k, v] : c["headers"].items()) {
      headers.emplace(k, v.get<std::string>());
      if (k.find("ignature") != std::string::npos) never_logged.push_back(v.get<std::string>());
    }
    httplib::Client client = Data();
    auto r = client.Post("/inbox/" + c["source"].get<std::string>(), headers,
                         c["body"].get<std::string>(), "application/json");
    ASSERT_TRUE(r) << name;
    EXPECT_EQ(r->status, c["status"].get<int>()) << name << ": " << r->body;
    if (c["status"] == 202) {
      stored_keys.insert(c["source"].get<std::string>() + "/" + c["key"].get<std::string>());
      EXPECT_TRUE(Json(r).contains("messageId")) << name << ": " << r->body;
    } else if (c["status"] == 200) {
      EXPECT_EQ(r->body, R"({"status":"duplicate"})") << name;
    } else {
      EXPECT_EQ(r->body, json({{"error", c["error"]}}).dump()) << name;
    }
  }
  // Only the accepted messages, once each, under the provider's message id.
  std::set<std::string> rows;
  for (const auto& row : db_->Query("SELECT source, idempotency_key, headers FROM inbox")) {
    rows.insert(row[0] + "/" + row[1]);
    const json h = json::parse(row[2]);
    for (const auto& [name, value] : h.items()) {
      EXPECT_EQ(name.find("ignature"), std::string::npos) << row[1] << " stored " << name;
    }
  }
  EXPECT_EQ(rows, stored_keys);
  EXPECT_EQ(stored_keys.size(), 10u);
  EXPECT_EQ(db_->Scalar("SELECT event_type FROM inbox WHERE idempotency_key = 'evt_1'"),
            "invoice.paid");
  for (const auto& [source, secrets] : judged_["secrets"].items()) {
    for (const auto& [which, secret] : secrets.items()) never_logged.push_back(secret);
  }
  logs.ExpectNoneContains(never_logged);
}

INSTANTIATE_TEST_SUITE_P(Dialects, WebhookJudgesTest,
                         ::testing::Values(std::string("sqlite"), std::string("postgresql")),
                         DialectName);

}  // namespace
}  // namespace queuebox
