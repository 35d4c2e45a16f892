// Unit tests of the admin pieces that need no server: auth, replay parsing, metrics rendering,
// retention validation, log formatting and the rate limiter.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "admin/admin_server.h"
#include "admin/metrics.h"
#include "admin/replay.h"
#include "admin/retention.h"
#include "auth/auth_schemes.h"
#include "auth/request_auth.h"
#include "config/schema.h"
#include "core/log.h"
#include "testing/fake_destination.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::queuebox::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

RequestAuth::HeaderLookup Headers(std::map<std::string, std::string> h) {
  return [h](std::string_view name) {
    for (const auto& [k, v] : h) {
      if (strcasecmp(k.c_str(), std::string(name).c_str()) == 0) return v;
    }
    return std::string();
  };
}

std::unique_ptr<RequestAuth> MakeAuth(std::string type, nlohmann::json options) {
  auto a = RequestAuth::Create(AdminAuthConfig{std::move(type), std::move(options)});
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? std::move(a).value() : nullptr;
}

TEST(AuthTest, BearerChecksSchemeAndToken) {
  auto auth = MakeAuth("bearer", {{"token", "s3cret-token"}});
  EXPECT_EQ(auth->Check(Headers({}), "", 0).message(), "Missing Authorization header");
  EXPECT_EQ(auth->Check(Headers({{"Authorization", "s3cret-token"}}), "", 0).message(),
            "Invalid bearer token");
  EXPECT_EQ(auth->Check(Headers({{"Authorization", "Bearer wrong"}}), "", 0).message(),
            "Invalid bearer token");
  EXPECT_EQ(auth->Check(Headers({{"Authorization", "Bearer wrong"}}), "", 0).code(),
            StatusCode::kPermissionDenied);
  EXPECT_TRUE(auth->Check(Headers({{"Authorization", "bearer s3cret-token"}}), "", 0).ok());
}

TEST(AuthTest, ApiKeyUsesConfiguredHeader) {
  auto auth = MakeAuth("api-key", {{"key", "k-123"}, {"headerName", "X-Admin-Key"}});
  EXPECT_EQ(auth->Check(Headers({{"X-API-Key", "k-123"}}), "", 0).message(),
            "Missing X-Admin-Key header");
  EXPECT_EQ(auth->Check(Headers({{"x-admin-key", "k-12"}}), "", 0).message(), "Invalid API key");
  EXPECT_TRUE(auth->Check(Headers({{"x-admin-key", "k-123"}}), "", 0).ok());
}

