// The `auth` block of the http destination (QueueBox reference §7.1; issue 13 item 6) against real
// HTTP servers on loopback: a receiver and a token endpoint. OAuth2 token expiry and refresh run
// on an injected clock (no sleeps); http.blockPrivateAddresses uses address literals (no DNS).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "destinations/http/http_auth.h"
#include "destinations/http/http_destination.h"
#include "testing/broker_testing.h"
#include "testing/http_receiver.h"
#include "testing/status_matchers.h"

namespace queuebox {
namespace {

using ::queuebox::testing::BatchOf;
using ::queuebox::testing::CollectingSink;
using ::queuebox::testing::HttpReceiver;
using ::queuebox::testing::ReceivedRequest;
using ::queuebox::testing::ReceiverResponse;
using ::queuebox::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

constexpr char kClientSecret[] = "cs-very-secret-1";

// "a=1&b=x%2By" -> {a: 1, b: x+y}
std::map<std::string, std::string> ParseForm(const std::string& body) {
  auto decode = [](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '+') {
        out += ' ';
      } else if (s[i] == '%' && i + 2 < s.size()) {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start < body.size()) {
    size_t amp = body.find('&', start);
    std::string pair =
        body.substr(start, amp == std::string::npos ? std::string::npos : amp - start);
    size_t eq = pair.find('=');
    out[decode(pair.substr(0, eq))] = eq == std::string::npos ? "" : decode(pair.substr(eq + 1));
    if (amp == std::string::npos) break;
    start = amp + 1;
  }
  return out;
}

ReceiverResponse TokenAnswer(const std::string& body) {
  return ReceiverResponse{.status = 200, .body = body, .content_type = "application/json"};
}

class HttpAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(api_.Start().ok());
    ASSERT_TRUE(auth_.Start().ok());
    // The token endpoint hands out tok-1, tok-2, ... valid for `expires_in_` (none when < 0).
    auth_.SetResponder([this](const ReceivedRequest&) {
      int n = ++tokens_issued_;
      std::string body =
          R"({"access_token":"tok-)" + std::to_string(n) + R"(","token_type":"Bearer")";
      if (int e = expires_in_.load(); e >= 0) body += R"(,"expires_in":)" + std::to_string(e);
      return TokenAnswer(body + "}");
    });
  }

  nlohmann::json OAuth2Block() const {
    return {{"clientId", "queuebox"},
            {"clientSecret", kClientSecret},
            {"tokenUrl", auth_.BaseUrl() + "/oauth/token"},
            {"scope", "api:write"},
            {"extraParams", {{"audience", "https://api.example.com"}}}};
  }

  std::unique_ptr<HttpDestination> Make(const std::string& type, nlohmann::json block,
                                        std::map<std::string, std::string> headers = {},
                                        OAuth2TokenCache* cache = nullptr) {
    HttpDestinationSettings s;
    s.name = "protected-api";
    s.base_url = api_.BaseUrl();
    s.path = "/events";
    s.timeout_ms = 10000;
    s.static_headers = std::move(headers);
    s.auth = DestinationAuthConfig{type, std::move(block)};
    s.token_cache = cache != nullptr ? cache : &cache_;
    Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    if (!d.ok()) return nullptr;
    EXPECT_TRUE((*d)->Start().ok());
    return std::move(d).value();
  }

  Outcome PublishOne(HttpDestination& d, std::string id, std::string row_headers = "{}") {
    std::vector<OutboxRow> rows = {::queuebox::testing::BrokerRow(
        std::move(id), "orders.created", std::nullopt, R"({"n":1})", std::move(row_headers))};
    std::vector<OutboundMessage> batch = BatchOf(rows);
    CollectingSink sink;
    d.PublishBatch(batch, sink);
    EXPECT_EQ(sink.outcomes().size(), 1u);
    return sink.at(0);
  }

