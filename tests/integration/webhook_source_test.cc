// HTTP webhook sources on the data port (issue 14 items 2 and 6): the real AdminServer with the
// sources registered, a real inbox store (SQLite and PostgreSQL), requests from a real HTTP
// client on loopback. Each test asserts QueueBox's exact answer and what the inbox holds.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "auth/request_auth.h"
#include "config/load.h"
#include "core/log.h"
#include "sources/http/http_source.h"
#include "testing/http_receiver.h"
#include "testing/log_capture.h"
#include "testing/pg_server.h"
#include "testing/tcp_forwarder.h"
#include "webhook_test_support.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::queuebox::testing::LogCapture;
using testing::DialectName;
using ::testing::HasSubstr;

constexpr int64_t kNowMs = 1767225600000;  // the injected HMAC clock: 2026-01-01T00:00:00Z

// The sources every test uses, as a user writes them.
constexpr const char* kSourcesYaml = R"(
inbox:
  basePath: /inbox
  maxBodyBytes: 4096
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    aggregateIdPath: [$.data.object.customer, $.account]
  signed:
    path: /signed
    topic: "{{ source }}"
    idempotencyKeyHeader: X-Delivery-Id
    auth:
      type: hmac
      secret: whsec_test
      headerName: X-Signature
      timestampHeader: X-Timestamp
  bearer:
    path: /bearer
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    auth:
      type: bearer
      token: t0ken
  apikeyed:
    path: /apikeyed
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    auth:
      type: api-key
      key: k3y-s3cret
      headerName: X-Api-Key
  github:
    path: /github
    topic: "{{ source }}"
    idempotencyKeyHeader: X-GitHub-Delivery
    eventTypeHeader: X-GitHub-Event
    aggregateIdHeader: X-Repo
    aggregateIdPath: $.repository.full_name
    auth:
      type: hmac
      secret: gh_s3cret
      headerName: X-Hub-Signature-256
      signaturePrefix: "sha256="
      signaturePayloadFormat: BODY
  limited:
    path: /limited
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    rateLimit:
      requestsPerMinute: 2
  delayed:
    path: /delayed
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    initialDelay: 1h
  published:
    path: /published
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    initialDelay: 10s
    scheduledAtHeader: X-Published-At
    scheduledAtPath: $.created
  prod:
    path: /prod
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    filter:
      require:
        - header: X-Env
          equals: prod
)";

std::string ToLowerAscii(std::string s) {
  for (char& c : s) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return s;
}

// Loads kSourcesYaml (plus `database`) through the real loader.
Config LoadSources(const std::string& database_url) {
  char tmpl[] = "/tmp/qb_webhook_cfg_XXXXXX";
  int fd = mkstemp(tmpl);
  EXPECT_GE(fd, 0);
  close(fd);
  {
    std::ofstream out(tmpl);
    out << "database:\n  url: \"" << database_url << "\"\n" << kSourcesYaml;
  }
  ConfigSource source;
  source.file = tmpl;
  source.default_file = "/nonexistent/queuebox.yml";
  auto loaded = LoadConfig(source);
  std::remove(tmpl);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  return loaded.ok() ? std::move(loaded).value() : Config{};
}

class WebhookSourceTest : public testing::WebhookSourcesTest {
 protected:
  void SetUp() override {
    AdminStoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    StartWithSources(db_->config().url, store_.get());
  }

  void StartWithSources(const std::string& url, OutboxStore* store) {
    sources::WebhookOptions options;
    options.now_ms = [] { return kNowMs; };
    options.steady_now = [this] { return steady_.now(); };
    StartSources(LoadSources(url), store, options, &metrics_);
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       httplib::Headers headers = {}) {
    httplib::Client c = Data();
    return c.Post(path.c_str(), headers, body, "application/json");
  }

  int64_t Rows(const std::string& where = "1=1") {
    return std::stoll(db_->Scalar("SELECT COUNT(*) FROM inbox WHERE " + where));
  }

  static std::string Sign(const std::string& timestamp, const std::string& body) {
    auto mac = HmacHex("HmacSHA256", "whsec_test", timestamp + "." + body);
    return "sha256=" + mac.value();
  }

  std::string Exposition() { return metrics_.Render(); }