TEST(AuthTest, HmacBodyAndTimestampDotBody) {
  // Known vector: HMAC-SHA256("key", "The quick brown fox jumps over the lazy dog").
  auto mac = HmacHex("HmacSHA256", "key", "The quick brown fox jumps over the lazy dog");
  ASSERT_TRUE(mac.ok());
  EXPECT_EQ(*mac, "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8");
  EXPECT_THAT(HmacHex("HmacMD5", "k", "p"),
              StatusIs(StatusCode::kInvalidArgument,
                       "admin.auth.algorithm must be HmacSHA256, HmacSHA1 or HmacSHA512"));

  auto body_auth = MakeAuth("hmac", {{"secret", "whsec"}});
  std::string body = R"({"topic":"a"})";
  std::string good = "sha256=" + *HmacHex("HmacSHA256", "whsec", body);
  EXPECT_EQ(body_auth->Check(Headers({}), body, 0).message(), "Missing X-Signature header");
  EXPECT_EQ(body_auth->Check(Headers({{"X-Signature", good + "0"}}), body, 0).message(),
            "Invalid signature");
  EXPECT_TRUE(body_auth->Check(Headers({{"X-Signature", good}}), body, 0).ok());

  auto ts_auth = MakeAuth("hmac", {{"secret", "whsec"},
                                   {"algorithm", "HmacSHA512"},
                                   {"signaturePrefix", ""},
                                   {"timestampHeader", "X-Timestamp"},
                                   {"timestampTolerance", 300000}});
  int64_t now = 1'700'000'000'000;
  std::string ts = std::to_string(now - 1000);
  std::string sig = *HmacHex("HmacSHA512", "whsec", ts + "." + body);
  EXPECT_EQ(ts_auth->Check(Headers({{"X-Signature", sig}}), body, now).message(),
            "Missing timestamp header");
  EXPECT_EQ(
      ts_auth->Check(Headers({{"X-Signature", sig}, {"X-Timestamp", "12a"}}), body, now).message(),
      "Invalid timestamp format");
  EXPECT_EQ(
      ts_auth->Check(Headers({{"X-Signature", sig}, {"X-Timestamp", ts}}), body, now + 301'000)
          .message(),
      "Request timestamp expired");
  EXPECT_TRUE(ts_auth->Check(Headers({{"X-Signature", sig}, {"X-Timestamp", ts}}), body, now).ok());
  // A signature over the body alone does not pass the TIMESTAMP_DOT_BODY check.
  std::string body_only = *HmacHex("HmacSHA512", "whsec", body);
  EXPECT_EQ(ts_auth->Check(Headers({{"X-Signature", body_only}, {"X-Timestamp", ts}}), body, now)
                .message(),
            "Invalid signature");
}

// Every algorithm the option table accepts has a digest (HMAC-SHA1("key", "The quick brown fox
// jumps over the lazy dog") is a published vector).
TEST(AuthTest, EveryDeclaredAlgorithmSigns) {
  for (const std::string& algorithm : HmacAlgorithms()) {
    EXPECT_TRUE(HmacHex(algorithm, "k", "p").ok()) << algorithm;
  }
  auto sha1 = HmacHex("HmacSHA1", "key", "The quick brown fox jumps over the lazy dog");
  ASSERT_TRUE(sha1.ok());
  EXPECT_EQ(*sha1, "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9");
  auto auth = MakeAuth("hmac", {{"secret", "key"}, {"algorithm", "HmacSHA1"}});
  EXPECT_TRUE(auth->Check(Headers({{"X-Signature", "sha256=" + *sha1}}),
                          "The quick brown fox jumps over the lazy dog", 0)
                  .ok());
}

// timestampTolerance is milliseconds, as declared (QueueBox reference §11.1).
TEST(AuthTest, TimestampToleranceIsMilliseconds) {
  auto auth = MakeAuth(
      "hmac", {{"secret", "s"}, {"timestampHeader", "X-Ts"}, {"timestampTolerance", 1000}});
  std::string sig = "sha256=" + *HmacHex("HmacSHA256", "s", "1000000.b");
  EXPECT_TRUE(auth->Check(Headers({{"X-Signature", sig}, {"X-Ts", "1000000"}}), "b", 1001000).ok());
  EXPECT_EQ(
      auth->Check(Headers({{"X-Signature", sig}, {"X-Ts", "1000000"}}), "b", 1001001).message(),
      "Request timestamp expired");
  auto text = RequestAuth::Create({"hmac", {{"secret", "s"}, {"timestampTolerance", "5m"}}});
  EXPECT_EQ(text.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(), HasSubstr("admin.auth.timestampTolerance"));
}

// Found by fuzz/webhook_auth_fuzz: |now - timestamp| overflowed int64 for a timestamp near the
// ends of its range (undefined behaviour); at now = 0 the distance from INT64_MIN came out
// negative and the request passed as fresh.
TEST(AuthTest, ExtremeTimestampsAreExpiredNotOverflowed) {
  auto auth = MakeAuth("hmac", {{"secret", "s"}, {"timestampHeader", "X-Ts"}});
  for (const std::string ts : {"-9223372036854775808", "9223372036854775807"}) {
    std::string sig = "sha256=" + *HmacHex("HmacSHA256", "s", ts + ".b");
    for (int64_t now : {int64_t{0}, int64_t{1764633600000}, std::numeric_limits<int64_t>::min(),
                        std::numeric_limits<int64_t>::max()}) {
      if (std::to_string(now) == ts) continue;
      EXPECT_EQ(auth->Check(Headers({{"X-Signature", sig}, {"X-Ts", ts}}), "b", now).message(),
                "Request timestamp expired")
          << ts << " at " << now;
    }
  }
}

TEST(AuthTest, ConfigErrorsNameTheKey) {
  auto missing = RequestAuth::Create({"bearer", nlohmann::json::object()});
  EXPECT_THAT(missing.status().message(), HasSubstr("admin.auth.token"));
  auto algo = RequestAuth::Create({"hmac", {{"secret", "x"}, {"algorithm", "HmacMD5"}}});
  EXPECT_THAT(algo.status().message(), HasSubstr("admin.auth.algorithm"));
  auto dot = RequestAuth::Create(
      {"hmac", {{"secret", "x"}, {"signaturePayloadFormat", "TIMESTAMP_DOT_BODY"}}});
  EXPECT_THAT(dot.status().message(), HasSubstr("timestampHeader"));
  auto type = RequestAuth::Create({"oauth2", nlohmann::json::object()});
  EXPECT_THAT(type.status().message(), HasSubstr("bearer, api-key or hmac"));
}

TEST(AuthTest, AdminGuardRefusesEnabledWithoutAuth) {
  AdminConfig admin;
  admin.enabled = true;
  Status s = RequireAdminAuth(admin);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("Set 'admin.auth'"));
  admin.insecure = true;
  EXPECT_TRUE(RequireAdminAuth(admin).ok());
  admin.insecure = false;
  admin.auth = AdminAuthConfig{"bearer", {{"token", "t"}}};
  EXPECT_TRUE(RequireAdminAuth(admin).ok());
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
}

