// The `signing` block of the http destination (issue 36 item 2) against a real HTTP receiver,
// judged by the providers' own code: npm `standardwebhooks` and `svix` (Webhook.verify) check each
// recorded request as a receiver would, and node's crypto checks the hmac type
// (tests/judges/signing/verify.mjs, installed by `npm ci` from its lock file).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "destinations/http/http_destination.h"
#include "testing/broker_testing.h"
#include "testing/http_receiver.h"
#include "testing/process.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BrokerRow;
using ::queuebox::testing::HttpReceiver;
using ::queuebox::testing::PublishAll;
using ::queuebox::testing::ReceivedRequest;
using ::queuebox::testing::ReceiverResponse;
using ::queuebox::testing::RunCommand;
using ::queuebox::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

// Three Standard Webhooks secrets (24, 32 and 32 bytes of key).
constexpr char kSecretNew[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr char kSecretOld[] = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD1W0Jbk6tKvU=";
constexpr char kSecretOther[] = "whsec_TmV2ZXIgdXNlZCBieSB0aGlzIGRlc3RpbmF0aW9uISE=";

class HttpSigningTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(receiver_.Start().ok()); }

  std::unique_ptr<HttpDestination> Make(const std::string& type, nlohmann::json block) {
    HttpDestinationSettings s;
    s.name = "signed";
    s.base_url = receiver_.BaseUrl();
    s.path = "/hooks";
    s.timeout_ms = 10000;
    s.signing = DestinationSigningConfig{type, std::move(block)};
    Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return nullptr;
    EXPECT_TRUE((*d)->Start().ok());
    return std::move(d).value();
  }

  // Runs the judges over `cases` ({secret, body, headers} or {hmac...}); one verdict per case.
  std::vector<nlohmann::json> Judge(const nlohmann::json& cases) {
    TempDir dir;
    dir.Write("cases.json", cases.dump());
    std::string out;
    int rc = RunCommand(QB_NODE_BIN, {QB_SIGNING_JUDGES, dir.File("cases.json")}, {}, &out);
    EXPECT_EQ(rc, 0) << out;
    std::vector<nlohmann::json> verdicts;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] == '{') verdicts.push_back(nlohmann::json::parse(line));
    }
    EXPECT_EQ(verdicts.size(), cases.size()) << out;
    return verdicts;
  }

  static nlohmann::json HeadersOf(const ReceivedRequest& r) {
    nlohmann::json h = nlohmann::json::object();
    for (const auto& [name, value] : r.headers) h[name] = value;
    return h;
  }

  HttpReceiver receiver_{16};
};

TEST_F(HttpSigningTest, StandardWebhooksDeliveriesVerifyWithEachActiveSecretAlone) {
  auto d = Make("standard-webhooks", {{"secret", kSecretNew}, {"previousSecrets", {kSecretOld}}});
  ASSERT_TRUE(d);
  std::vector<OutboxRow> rows = {
      BrokerRow("0b7c1a52-6f0e-4a37-9d55-1f2d3c4b5a69", "orders.created", "k1",
                R"({"n":1,"name":"Zoë ✓"})"),
      // A row header of a signing name is replaced, never sent beside ours.
      BrokerRow("5d1e0f6a-3b2c-4d8e-9f70-a1b2c3d4e5f6", "orders.paid", std::nullopt, R"([1,2])",
                R"({"webhook-signature":"v1,forged","X-Team":"ops"})"),
  };
  std::vector<Outcome> outcomes = PublishAll(*d, rows);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const Outcome& o : outcomes) EXPECT_EQ(o.kind, Outcome::Kind::kDelivered) << o.error;
  std::vector<ReceivedRequest> got = receiver_.Requests();
  ASSERT_EQ(got.size(), 2u);

  nlohmann::json cases = nlohmann::json::array();
  for (const ReceivedRequest& r : got) {
    EXPECT_THAT(r.HeaderValues("webhook-signature"), ::testing::SizeIs(1));
    EXPECT_THAT(r.Header("webhook-signature"), Not(HasSubstr("forged")));
    // One v1 signature per active secret, space-separated.
    EXPECT_THAT(r.Header("webhook-signature"), ::testing::MatchesRegex("v1,[^ ]+ v1,[^ ]+"));
    for (const char* secret : {kSecretNew, kSecretOld, kSecretOther}) {
      cases.push_back({{"secret", secret}, {"body", r.body}, {"headers", HeadersOf(r)}});
    }
    std::string changed = r.body;
    changed[1] = changed[1] == 'n' ? 'm' : 'n';  // one byte
    cases.push_back({{"secret", kSecretNew}, {"body", changed}, {"headers", HeadersOf(r)}});
  }
  std::vector<nlohmann::json> v = Judge(cases);
  ASSERT_EQ(v.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    const bool good = i % 4 == 0 || i % 4 == 1;  // the new or the old secret, body intact
    for (const char* lib : {"standardwebhooks", "svix"}) {
      if (good) {
        EXPECT_EQ(v[i][lib], "ok") << lib << " case " << i;
      } else {
        EXPECT_NE(v[i][lib], "ok") << lib << " case " << i;
      }
    }
  }
  // The two rows go out concurrently: match each request to its row by webhook-id.
  std::map<std::string, const ReceivedRequest*> by_id;
  for (const ReceivedRequest& r : got) by_id[r.Header("webhook-id")] = &r;
  ASSERT_EQ(by_id.count(rows[0].id), 1u);
  ASSERT_EQ(by_id.count(rows[1].id), 1u);
  EXPECT_EQ(by_id[rows[0].id]->Header("X-Team"), "");
  EXPECT_EQ(by_id[rows[1].id]->Header("X-Team"), "ops");
}