  queuebox::Metrics metrics_;
  // The sources' steady clock, read on the server's threads and moved on by the test (the
  // request between them orders that, over a socket ThreadSanitizer cannot see): atomic.
  class ManualSteadyClock {
   public:
    std::chrono::steady_clock::time_point now() const { return t_.load(); }
    void operator+=(std::chrono::steady_clock::duration d) { t_.store(t_.load() + d); }

   private:
    std::atomic<std::chrono::steady_clock::time_point> t_{};
  };
  ManualSteadyClock steady_;
};

TEST_P(WebhookSourceTest, StoresThenAnswersDuplicate) {
  const std::string body =
      R"({"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_9"}}})";
  auto first = Post("/inbox/stripe", body, {{"X-Correlation-Id", "corr-1"}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 202);
  json answer = json::parse(first->body);
  ASSERT_TRUE(answer.contains("messageId")) << first->body;
  EXPECT_EQ(first->get_header_value("X-Correlation-Id"), "corr-1");
  const std::string id = answer["messageId"];

  auto second = Post("/inbox/stripe", body);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, R"({"status":"duplicate"})");

  auto rows = db_->Query(
      "SELECT id, source, idempotency_key, aggregate_id, event_type, correlation_id, state, "
      "consumption FROM inbox");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{id, "stripe", "evt_1", "cus_9", "invoice.paid",
                                               "corr-1", "pending", "push"}));
  EXPECT_THAT(Exposition(), HasSubstr(R"(queuebox_inbox_messages_total{status="new"} 1)"));
  EXPECT_THAT(Exposition(), HasSubstr(R"(queuebox_inbox_messages_total{status="duplicate"} 1)"));
}

TEST_P(WebhookSourceTest, AggregateIdFromTheSecondPathWhenTheFirstIsMissing) {
  auto r = Post("/inbox/stripe", R"({"id":"evt_2","type":"a","account":"acct_7"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  EXPECT_EQ(db_->Scalar("SELECT aggregate_id FROM inbox"), "acct_7");
}

TEST_P(WebhookSourceTest, ABodyWithANulIs400AndNothingStored) {
  // nlohmann's parser alone stops at the NUL and would store {"id":"evt_0"}.
  auto r = Post("/inbox/stripe", std::string("{\"id\":\"evt_0\"}\0{\"more\":1}", 25));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, R"({"error":"Invalid JSON"})");
  EXPECT_EQ(Rows(), 0);
}

TEST_P(WebhookSourceTest, BadJsonIs400AndNothingStored) {
  auto r = Post("/inbox/stripe", "{not json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, R"({"error":"Invalid JSON"})");
  EXPECT_FALSE(r->get_header_value("X-Correlation-Id").empty());
  EXPECT_EQ(Rows(), 0);
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="invalid_json"} 1)"));
}

TEST_P(WebhookSourceTest, MissingKeyIs400) {
  auto r = Post("/inbox/stripe", R"({"type":"invoice.paid"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(r->body, R"({"error":"No idempotency key: $.id gave no value"})");
  EXPECT_EQ(Rows(), 0);
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="extraction_failed"} 1)"));
}

TEST_P(WebhookSourceTest, UnicodeAndDeepNestingAreStoredAsSent) {
  std::string nested = R"({"id":"evt_deep","v":)";
  for (int i = 0; i < 63; ++i) nested += "[";
  nested += "1";
  for (int i = 0; i < 63; ++i) nested += "]";
  nested += "}";
  auto r = Post("/inbox/stripe", nested);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202) << r->body;
  auto u = Post("/inbox/stripe", R"({"id":"évt_☃_𝄞","type":"naïve"})");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->status, 202) << u->body;
  EXPECT_EQ(db_->Scalar("SELECT event_type FROM inbox WHERE idempotency_key = 'évt_☃_𝄞'"), "naïve");
  EXPECT_EQ(json::parse(db_->Scalar("SELECT payload FROM inbox WHERE idempotency_key = "
                                    "'evt_deep'")),
            json::parse(nested));
}