TEST(ReplayParseTest, ReadsEveryFilterAndNormalises) {
  auto r = ParseReplayRequest(R"({"ids":["6F9619FF-8B86-D011-B42D-00C04FC964FF"],
      "topic":"order.created","topics":["a","b"],"destination":"web",
      "createdAfter":"2024-05-01T12:00:00+02:00","createdBefore":"2024-05-02T00:00:00.250Z",
      "unknown":42})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ids->at(0), "6f9619ff-8b86-d011-b42d-00c04fc964ff");
  EXPECT_EQ(*r->topic, "order.created");
  EXPECT_EQ(r->topics->size(), 2u);
  EXPECT_EQ(*r->destination, "web");
  EXPECT_EQ(*r->created_after, "2024-05-01T10:00:00Z");
  EXPECT_EQ(*r->created_before, "2024-05-02T00:00:00.250Z");
  EXPECT_TRUE(r->HasFilter());
}

TEST(ReplayParseTest, RejectsBadInput) {
  EXPECT_THAT(ParseReplayRequest("{").status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(ParseReplayRequest("[]").status().message(), HasSubstr("JSON object"));
  EXPECT_THAT(ParseReplayRequest(R"({"ids":["nope"]})").status().message(),
              HasSubstr("'nope' in 'ids' is not a UUID"));
  EXPECT_THAT(ParseReplayRequest(R"({"ids":"x"})").status().message(), HasSubstr("'ids'"));
  EXPECT_THAT(ParseReplayRequest(R"({"topic":1})").status().message(), HasSubstr("'topic'"));
  EXPECT_THAT(ParseReplayRequest(R"({"createdAfter":"yesterday"})").status().message(),
              HasSubstr("createdAfter"));
  EXPECT_THAT(ParseReplayRequest(R"({"createdBefore":"2024-02-30T00:00:00Z"})"),
              StatusIs(StatusCode::kInvalidArgument,
                       "'createdBefore': '2024-02-30T00:00:00Z' is not an "
                       "ISO-8601 instant such as 2024-05-01T10:00:00Z"));
  EXPECT_THAT(ParseReplayRequest(R"({"createdBefore":"2024-02-01T00:00:00"})"),
              StatusIs(StatusCode::kInvalidArgument,
                       "'createdBefore': '2024-02-01T00:00:00' is not an "
                       "ISO-8601 instant such as 2024-05-01T10:00:00Z"));
  // Null and unknown fields are no filter.
  auto empty = ParseReplayRequest(R"({"topic":null,"other":1})");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->HasFilter());
  // An empty id list is a filter (that matches nothing).
  EXPECT_TRUE(ParseReplayRequest(R"({"ids":[]})")->HasFilter());
}

std::vector<std::string> Families(const std::string& exposition) {
  std::vector<std::string> names;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# TYPE ", 0) == 0) names.push_back(line.substr(7, line.find(' ', 7) - 7));
  }
  return names;
}

