// Unit tests of RenderMasked and its masking helpers (QueueBox reference §10): no secret value
// ever appears in the printout.
#include "config/render.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/config_test_util.h"
#include "queuebox/config.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using RenderTest = testing::ConfigFileTest;

// Every value here is a secret and must not be printed.
const char* const kSecrets[] = {"db-pass-111", "url-pass-222", "token-333",     "auth-hdr-444",
                                "apikey-555",  "cookie-666",   "hmac-secret-7", "q-secret-888"};

TEST_F(RenderTest, NoSecretValueIsPrinted) {
  std::ofstream(dir_ / "pw") << "db-pass-111\n";
  Result<Config> c = Load(R"(
database:
  type: postgresql
  url: 'postgresql://app:url-pass-222@127.0.0.1:5432/app?sslmode=disable&password=q-secret-888'
  username: app
  password: file:)" + (dir_ / "pw").string() +
                          R"(
destinations:
  hook:
    type: http
    baseUrl: http://127.0.0.1:9000
    headers:
      Authorization: Bearer auth-hdr-444
      X-Api-Key: apikey-555
      Cookie: cookie-666
      X-Team: billing
admin:
  enabled: true
  auth: {type: bearer, token: token-333}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_EQ(c->database.password, "db-pass-111");
  std::string out = RenderMasked(*c);
  for (const char* secret : kSecrets) EXPECT_THAT(out, Not(HasSubstr(secret))) << out;
  EXPECT_THAT(out, HasSubstr("url: \"postgresql://***@127.0.0.1:5432/app?sslmode=disable&"
                             "password=***\""));
  EXPECT_THAT(out, HasSubstr("password: \"***\""));
  EXPECT_THAT(out, HasSubstr("token: \"***\""));
  EXPECT_THAT(out, HasSubstr("Authorization: \"***\""));
  EXPECT_THAT(out, HasSubstr("X-Api-Key: \"***\""));
  EXPECT_THAT(out, HasSubstr("X-Team: \"billing\""));  // not a credential header
  EXPECT_THAT(out, HasSubstr("username: \"app\""));
  EXPECT_THAT(out, HasSubstr("baseUrl: \"http://127.0.0.1:9000\""));

  Result<Config> h = Load(
      "database: {url: /tmp/x.db}\nadmin:\n  auth: {type: hmac, secret: "
      "hmac-secret-7}\n");
  ASSERT_TRUE(h.ok()) << h.status().message();
  std::string hmac = RenderMasked(*h);
  EXPECT_THAT(hmac, Not(HasSubstr("hmac-secret-7")));
  EXPECT_THAT(hmac, HasSubstr("secret: \"***\""));
}

TEST_F(RenderTest, SecretsInDestinationOptionsAreMaskedByName) {
  // Options a destination keeps as free-form blocks are masked by key name.
  Config c;
  DestinationConfig d;
  d.name = "x";
  d.type = "unknown-type";
  d.options = {{"auth", {{"clientSecret", "cs-1"}, {"password", "pw-2"}, {"scope", "read"}}},
               {"url", "amqp://guest:guest-3@127.0.0.1:5672/"}};
  c.destinations["x"] = d;
  std::string out = RenderMasked(c);
  EXPECT_THAT(out, Not(HasSubstr("cs-1")));
  EXPECT_THAT(out, Not(HasSubstr("pw-2")));
  EXPECT_THAT(out, Not(HasSubstr("guest-3")));
  EXPECT_THAT(out, HasSubstr("scope: \"read\""));
}

TEST_F(RenderTest, RenderedTextLoadsBackToTheSameConfiguration) {
  Result<Config> c = Load(R"(
server: {httpPort: 9000}
database: {url: /tmp/q.db}
outbox: {batchSize: 3}
destinations:
  a: {type: file, path: /tmp/a}
routes:
  - {topicPattern: "a.**", destination: a, routingKeyTemplate: "{{ key }}"}
retention: {enabled: true, outbox: {policy: AGE, maxAge: 36h}}
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  std::string first = RenderMasked(*c);
  EXPECT_THAT(first, HasSubstr("maxAge: \"36h\""));
  EXPECT_THAT(first, HasSubstr("routes:\n  - topicPattern: \"a.**\"\n    destination: \"a\"\n"));
  Result<Config> again = Load(first);
  ASSERT_TRUE(again.ok()) << again.status().message() << "\n" << first;
  EXPECT_EQ(RenderMasked(*again), first);
}

TEST(SecretNames, HeadersAndKeys) {
  for (const char* h : {"Authorization", "proxy-authorization", "COOKIE", "Set-Cookie", "X-Api-Key",
                        "x-apikey", "X-Auth-Token", "Client-Secret", "X-Password"}) {
    EXPECT_TRUE(cfg::IsSecretHeaderName(h)) << h;
  }
  for (const char* h : {"X-Team", "Content-Type", "X-Key-Id"}) {
    EXPECT_FALSE(cfg::IsSecretHeaderName(h)) << h;
  }
  for (const char* k :
       {"password", "saslPassword", "clientSecret", "token", "apiKey", "key", "private_key"}) {
    EXPECT_TRUE(cfg::IsSecretKeyName(k)) << k;
  }
  for (const char* k : {"baseUrl", "keyTemplate", "username", "headerName"}) {
    EXPECT_FALSE(cfg::IsSecretKeyName(k)) << k;
  }
}

}  // namespace
}  // namespace queuebox