TEST_P(WebhookSourceTest, HmacWrongSignatureAndExpiredTimestampAre401) {
  LogCapture logs;
  const std::string body = R"({"n":1})";
  const std::string ts = std::to_string(kNowMs);
  auto good = Post("/inbox/signed", body,
                   {{"X-Delivery-Id", "d-1"},
                    {"X-Timestamp", ts},
                    {"X-Signature", Sign(ts, body)},
                    {"Cookie", "session=s"},
                    {"X-Custom", "kept"}});
  ASSERT_TRUE(good);
  EXPECT_EQ(good->status, 202) << good->body;

  const std::string marked_body = R"({"n":"body-marker-7f3a"})";
  const std::string wrong_signature = Sign(ts, R"({"n":2})");
  auto wrong =
      Post("/inbox/signed", marked_body,
           {{"X-Delivery-Id", "d-2"}, {"X-Timestamp", ts}, {"X-Signature", wrong_signature}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->body, R"({"error":"Invalid signature"})");

  steady_ += std::chrono::seconds(2);  // past the refusal log's one line per second
  const std::string old = std::to_string(kNowMs - 300001);
  const std::string old_signature = Sign(old, marked_body);
  auto expired =
      Post("/inbox/signed", marked_body,
           {{"X-Delivery-Id", "d-3"}, {"X-Timestamp", old}, {"X-Signature", old_signature}});
  ASSERT_TRUE(expired);
  EXPECT_EQ(expired->status, 401);
  EXPECT_EQ(expired->body, R"({"error":"Request timestamp expired"})");

  // Each refusal is logged with its source and reason; never the secret, a signature (the one
  // sent or the one expected) or the body.
  auto refused = logs.WithMessage("A webhook was refused.");
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].value("source", ""), "signed");
  EXPECT_EQ(refused[0].value("reason", ""), "Invalid signature");
  EXPECT_EQ(refused[1].value("reason", ""), "Request timestamp expired");
  logs.ExpectNoneContains({"whsec_test", wrong_signature.substr(7), Sign(ts, marked_body).substr(7),
                           old_signature.substr(7), "body-marker-7f3a"});

  EXPECT_EQ(Rows(), 1);
  json headers = json::parse(db_->Scalar("SELECT headers FROM inbox"));
  EXPECT_EQ(headers.value("X-Custom", ""), "kept");
  for (const auto& [name, value] : headers.items()) {
    EXPECT_NE(name, "X-Signature");
    EXPECT_NE(name, "Cookie");
  }
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="auth_failed"} 2)"));
}