// The counts not yet recorded for the cluster-wide figures: taken once, put back on a failure.
TEST(ActivityWindowTest, TakesTheUnrecordedCountsOnceAndKeepsWhatIsPutBack) {
  ActivityWindow w;
  w.Add("sent", 3, 100);
  w.Add("dead", 1, 100);
  w.Add("retry", 7, 100);
  w.Add("sent", 2, 101);
  ActivityWindow::Minute taken = w.TakeUnrecorded();
  EXPECT_EQ(taken.sent, 5);
  EXPECT_EQ(taken.dead, 1);
  EXPECT_EQ(w.TakeUnrecorded().sent, 0);
  w.PutBack(taken);
  w.Add("dead", 4, 101);
  taken = w.TakeUnrecorded();
  EXPECT_EQ(taken.sent, 5);
  EXPECT_EQ(taken.dead, 5);
  // The per-minute window is not changed by taking.
  std::vector<ActivityWindow::Minute> last = w.Last(101);
  EXPECT_EQ(last.back().sent, 2);
  EXPECT_EQ(last.back().dead, 4);
  EXPECT_EQ(last[last.size() - 2].sent, 3);
}

// Counts PendingGauges() calls, each taking `cost`.
class CountingOperations final : public OutboxOperations {
 public:
  explicit CountingOperations(std::chrono::milliseconds cost) : cost_(cost) {}
  Status Ping() override { return Status::Ok(); }
  Result<OutboxStats> Stats() override { return OutboxStats{}; }
  Result<OutboxStats> PendingGauges() override {
    std::this_thread::sleep_for(cost_);
    calls.fetch_add(1);
    if (fail) return Unavailable("the database is down");
    OutboxStats stats;
    stats.rows_by_state["pending"] = 7;
    return stats;
  }
  Result<std::vector<std::string>> DistinctTopics() override { return std::vector<std::string>{}; }
  Result<int64_t> Replay(const ReplayFilter&) override { return int64_t{0}; }
  Result<std::vector<DeadRow>> ListDead(int) override { return std::vector<DeadRow>{}; }
  Result<int64_t> DeleteOlderThan(const std::string&, int64_t, int) override { return int64_t{0}; }
  Result<int64_t> DeleteBeyondCount(const std::string&, int64_t, int) override {
    return int64_t{0};
  }
  std::atomic<int> calls{0};
  bool fail = false;  // set before the refresher starts

 private:
  std::chrono::milliseconds cost_;
};