  HttpReceiver api_{64};
  HttpReceiver auth_{64};
  std::atomic<int> tokens_issued_{0};
  // Read by the token endpoint's thread (the test's write reaches it over a socket, an ordering
  // ThreadSanitizer cannot see): atomic. Seconds; < 0: no expires_in.
  std::atomic<int> expires_in_{3600};
  Clock::time_point now_ = Clock::now();
  OAuth2TokenCache cache_{[this] { return now_; }};
};

TEST_F(HttpAuthTest, BasicSendsTheEncodedPair) {
  auto d = Make("basic", {{"username", "queuebox"}, {"password", "s3cret:pw"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(PublishOne(*d, "m1").kind, Outcome::Kind::kDelivered);
  ASSERT_EQ(api_.RequestCount(), 1u);
  EXPECT_EQ(api_.Requests()[0].Header("Authorization"), "Basic cXVldWVib3g6czNjcmV0OnB3");
  EXPECT_EQ(auth_.RequestCount(), 0u);
}

TEST_F(HttpAuthTest, HeaderReplacesAStaticHeaderAndARowHeaderWins) {
  // headerName defaults to Authorization; it replaces a static header of the same name.
  auto d = Make("header", {{"headerName", "Authorization"}, {"headerValue", "Bearer st-456"}},
                {{"authorization", "Bearer static-old"}, {"X-Team", "ops"}});
  ASSERT_TRUE(d);
  EXPECT_EQ(PublishOne(*d, "m1").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(PublishOne(*d, "m2", R"({"Authorization":"Bearer from-row"})").kind,
            Outcome::Kind::kDelivered);
  std::vector<ReceivedRequest> got = api_.Requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_THAT(got[0].HeaderValues("Authorization"), ::testing::ElementsAre("Bearer st-456"));
  EXPECT_EQ(got[0].Header("X-Team"), "ops");
  EXPECT_THAT(got[1].HeaderValues("Authorization"), ::testing::ElementsAre("Bearer from-row"));

  auto custom = Make("header", {{"headerName", "X-Api-Key"}, {"headerValue", "k-789"}});
  ASSERT_TRUE(custom);
  EXPECT_EQ(PublishOne(*custom, "m3").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(api_.Requests()[2].Header("X-Api-Key"), "k-789");
}

TEST_F(HttpAuthTest, Oauth2ClientCredentialsAndTheCachedToken) {
  auto d = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(d);
  EXPECT_EQ(PublishOne(*d, "m1").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(PublishOne(*d, "m2").kind, Outcome::Kind::kDelivered);
  ASSERT_EQ(auth_.RequestCount(), 1u);
  ReceivedRequest token = auth_.Requests()[0];
  EXPECT_EQ(token.method, "POST");
  EXPECT_EQ(token.target, "/oauth/token");
  EXPECT_EQ(token.Header("Content-Type"), "application/x-www-form-urlencoded");
  std::map<std::string, std::string> form = ParseForm(token.body);
  EXPECT_EQ(form["grant_type"], "client_credentials");
  EXPECT_EQ(form["client_id"], "queuebox");
  EXPECT_EQ(form["client_secret"], kClientSecret);
  EXPECT_EQ(form["scope"], "api:write");
  EXPECT_EQ(form["audience"], "https://api.example.com");
  std::vector<ReceivedRequest> got = api_.Requests();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].Header("Authorization"), "Bearer tok-1");
  EXPECT_EQ(got[1].Header("Authorization"), "Bearer tok-1");
}

TEST_F(HttpAuthTest, ATokenIsRefreshedWithinThirtySecondsOfItsExpiry) {
  auto d = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(d);
  EXPECT_EQ(PublishOne(*d, "m1").kind, Outcome::Kind::kDelivered);
  now_ += std::chrono::seconds(3600 - 31);  // 31 s left: still used
  EXPECT_EQ(PublishOne(*d, "m2").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(auth_.RequestCount(), 1u);
  now_ += std::chrono::seconds(2);  // 29 s left: refreshed
  EXPECT_EQ(PublishOne(*d, "m3").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(auth_.RequestCount(), 2u);
  std::vector<ReceivedRequest> got = api_.Requests();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].Header("Authorization"), "Bearer tok-1");
  EXPECT_EQ(got[2].Header("Authorization"), "Bearer tok-2");
}

TEST_F(HttpAuthTest, WithoutExpiresInATokenLivesAnHour) {
  expires_in_ = -1;
  auto d = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(d);
  EXPECT_EQ(PublishOne(*d, "m1").kind, Outcome::Kind::kDelivered);
  now_ += std::chrono::seconds(3569);
  EXPECT_EQ(PublishOne(*d, "m2").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(auth_.RequestCount(), 1u);
  now_ += std::chrono::seconds(2);
  EXPECT_EQ(PublishOne(*d, "m3").kind, Outcome::Kind::kDelivered);
  EXPECT_EQ(auth_.RequestCount(), 2u);
}

// Two destinations with the same clientId@tokenUrl and many threads at once: one token request.
TEST_F(HttpAuthTest, ConcurrentFirstUseAsksForOneToken) {
  auth_.SetResponder([this](const ReceivedRequest&) {
    ++tokens_issued_;
    ReceiverResponse r = TokenAnswer(R"({"access_token":"shared-tok","expires_in":600})");
    r.delay = std::chrono::milliseconds(300);  // keeps the first request open while others come
    return r;
  });
  auto a = Make("oauth2", OAuth2Block());
  auto b = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(a && b);
  std::vector<std::thread> threads;
  std::atomic<int> delivered{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      HttpDestination& d = i % 2 == 0 ? *a : *b;
      if (PublishOne(d, "m" + std::to_string(i)).kind == Outcome::Kind::kDelivered) ++delivered;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(delivered.load(), 8);
  EXPECT_EQ(auth_.RequestCount(), 1u);
  EXPECT_EQ(tokens_issued_.load(), 1);
  for (const ReceivedRequest& r : api_.Requests()) {
    EXPECT_EQ(r.Header("Authorization"), "Bearer shared-tok");
  }
}

// The receiver refuses a token with 401: a retry with the reason (no token in it), and the next
// attempt asks for a new token.
TEST_F(HttpAuthTest, A401DropsTheTokenAndTheRetryGetsANewOne) {
  api_.SetResponder([](const ReceivedRequest& r) {
    if (r.Header("Authorization") == "Bearer tok-1") {
      return ReceiverResponse{.status = 401,
                              .body = "token " + r.Header("Authorization") + " was revoked"};
    }
    return ReceiverResponse{.status = 204};
  });
  auto d = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(d);
  Outcome first = PublishOne(*d, "m1");
  EXPECT_EQ(first.kind, Outcome::Kind::kRetry);
  EXPECT_THAT(first.error, AllOf(HasSubstr("HTTP 401: Unauthorized"), Not(HasSubstr("tok-1"))));
  Outcome retry = PublishOne(*d, "m1");
  EXPECT_EQ(retry.kind, Outcome::Kind::kDelivered) << retry.error;
  EXPECT_EQ(auth_.RequestCount(), 2u);
  EXPECT_EQ(api_.Requests()[1].Header("Authorization"), "Bearer tok-2");
}

TEST_F(HttpAuthTest, ABadTokenEndpointIsARetryWithAClearReason) {
  const std::string endpoint =
      "OAuth2 token request to " + auth_.BaseUrl() + "/oauth/token failed: ";
  auto d = Make("oauth2", OAuth2Block());
  ASSERT_TRUE(d);
  // Each answer below is one token request; the receiver never sees a message.
  std::vector<std::pair<ReceiverResponse, std::string>> cases = {
      {ReceiverResponse{.status = 500,
                        .body = std::string("bad client_secret=") + kClientSecret + " sent"},
       endpoint + "HTTP 500"},
      {TokenAnswer("<html>login</html>"), endpoint + "the answer is not a JSON object"},
      {TokenAnswer(R"({"token":"x"})"), endpoint + "the answer has no access_token string"},
      {TokenAnswer(R"({"access_token":""})"), endpoint + "the answer has no access_token string"},
      {TokenAnswer(R"({"access_token":"t","expires_in":-5})"),
       endpoint + "the answer's expires_in is not a positive number of seconds"},
      {TokenAnswer(R"({"access_token":"t","expires_in":"soon"})"),
       endpoint + "the answer's expires_in is not a positive number of seconds"},
  };
  for (const auto& [answer, reason] : cases) {
    auth_.EnqueueResponse(answer);
    Outcome o = PublishOne(*d, "m1");
    EXPECT_EQ(o.kind, Outcome::Kind::kRetry);
    EXPECT_THAT(o.error, AllOf(HasSubstr(reason), Not(HasSubstr(kClientSecret))));
  }
  EXPECT_EQ(api_.RequestCount(), 0u);
  // A token endpoint that is down.
  auth_.Stop();
  Outcome down = PublishOne(*d, "m1");
  EXPECT_EQ(down.kind, Outcome::Kind::kRetry);
  EXPECT_THAT(down.error, HasSubstr(endpoint));
  EXPECT_EQ(api_.RequestCount(), 0u);
}

// http.blockPrivateAddresses: the start-up check of baseUrl and tokenUrl hosts (literals: no DNS,
// and no request is sent).
TEST(HttpBlockPrivateAddresses, PrivateHostsAreRefusedAtStart) {
  auto start = [](std::string base_url, std::optional<std::string> token_url, bool block) {
    HttpDestinationSettings s;
    s.name = "partner-api";
    s.base_url = std::move(base_url);
    s.block_private_addresses = block;
    if (token_url) {
      s.auth = DestinationAuthConfig{
          "oauth2", {{"clientId", "q"}, {"clientSecret", "s"}, {"tokenUrl", *token_url}}};
    }
    Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
    EXPECT_TRUE(d.ok()) << d.status().ToString();
    return d.ok() ? (*d)->Start() : d.status();
  };
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"http://127.0.0.1:9/", "127.0.0.1, a loopback address"},
      {"http://[::1]:9/", "::1, a loopback address"},
      {"http://[::ffff:127.0.0.1]:9/", "::ffff:127.0.0.1, a loopback address"},
      {"http://10.1.2.3/", "10.1.2.3, a site-local address"},
      {"http://172.20.0.1/", "172.20.0.1, a site-local address"},
      {"http://192.168.1.1/", "192.168.1.1, a site-local address"},
      {"http://169.254.169.254/", "169.254.169.254, a link-local address"},
      {"http://[fe80::1]/", "fe80::1, a link-local address"},
      {"http://[fd12::1]/", "fd12::1, a unique local address (fc00::/7)"},
      {"http://0.0.0.0/", "0.0.0.0, the any-local address"},
  };
  for (const auto& [url, kind] : refused) {
    EXPECT_THAT(start(url, std::nullopt, true),
                StatusIs(StatusCode::kPermissionDenied,
                         AllOf(HasSubstr("destinations.partner-api.baseUrl: host '"),
                               HasSubstr("resolves to " + kind),
                               HasSubstr("http.blockPrivateAddresses is true"))))
        << url;
    EXPECT_TRUE(start(url, std::nullopt, false).ok()) << url;
  }
  // Public addresses pass (documentation ranges; nothing is contacted at start).
  EXPECT_TRUE(start("https://203.0.113.10/", std::nullopt, true).ok());
  EXPECT_TRUE(start("https://172.32.0.1/", std::nullopt, true).ok());
  // The tokenUrl host is checked too.
  EXPECT_THAT(start("https://203.0.113.10/", "http://127.0.0.1:9/oauth/token", true),
              StatusIs(StatusCode::kPermissionDenied,
                       HasSubstr("destinations.partner-api.auth.tokenUrl: host '127.0.0.1'")));
  EXPECT_TRUE(start("https://203.0.113.10/", "http://127.0.0.1:9/oauth/token", false).ok());
}

}  // namespace
}  // namespace queuebox