TEST_P(WebhookSourceTest, BearerIsCheckedAndNeverStored) {
  LogCapture logs;
  auto none = Post("/inbox/bearer", R"({"id":"b1"})");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  steady_ += std::chrono::seconds(2);
  auto wrong = Post("/inbox/bearer", R"({"id":"body-marker-7f3a"})",
                    {{"Authorization", "Bearer wr0ng-t0ken"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  steady_ += std::chrono::seconds(2);
  auto ok = Post("/inbox/bearer", R"({"id":"b1"})",
                 {{"Authorization", "Bearer t0ken"}, {"Proxy-Authorization", "Basic x"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 202);
  json headers = json::parse(db_->Scalar("SELECT headers FROM inbox"));
  for (const auto& [name, value] : headers.items()) {
    EXPECT_NE(name, "Authorization");
    EXPECT_NE(name, "Proxy-Authorization");
  }
  // Both refusals are logged, without the configured token, the one sent, or the body.
  auto refused = logs.WithMessage("A webhook was refused.");
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[1].value("source", ""), "bearer");
  logs.ExpectNoneContains({"t0ken", "wr0ng", "body-marker-7f3a", "Basic x"});
}

TEST_P(WebhookSourceTest, ApiKeyIsCheckedAndNeverStored) {
  LogCapture logs;
  auto none = Post("/inbox/apikeyed", R"({"id":"k1"})");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  auto wrong = Post("/inbox/apikeyed", R"({"id":"k1"})", {{"X-Api-Key", "k3y-wr0ng"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(Rows(), 0);
  auto ok = Post("/inbox/apikeyed", R"({"id":"k1"})",
                 {{"X-Api-Key", "k3y-s3cret"}, {"X-Custom", "kept"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 202) << ok->body;
  json headers = json::parse(db_->Scalar("SELECT headers FROM inbox"));
  EXPECT_EQ(headers.value("X-Custom", ""), "kept");
  for (const auto& [name, value] : headers.items()) {
    EXPECT_NE(ToLowerAscii(name), "x-api-key");
  }
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="auth_failed"} 2)"));
  logs.ExpectNoneContains({"k3y-s3cret", "k3y-wr0ng"});
}

// GitHub's webhook style: `sha256=` + the HMAC-SHA256 of the body alone in X-Hub-Signature-256,
// no timestamp; the delivery id, event and aggregate come from headers (the aggregate header
// before its path).
TEST_P(WebhookSourceTest, GitHubStyleHmacOverTheBodyWithKeysFromHeaders) {
  const std::string body = R"({"action":"opened","repository":{"full_name":"octo/path"}})";
  auto sign = [](const std::string& b) {
    return "sha256=" + HmacHex("HmacSHA256", "gh_s3cret", b).value();
  };
  auto first = Post("/inbox/github", body,
                    {{"X-GitHub-Delivery", "gh-1"},
                     {"X-GitHub-Event", "pull_request"},
                     {"X-Repo", "octo/header"},
                     {"X-Hub-Signature-256", sign(body)}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 202) << first->body;
  auto second = Post("/inbox/github", body,
                     {{"X-GitHub-Delivery", "gh-2"},
                      {"X-GitHub-Event", "push"},
                      {"X-Hub-Signature-256", sign(body)}});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 202) << second->body;

  // Refused: the bare hex without the prefix, a signature of another body, one over
  // "<timestamp>.<body>".
  const std::string bare = sign(body).substr(7);
  const std::string ts = std::to_string(kNowMs);
  for (const std::string& bad : {bare, sign(R"({"action":"closed"})"), sign(ts + "." + body)}) {
    auto r =
        Post("/inbox/github", body,
             {{"X-GitHub-Delivery", "gh-bad"}, {"X-Timestamp", ts}, {"X-Hub-Signature-256", bad}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << bad;
  }

  auto rows = db_->Query(
      "SELECT idempotency_key, event_type, aggregate_id, headers FROM inbox ORDER BY "
      "idempotency_key");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "gh-1");
  EXPECT_EQ(rows[0][1], "pull_request");
  EXPECT_EQ(rows[0][2], "octo/header");
  EXPECT_EQ(rows[1][0], "gh-2");
  EXPECT_EQ(rows[1][1], "push");
  EXPECT_EQ(rows[1][2], "octo/path");
  const json stored = json::parse(rows[0][3]);
  for (const auto& [name, value] : stored.items()) {
    EXPECT_NE(ToLowerAscii(name), "x-hub-signature-256");
  }
}

// A flood of refused requests logs at most one line per source per second (the injected clock
// stands still here); the next line says how many were suppressed. Every refusal is counted.
TEST_P(WebhookSourceTest, AFloodOfRefusalsLogsOneLinePerSourcePerSecond) {
  LogCapture logs;
  for (int i = 0; i < 20; ++i) {
    auto r = Post("/inbox/bearer", json{{"id", "f" + std::to_string(i)}}.dump(),
                  {{"Authorization", "Bearer nope"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401);
  }
  auto other = Post("/inbox/signed", R"({"n":1})");  // another source logs on its own
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);
  auto refused = logs.WithMessage("A webhook was refused.");
  ASSERT_EQ(refused.size(), 2u);
  EXPECT_EQ(refused[0].value("source", ""), "bearer");
  EXPECT_FALSE(refused[0].contains("suppressed"));
  EXPECT_EQ(refused[1].value("source", ""), "signed");

  steady_ += std::chrono::seconds(1);
  auto next = Post("/inbox/bearer", R"({"id":"f20"})", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 401);
  refused = logs.WithMessage("A webhook was refused.");
  ASSERT_EQ(refused.size(), 3u);
  EXPECT_EQ(refused[2].value("source", ""), "bearer");
  EXPECT_EQ(refused[2].value("suppressed", ""), "19");
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="auth_failed"} 22)"));
  EXPECT_EQ(Rows(), 0);
}

TEST_P(WebhookSourceTest, OversizedDeclaredAndChunkedAre413) {
  const std::string big = R"({"id":"big","pad":")" + std::string(5000, 'x') + R"("})";
  auto declared = Post("/inbox/stripe", big);
  ASSERT_TRUE(declared);
  EXPECT_EQ(declared->status, 413);
  EXPECT_EQ(declared->body, R"({"error":"Request body exceeds 4096 bytes"})");

  // Chunked: no Content-Length, counted while read.
  httplib::Client c = Data();
  size_t sent = 0;
  auto chunked = c.Post(
      "/inbox/stripe",
      [&](size_t, httplib::DataSink& sink) {
        if (sent >= big.size()) {
          sink.done();
          return true;
        }
        size_t n = std::min<size_t>(1000, big.size() - sent);
        sink.write(big.data() + sent, n);
        sent += n;
        return true;
      },
      "application/json");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 413);
  EXPECT_EQ(chunked->body, R"({"error":"Request body exceeds 4096 bytes"})");
  EXPECT_EQ(Rows(), 0);
  // Both are counted; an oversized declared length on a route that is no source is not.
  auto elsewhere = Post("/not-a-source", big);
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(elsewhere->status, 413);
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="body_too_large"} 2)"));

  // Other sources and routes are unaffected.
  auto after = Post("/inbox/stripe", R"({"id":"small"})");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 202);
}

TEST_P(WebhookSourceTest, RateLimitIs429WithRetryAfterAndOtherSourcesGoOn) {
  for (int i = 0; i < 2; ++i) {
    auto r = Post("/inbox/limited", json{{"id", "l" + std::to_string(i)}}.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 202);
  }
  steady_ += std::chrono::seconds(20);
  auto limited = Post("/inbox/limited", R"({"id":"l2"})");
  ASSERT_TRUE(limited);
  EXPECT_EQ(limited->status, 429);
  EXPECT_EQ(limited->get_header_value("Retry-After"), "40");
  EXPECT_EQ(limited->body, "");
  EXPECT_THAT(Exposition(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="rate_limited"} 1)"));
  auto other = Post("/inbox/stripe", R"({"id":"s1"})");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 202);
  steady_ += std::chrono::seconds(40);
  auto refilled = Post("/inbox/limited", R"({"id":"l2"})");
  ASSERT_TRUE(refilled);
  EXPECT_EQ(refilled->status, 202);
  EXPECT_EQ(Rows("source = 'limited'"), 3);
}

TEST_P(WebhookSourceTest, HeaderFilterAnswers202FilteredWithoutARow) {
  auto dropped = Post("/inbox/prod", R"({"id":"p1"})", {{"X-Env", "staging"}});
  ASSERT_TRUE(dropped);
  EXPECT_EQ(dropped->status, 202);
  EXPECT_EQ(dropped->body, R"({"status":"filtered"})");
  auto kept = Post("/inbox/prod", R"({"id":"p1"})", {{"X-Env", "prod"}});
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->status, 202);
  EXPECT_THAT(kept->body, HasSubstr("messageId"));
  EXPECT_EQ(Rows(), 1);
  EXPECT_THAT(Exposition(), HasSubstr(R"(queuebox_inbox_filtered_total{source="prod"} 1)"));
}

TEST_P(WebhookSourceTest, DrainingAnswers503) {
  server_->StartDraining();
  auto r = Post("/inbox/stripe", R"({"id":"late"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->body, R"({"error":"QueueBox is shutting down"})");
  EXPECT_EQ(Rows(), 0);
}

// initialDelay holds the row: scheduled_at is an hour after its receipt, on the database clock.
TEST_P(WebhookSourceTest, InitialDelaySchedulesTheRowLater) {
  auto r = Post("/inbox/delayed", R"({"id":"later"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 202);
  auto now = Post("/inbox/stripe", R"({"id":"now"})");
  ASSERT_TRUE(now);
  EXPECT_EQ(now->status, 202);
  EXPECT_EQ(Rows("source = 'delayed' AND scheduled_at > created_at"), 1);
  EXPECT_EQ(Rows("source = 'stripe' AND scheduled_at > created_at"), 0);
}

// Publish time (QueueBox reference §11.5): scheduled_at = min(publish time, receipt) + the delay;
// the header first, then the path; epoch seconds, epoch millis or ISO-8601; a future publish time
// gives the receipt; one that is not a time is ignored (receipt + delay).
TEST_P(WebhookSourceTest, PublishTimeFromHeaderOrPathSchedulesBeforeReceipt) {
  auto post = [&](const std::string& id, const std::string& body, httplib::Headers h = {}) {
    auto r = Post("/inbox/published", body, std::move(h));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 202) << id << ": " << r->body;
  };
  post("secs", R"({"id":"secs"})", {{"X-Published-At", "1000000000"}});
  post("millis", R"({"id":"millis"})", {{"X-Published-At", "1000000000000"}});
  post("path", R"({"id":"path","created":"2001-09-09T01:46:40Z"})");
  post("future", R"({"id":"future"})", {{"X-Published-At", "4102444800"}});  // 2100
  post("garbage", R"({"id":"garbage"})", {{"X-Published-At", "yesterday"}});
  // 2001 + 10 s is long before the receipt; the others are held 10 s past it.
  EXPECT_EQ(Rows("source = 'published' AND scheduled_at < created_at AND idempotency_key IN "
                 "('secs', 'millis', 'path')"),
            3);
  EXPECT_EQ(Rows("source = 'published' AND scheduled_at > created_at AND idempotency_key IN "
                 "('future', 'garbage')"),
            2);
}

// Slow-loris senders (headers never finished, a body trickling in) hold only their own
// connections: other requests are answered meanwhile.
TEST_P(WebhookSourceTest, SlowClientsDoNotBlockOthers) {
  std::vector<int> slow;
  for (int i = 0; i < 8; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->data_port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string partial = i % 2 == 0 ? "POST /inbox/stripe HTTP/1.1\r\nHost: x\r\n"
                                           : "POST /inbox/stripe HTTP/1.1\r\nHost: x\r\n"
                                             "Content-Length: 100\r\n\r\n{\"id\":";
    ASSERT_EQ(send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
    slow.push_back(fd);
  }
  for (int i = 0; i < 20; ++i) {
    auto r = Post("/inbox/stripe", json{{"id", "fast" + std::to_string(i)}}.dump());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 202);
  }
  for (int fd : slow) close(fd);
  EXPECT_EQ(Rows(), 20);
}

TEST_P(WebhookSourceTest, UnknownSourcePathIs404) {
  auto r = Post("/inbox/nope", R"({"id":"x"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
}

// WebhookSources::Serve, the route's processing without a server (the webhook_request fuzz
// target), against the real store: the answers the route gives, and false where the router
// answers (another method, another path).
TEST_P(WebhookSourceTest, ServeWithoutAServerAnswersAsTheRoute) {
  auto serve = [this](const std::string& method, const std::string& path, const std::string& body,
                      httplib::Headers headers, httplib::Response& res) {
    httplib::Request req;
    req.method = method;
    req.path = path;
    req.headers = std::move(headers);
    return sources_->Serve(
        req,
        [&body](const std::function<bool(const char*, size_t)>& receive) {
          // In two chunks, as a chunked body arrives.
          const size_t half = body.size() / 2;
          return receive(body.data(), half) && receive(body.data() + half, body.size() - half);
        },
        res);
  };
  const std::string body = R"({"id":"b_1"})";
  httplib::Response first, second, wrong, large, get, elsewhere;
  ASSERT_TRUE(serve("POST", "/inbox/bearer", body, {{"Authorization", "Bearer t0ken"}}, first));
  EXPECT_EQ(first.status, 202);
  json answer = json::parse(first.body);
  ASSERT_TRUE(answer.contains("messageId")) << first.body;
  EXPECT_FALSE(first.get_header_value("X-Correlation-Id").empty());
  ASSERT_TRUE(serve("POST", "/inbox/bearer", body, {{"Authorization", "Bearer t0ken"}}, second));
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.body, R"({"status":"duplicate"})");
  ASSERT_TRUE(
      serve("POST", "/inbox/bearer", R"({"id":"b_2"})", {{"Authorization", "Bearer nope"}}, wrong));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_EQ(wrong.body, R"({"error":"Invalid bearer token"})");
  ASSERT_TRUE(serve("POST", "/inbox/stripe", std::string(5000, ' '), {}, large));
  EXPECT_EQ(large.status, 413);
  EXPECT_EQ(large.body, R"({"error":"Request body exceeds 4096 bytes"})");
  EXPECT_EQ(large.get_header_value("Connection"), "close");
  EXPECT_FALSE(serve("GET", "/inbox/stripe", "", {}, get));
  EXPECT_FALSE(serve("POST", "/inbox/nope", body, {}, elsewhere));
  auto rows = db_->Query("SELECT id, source, idempotency_key FROM inbox");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{answer["messageId"], "bearer", "b_1"}));
}