// pendingGaugeIntervalMs is a minimum: a count that takes 40 ms is not run again for
// kPendingCostFactor x 40 ms (4 s), by the refresher or by a scrape; a cheap one follows the
// interval, and so does a slow one that failed (the gauges must not stay stale for 100 times a
// connection timeout once the database is back).
TEST(MetricsTest, ASlowPendingCountWaitsAHundredTimesItsCost) {
  CountingOperations slow(std::chrono::milliseconds(40));
  Metrics m("1.0.0");
  m.StartPendingRefresher(&slow, std::chrono::milliseconds(1));
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (std::chrono::steady_clock::now() < until) {
    EXPECT_THAT(m.Render(), HasSubstr("queuebox_outbox_messages_pending 7"));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  m.StopPendingRefresher();
  EXPECT_EQ(slow.calls.load(), 1);

  CountingOperations cheap(std::chrono::milliseconds(0));
  m.StartPendingRefresher(&cheap, std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  m.StopPendingRefresher();
  EXPECT_GE(cheap.calls.load(), 5);

  CountingOperations failing(std::chrono::milliseconds(40));
  failing.fail = true;
  m.StartPendingRefresher(&failing, std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  m.StopPendingRefresher();
  EXPECT_GE(failing.calls.load(), 4);
}

TEST(MetricsTest, RendersQueueBoxNamesAndLabels) {
  Metrics m("9.9.9");
  testing::FakeDestination web("web", "http");
  m.OnMessages("sent", 3);
  m.OnMessages("dead", 1);
  m.OnPublish(web, true, 0.02);
  m.OnPublish(web, false, 0.5);
  m.OnQueueDepth("web", 2);
  m.OnQueueDepth("web", -1);
  m.OnHttpResponse(503);
  m.OnHttpResponse(42);
  m.OnProcessingDuration(0.7);
  m.OnCleanup("outbox", 5, 0.01);
  m.SetPending(7, 12.5);
  std::string text = m.Render();
  // QueueBox's exporter name (its upgrade guide greps `^queuebox{`).
  EXPECT_THAT(text, HasSubstr("\nqueuebox{version=\"9.9.9\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("queuebox_info")));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_messages_total{status=\"sent\"} 3"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_messages_total{status=\"dead\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "queuebox_outbox_destination_messages_total{destination=\"web\",outcome=\"failure\"} 1"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_queue_depth{destination=\"web\"} 1"));
  EXPECT_THAT(text, HasSubstr("queuebox_http_publish_responses_total{status_class=\"5xx\"} 1"));
  EXPECT_THAT(text, HasSubstr("queuebox_http_publish_responses_total{status_class=\"other\"} 1"));
  EXPECT_THAT(
      text,
      HasSubstr("queuebox_outbox_publish_duration_seconds_max{destination_type=\"http\"} 0.5"));
  EXPECT_THAT(
      text,
      HasSubstr("queuebox_outbox_publish_duration_seconds_count{destination_type=\"http\"} 2"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_processing_duration_seconds{quantile=\"0.99\"}"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_messages_pending 7"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_oldest_pending_age_seconds 12.5"));
  EXPECT_THAT(text, HasSubstr("queuebox_cleanup_messages_deleted_total{table=\"outbox\"} 5"));
  auto names = Families(text);
  EXPECT_THAT(names, ::testing::Contains("queuebox_uptime_seconds"));
  EXPECT_THAT(names, ::testing::Contains("queuebox_cleanup_last_run_timestamp"));
  EXPECT_GT(m.SecondsSinceLastPollCycle(), 1e6);
  m.OnPollCycle(true);
  EXPECT_LT(m.SecondsSinceLastPollCycle(), 60.0);
}

// The relay reports a publish's messages, and an outcome write's rows, in one call each: every
// message is still one observation of the summaries, and the counters count messages.
TEST(MetricsTest, ObservationsOfOneCallCountPerMessage) {
  Metrics m("9.9.9");
  testing::FakeDestination web("web", "http");
  m.OnProcessingDurations(0.25, 3);
  m.OnProcessingDuration(0.5);
  m.OnPublishes(web, 4, 1, 0.125);
  std::string text = m.Render();
  EXPECT_THAT(text, HasSubstr("# TYPE queuebox_outbox_processing_duration_seconds summary\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_processing_duration_seconds_count 4\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_processing_duration_seconds_sum 1.25\n"));
  EXPECT_THAT(text,
              HasSubstr("queuebox_outbox_processing_duration_seconds{quantile=\"0.5\"} 0.25\n"));
  EXPECT_THAT(text,
              HasSubstr("queuebox_outbox_processing_duration_seconds{quantile=\"0.99\"} 0.5\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE queuebox_outbox_publish_duration_seconds summary\n"));
  EXPECT_THAT(
      text,
      HasSubstr("queuebox_outbox_publish_duration_seconds_count{destination_type=\"http\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_publish_duration_seconds{destination_type=\"http\","
                              "quantile=\"0.95\"} 0.125\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_destination_messages_total{destination=\"web\","
                              "outcome=\"success\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_destination_messages_total{destination=\"web\","
                              "outcome=\"failure\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("queuebox_outbox_publish_duration_seconds_max{destination_type="
                              "\"http\"} 0.125\n"));
}

// Counters whose label values are known are scraped at 0 before their first event, so an
// increase() alert sees the first one (QueueBox shows them only after it).
TEST(MetricsTest, CircuitStateIsAGaugePerDestination) {
  Metrics m("1.0.0");
  m.OnCircuitState("orders-api", 0);
  m.OnCircuitState("events", 0);
  m.OnCircuitState("events", 1);
  std::string text = m.Render();
  EXPECT_NE(text.find("queuebox_destination_circuit_state{destination=\"orders-api\"} 0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("queuebox_destination_circuit_state{destination=\"events\"} 1"),
            std::string::npos)
      << text;
}

TEST(MetricsTest, KnownLabelSetsStartAtZero) {
  Metrics m("1.0.0");
  m.ExportDestinations({"orders-api", "events"});
  m.ExportCleanup("outbox");
  std::string text = m.Render();
  for (const char* line : {
           "queuebox_outbox_messages_total{status=\"sent\"} 0",
           "queuebox_outbox_messages_total{status=\"failed\"} 0",
           "queuebox_outbox_messages_total{status=\"dead\"} 0",
           "queuebox_outbox_messages_total{status=\"released\"} 0",
           "queuebox_claims_lost_total{component=\"outbox\"} 0",
           "queuebox_claims_lost_total{component=\"inbox\"} 0",
           "queuebox_http_publish_responses_total{status_class=\"1xx\"} 0",
           "queuebox_http_publish_responses_total{status_class=\"5xx\"} 0",
           "queuebox_http_publish_responses_total{status_class=\"other\"} 0",
           "queuebox_outbox_destination_messages_total{destination=\"orders-api\",outcome="
           "\"success\"} 0",
           "queuebox_outbox_destination_messages_total{destination=\"events\",outcome="
           "\"failure\"} 0",
           "queuebox_outbox_queue_depth{destination=\"events\"} 0",
           "queuebox_cleanup_messages_deleted_total{table=\"outbox\"} 0",
       }) {
    EXPECT_THAT(text, HasSubstr(std::string("\n") + line + "\n")) << line;
  }
  m.OnClaimsLost(1);
  EXPECT_THAT(m.Render(), HasSubstr("\nqueuebox_claims_lost_total{component=\"outbox\"} 1\n"));
  // No pool exported: no hikaricp family.
  EXPECT_THAT(text, Not(HasSubstr("hikaricp")));
}

TEST(MetricsTest, ThePoolIsExportedUnderHikariNames) {
  Metrics m("1.0.0");
  ConnectionPoolStats stats{
      .active = 3, .idle = 2, .pending = 4, .min = 0, .max = 10, .timeouts = 0};
  m.ExportConnectionPool("queuebox", [&stats] { return stats; });
  std::string text = m.Render();
  for (const char* line : {
           "hikaricp_connections{pool=\"queuebox\"} 5",
           "hikaricp_connections_active{pool=\"queuebox\"} 3",
           "hikaricp_connections_idle{pool=\"queuebox\"} 2",
           "hikaricp_connections_pending{pool=\"queuebox\"} 4",
           "hikaricp_connections_min{pool=\"queuebox\"} 0",
           "hikaricp_connections_max{pool=\"queuebox\"} 10",
           "hikaricp_connections_timeout_total{pool=\"queuebox\"} 0",
       }) {
    EXPECT_THAT(text, HasSubstr(std::string("\n") + line + "\n")) << line;
  }
  stats.timeouts = 2;
  EXPECT_THAT(m.Render(), HasSubstr("\nhikaricp_connections_timeout_total{pool=\"queuebox\"} 2\n"));
  stats.timeouts = 3;
  EXPECT_THAT(m.Render(), HasSubstr("\nhikaricp_connections_timeout_total{pool=\"queuebox\"} 3\n"));
}

// queuebox_transform_failures_total{strategy}: the three strategies from the start, at 0.
TEST(MetricsTest, TransformFailuresStartAtZeroForEveryStrategy) {
  Metrics m;
  std::string text = m.Render();
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"fail\"} 0"));
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"skip\"} 0"));
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"dead\"} 0"));
  m.OnTransformFailure("skip");
  m.OnTransformFailure("skip");
  m.OnTransformFailure("dead");
  text = m.Render();
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"fail\"} 0"));
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"skip\"} 2"));
  EXPECT_THAT(text, HasSubstr("queuebox_transform_failures_total{strategy=\"dead\"} 1"));
}