TEST_F(HttpSigningTest, TheIdStaysAcrossRetriesAndTheTimestampIsTheSendTime) {
  auto d = Make("standard-webhooks", {{"secret", kSecretNew}});
  ASSERT_TRUE(d);
  receiver_.EnqueueResponse({.status = 500, .body = "busy"});
  std::vector<OutboxRow> rows = {
      BrokerRow("9a8b7c6d-5e4f-4321-8765-0fedcba98765", "orders.created", "k1", R"({"n":2})")};
  const int64_t before = std::chrono::duration_cast<std::chrono::seconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_EQ(PublishAll(*d, rows)[0].kind, Outcome::Kind::kRetry);
  rows[0].attempt = 1;
  EXPECT_EQ(PublishAll(*d, rows)[0].kind, Outcome::Kind::kDelivered);
  const int64_t after = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  std::vector<ReceivedRequest> got = receiver_.Requests();
  ASSERT_EQ(got.size(), 2u);
  nlohmann::json cases = nlohmann::json::array();
  for (const ReceivedRequest& r : got) {
    EXPECT_EQ(r.Header("webhook-id"), rows[0].id);
    const int64_t ts = std::stoll(r.Header("webhook-timestamp"));
    EXPECT_GE(ts, before);
    EXPECT_LE(ts, after);
    EXPECT_THAT(r.Header("webhook-signature"), ::testing::MatchesRegex("v1,[^ ]+"));
    cases.push_back({{"secret", kSecretNew}, {"body", r.body}, {"headers", HeadersOf(r)}});
  }
  for (const nlohmann::json& verdict : Judge(cases)) {
    EXPECT_EQ(verdict["standardwebhooks"], "ok");
    EXPECT_EQ(verdict["svix"], "ok");
  }
}

TEST_F(HttpSigningTest, HmacGithubStyleAndTimestampedBase64) {
  auto github = Make("hmac", {{"secret", "It's a Secret to Everybody"}});
  ASSERT_TRUE(github);
  auto timed = Make("hmac", {{"secret", "s3cr3t"},
                             {"headerName", "X-Signature"},
                             {"prefix", ""},
                             {"algorithm", "sha512"},
                             {"encoding", "base64"},
                             {"timestampHeader", "X-Signature-Timestamp"}});
  ASSERT_TRUE(timed);
  std::vector<OutboxRow> rows = {
      BrokerRow("1f2e3d4c-5b6a-4798-8a9b-0c1d2e3f4a5b", "t", std::nullopt, R"({"hello":"world"})")};
  EXPECT_EQ(PublishAll(*github, rows)[0].kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(PublishAll(*timed, rows)[0].kind, Outcome::Kind::kDelivered);
  std::vector<ReceivedRequest> got = receiver_.Requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(got[0].HasHeader("webhook-signature"));
  const std::string ts = got[1].Header("X-Signature-Timestamp");
  ASSERT_FALSE(ts.empty());
  nlohmann::json cases = {
      {{"hmac", "sha256"},
       {"encoding", "hex"},
       {"secret", "It's a Secret to Everybody"},
       {"text", got[0].body},
       {"expected", got[0].Header("X-Hub-Signature-256")},
       {"prefix", "sha256="}},
      {{"hmac", "sha512"},
       {"encoding", "base64"},
       {"secret", "s3cr3t"},
       {"text", ts + "." + got[1].body},
       {"expected", got[1].Header("X-Signature")},
       {"prefix", ""}},
  };
  for (const nlohmann::json& verdict : Judge(cases)) EXPECT_EQ(verdict["crypto"], "ok");
}

TEST_F(HttpSigningTest, ASecretThatDoesNotDecodeIsRefusedByPathWithoutItsValue) {
  HttpDestinationSettings s;
  s.name = "signed";
  s.base_url = receiver_.BaseUrl();
  s.signing = DestinationSigningConfig{
      "standard-webhooks", {{"secret", kSecretNew}, {"previousSecrets", {"whsec_tooShort1"}}}};
  Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("destinations.signed.signing.previousSecrets[0]"));
  EXPECT_THAT(d.status().message(), Not(HasSubstr("tooShort1")));
}

}  // namespace
}  // namespace queuebox