// Found by the webhook_request fuzz target: a header value with a NUL (cpp-httplib 0.11 keeps
// raw NUL bytes and decodes %00 in header values) was read up to the NUL (get_header_value gives
// a C string): the key of X-Delivery-Id "d-1\0a" (then a second X-Delivery-Id, which is the one
// stored with the row's headers) was stored as "d-1", so "d-1\0b" would be its duplicate; a
// valid signature followed by a NUL and junk passed. The value is read whole.
TEST_P(WebhookSourceTest, AHeaderValueWithANulIsReadWhole) {
  const std::string body = R"({"event":"ping"})";
  const std::string ts = std::to_string(kNowMs);
  auto serve = [this, &body](httplib::Headers headers) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/inbox/signed";
    req.headers = std::move(headers);
    httplib::Response res;
    EXPECT_TRUE(sources_->Serve(
        req,
        [&body](const std::function<bool(const char*, size_t)>& receive) {
          return receive(body.data(), body.size());
        },
        res));
    return res;
  };
  httplib::Response nul_key = serve({{"X-Delivery-Id", std::string("d-1\0a", 5)},
                                     {"X-Delivery-Id", "d-9"},
                                     {"X-Timestamp", ts},
                                     {"X-Signature", Sign(ts, body)}});
  EXPECT_EQ(nul_key.status, 400) << nul_key.body;
  httplib::Response junk_signature =
      serve({{"X-Delivery-Id", "d-2"},
             {"X-Timestamp", ts},
             {"X-Signature", Sign(ts, body) + std::string("\0junk", 5)}});
  EXPECT_EQ(junk_signature.status, 401);
  EXPECT_EQ(junk_signature.body, R"({"error":"Invalid signature"})");
  EXPECT_EQ(Rows(), 0);
}