TEST(RetentionValidateTest, PolicyNeedsItsLimit) {
  RetentionConfig c;
  c.enabled = true;
  c.outbox.policy = "AGE";
  EXPECT_THAT(RetentionService::Validate(c).status().message(), HasSubstr("maxAge"));
  c.outbox.policy = "COUNT";
  EXPECT_THAT(RetentionService::Validate(c).status().message(), HasSubstr("maxCount"));
  c.outbox.policy = "SIZE";
  EXPECT_THAT(RetentionService::Validate(c).status().message(),
              HasSubstr("AGE, COUNT or DISABLED"));
  c.outbox.policy = "DISABLED";
  EXPECT_FALSE(*RetentionService::Validate(c));
  c.outbox.policy = "AGE";
  c.outbox.max_age_ms = 1000;
  EXPECT_TRUE(*RetentionService::Validate(c));
  c.enabled = false;
  EXPECT_FALSE(*RetentionService::Validate(c));
}

class LogCapture {
 public:
  explicit LogCapture(std::string_view format) {
    log::Init(format, "debug");
    log::SetSinkForTesting([this](std::string_view l) { lines.emplace_back(l); });
  }
  ~LogCapture() {
    log::SetSinkForTesting(nullptr);
    log::Init("json", "info");
  }
  std::vector<std::string> lines;
};

TEST(LogTest, JsonLineHasLevelTimeMessageAndFields) {
  LogCapture cap("json");
  log::Warn("Delivery failed\n\"quoted\"", {{"message_id", "m-1"}, {"message", "clash"}});
  ASSERT_EQ(cap.lines.size(), 1u);
  auto j = nlohmann::json::parse(cap.lines[0]);
  EXPECT_EQ(j["level"], "warn");
  EXPECT_EQ(j["message"], "Delivery failed\n\"quoted\"");
  EXPECT_EQ(j["message_id"], "m-1");
  EXPECT_EQ(j["field.message"], "clash");
  EXPECT_THAT(j["time"].get<std::string>(), ::testing::MatchesRegex("....-..-..T..:..:..\\....Z"));
  EXPECT_EQ(cap.lines[0].find('\n'), std::string::npos);
}

TEST(LogTest, TextLineIsOneLineWithQuotedValues) {
  std::string line = log::FormatLine(false, log::Level::kError, "two\nlines",
                                     {{"topic", "order.created"}, {"reason", "a b=c"}});
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_THAT(line, HasSubstr("ERROR two\\nlines topic=order.created reason=\"a b=c\""));
}

TEST(LogTest, RedactedCallerTextCarriesNoSecret) {
  // Callers pass ids, names and redacted reasons; the formatter adds nothing of its own, so a
  // secret from the configuration never shows up in any format.
  const std::string secret = "hunter2-secret-value";
  for (const char* format : {"json", "text"}) {
    LogCapture cap(format);
    AdminConfig admin;
    admin.enabled = true;
    admin.auth = AdminAuthConfig{"bearer", {{"token", secret}}};
    auto auth = RequestAuth::Create(*admin.auth);
    ASSERT_TRUE(auth.ok());
    Status s = (*auth)->Check(Headers({{"Authorization", "Bearer " + secret + "x"}}), "", 0);
    log::Warn("An admin request was refused.", {{"reason", s.message()}});
    ASSERT_EQ(cap.lines.size(), 1u);
    EXPECT_THAT(cap.lines[0], Not(HasSubstr("hunter2")));
    EXPECT_THAT(cap.lines[0], HasSubstr("Invalid bearer token"));
  }
}

TEST(LogTest, RateLimiterBoundsAnOutageToAFewLines) {
  LogCapture cap("json");
  log::RateLimiter limiter(std::chrono::seconds(60));
  int written = 0;
  for (int i = 0; i < 10000; ++i) {
    if (log::WriteLimited(limiter, log::Level::kError, "The database is unreachable.",
                          {{"attempt", std::to_string(i)}})) {
      ++written;
    }
  }
  int64_t suppressed = limiter.TakeSuppressed();
  log::Error("Repeated errors were suppressed.", {{"suppressed", std::to_string(suppressed)}});
  EXPECT_LE(written, 5);
  EXPECT_GE(written, 1);
  EXPECT_EQ(written + suppressed, 10000);
  EXPECT_EQ(static_cast<int>(cap.lines.size()), written + 1);
  EXPECT_THAT(cap.lines.back(), HasSubstr("\"suppressed\":\"" + std::to_string(suppressed) + "\""));
  EXPECT_EQ(limiter.TakeSuppressed(), 0);
}

// Found by fuzz/replay_request_fuzz.cc: a year below 1000 normalised to "227-01-02T...", which
// did not parse back.
TEST(ReplayInstantTest, YearsBelowOneThousandKeepFourDigitsAndParseBack) {
  auto once = NormaliseInstant("0227-01-02 03:04:05Z");
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  EXPECT_EQ(*once, "0227-01-02T03:04:05Z");
  auto twice = NormaliseInstant(*once);
  ASSERT_TRUE(twice.ok()) << twice.status().ToString();
  EXPECT_EQ(*twice, *once);
  EXPECT_FALSE(NormaliseInstant("0000-01-01T00:00:00Z").ok());
  EXPECT_FALSE(NormaliseInstant("9999-12-31T23:30:00-01:00").ok());  // year 10000 in UTC
}

}  // namespace
}  // namespace queuebox