INSTANTIATE_TEST_SUITE_P(Dialects, WebhookSourceTest,
                         ::testing::Values(std::string("sqlite"), std::string("postgresql")),
                         DialectName);

// The database goes away while requests arrive: 500 {"error":"Storage failed"}, nothing written;
// once it is back the same message is stored as new (not a duplicate).
TEST(WebhookSourceOutageTest, DatabaseAwayIs500AndNothingHalfWritten) {
  std::string pg_url;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", pg_url);
  testing::StoreDb db("postgresql");
  db.Create(pg_url);
  // The store reaches PostgreSQL through a forwarder the test can cut.
  const std::string direct = db.config().url;
  const size_t colon = direct.rfind(':', direct.rfind('/'));
  const int pg_port = std::stoi(direct.substr(colon + 1));
  const int port = testing::UnusedLoopbackPort();
  auto forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);
  ASSERT_TRUE(forwarder->Start().ok());
  db.config().url =
      direct.substr(0, colon + 1) + std::to_string(port) + direct.substr(direct.find('/', colon));
  db.config().pool_size = 2;
  std::unique_ptr<OutboxStore> store = db.Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate(std::nullopt).ok());

  Config config = LoadSources(direct);
  config.server.http_port = 0;
  config.server.address = "127.0.0.1";
  queuebox::Metrics metrics;
  auto created = sources::WebhookSources::Create(config, store->inbox(), &metrics);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<sources::WebhookSources> webhooks = std::move(created).value();
  AdminServerDeps deps;
  deps.store = store.get();
  deps.extra_data_routes = [w = webhooks.get()](httplib::Server& s) { w->Register(s); };
  auto server = AdminServer::Create(config, deps);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());
  httplib::Client c("127.0.0.1", (*server)->data_port());
  c.set_read_timeout(60);

  auto before = c.Post("/inbox/stripe", R"({"id":"o1"})", "application/json");
  ASSERT_TRUE(before);
  EXPECT_EQ(before->status, 202);

  forwarder.reset();  // every connection to the database is cut; new ones are refused
  auto away = c.Post("/inbox/stripe", R"({"id":"o2"})", "application/json");
  ASSERT_TRUE(away);
  EXPECT_EQ(away->status, 500);
  EXPECT_EQ(away->body, R"({"error":"Storage failed"})");
  EXPECT_THAT(metrics.Render(),
              HasSubstr(R"(queuebox_inbox_rejections_total{reason="storage_failed"} 1)"));
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM inbox WHERE idempotency_key = 'o2'"), "0");

  forwarder = std::make_unique<testing::TcpForwarder>(port, pg_port);  // the database is back
  ASSERT_TRUE(forwarder->Start().ok());
  int status = 0;
  // The pool reconnects on a later call; the sender retries as webhook senders do on 500.
  for (int i = 0; i < 20 && status != 202; ++i) {
    auto again = c.Post("/inbox/stripe", R"({"id":"o2"})", "application/json");
    ASSERT_TRUE(again);
    status = again->status;
    if (status != 202) {
      EXPECT_EQ(status, 500);
    }
  }
  EXPECT_EQ(status, 202);
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM inbox"), "2");
  (*server)->Stop(std::chrono::milliseconds(0));
  webhooks->Stop();
}

// docs/guarantees.md §25: the answer waits for the commit. The private server's commits wait for
// a synchronous standby that never comes, so the row is written but not committed; a 202 sent
// before the commit would arrive now. Once commits go through the 202 arrives and the row is
// there for every reader.
TEST(WebhookSourceOutageTest, NoAnswerIsSentBeforeTheRowCommits) {
  std::string shared;
  QB_REQUIRE_SERVER_ENV("QB_TEST_PG_URL", shared);  // the private server needs the same setup
  testing::PrivatePostgres pg;
  ASSERT_TRUE(pg.Init().ok());
  testing::StoreDb db("postgresql");
  db.Create(pg.url());
  // The private server runs with synchronous_commit off; the store's sessions wait for commits.
  db.Exec(
      "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on', "
      "current_database()); END $$");
  std::unique_ptr<OutboxStore> store = db.Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Migrate(std::nullopt).ok());
  Config config = LoadSources(db.config().url);
  config.server.http_port = 0;
  config.server.address = "127.0.0.1";
  queuebox::Metrics metrics;
  auto created = sources::WebhookSources::Create(config, store->inbox(), &metrics);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<sources::WebhookSources> webhooks = std::move(created).value();
  AdminServerDeps deps;
  deps.store = store.get();
  deps.extra_data_routes = [w = webhooks.get()](httplib::Server& s) { w->Register(s); };
  auto server = AdminServer::Create(config, deps);
  ASSERT_TRUE(server.ok());
  ASSERT_TRUE((*server)->Start().ok());

  db.Exec("ALTER SYSTEM SET synchronous_standby_names = 'nobody'");
  ASSERT_EQ(db.Scalar("SELECT pg_reload_conf()"), "t");
  // The reload is asynchronous: post only once the postmaster has read the file (and so has
  // signalled the store's sessions), or the commit may go through before it.
  for (int i = 0; i < 1000 && db.Scalar("SHOW synchronous_standby_names") != "nobody"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll
  }
  ASSERT_EQ(db.Scalar("SHOW synchronous_standby_names"), "nobody");
  std::future<int> answer = std::async(std::launch::async, [&] {
    httplib::Client c("127.0.0.1", (*server)->data_port());
    c.set_read_timeout(60);
    auto r = c.Post("/inbox/stripe", R"({"id":"held"})", "application/json");
    return r ? r->status : -1;
  });
  // The insert has run and its commit waits for the standby.
  // Commits go through again however the test ends (before `answer` waits for its request).
  struct CommitsAgain {
    testing::StoreDb& db;
    ~CommitsAgain() {
      db.Exec("ALTER SYSTEM RESET synchronous_standby_names");
      db.Scalar("SELECT pg_reload_conf()");
    }
  } commits_again{db};
  bool waiting = false;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
       !waiting && std::chrono::steady_clock::now() < deadline;) {
    waiting =
        db.Scalar("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") != "0";
    if (!waiting) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // poll
  }
  ASSERT_TRUE(waiting) << "the insert's commit never waited";
  EXPECT_EQ(answer.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "an answer came before the commit";
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM inbox"), "0");
  db.Exec("ALTER SYSTEM RESET synchronous_standby_names");
  ASSERT_EQ(db.Scalar("SELECT pg_reload_conf()"), "t");
  EXPECT_EQ(answer.get(), 202);
  EXPECT_EQ(db.Scalar("SELECT COUNT(*) FROM inbox WHERE idempotency_key = 'held'"), "1");
  (*server)->Stop(std::chrono::milliseconds(0));
  webhooks->Stop();
}

}  // namespace
}  // namespace queuebox
