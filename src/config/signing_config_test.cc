// destinations.<name>.signing and .rateLimit (issue 36): every problem listed with its path, and
// no secret in a message or in the masked printout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"
#include "config/load.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSigningDatabase[] = "database:\n  url: /tmp/queuebox-test.db\n";

class SigningConfigTest : public testing::ConfigFileTest {};

TEST_F(SigningConfigTest, EveryProblemOfASigningBlockIsListedByPathWithoutTheSecret) {
  Result<Config> c = Load(std::string(kSigningDatabase) + R"(
destinations:
  a:
    type: http
    baseUrl: http://127.0.0.1:1
    signing: {type: standard-webhooks, secret: whsec_c2hvcnQ=, previousSecrets: [not-base64!]}
  b:
    type: http
    baseUrl: http://127.0.0.1:1
    signing: {type: hmac, secret: gh-secret-1, algorithm: md5}
  d:
    type: http
    baseUrl: http://127.0.0.1:1
    signing: {type: hmac, secret: gh-secret-1, headerName: 'X Sig'}
  c:
    type: http
    baseUrl: http://127.0.0.1:1
    signing: {type: ed25519, secret: x}
)");
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_THAT(m, HasSubstr("destinations.a.signing.secret: must be whsec_"));
  EXPECT_THAT(m, HasSubstr("destinations.a.signing.previousSecrets[0]: must be whsec_"));
  EXPECT_THAT(m, HasSubstr("destinations.d.signing.headerName: must be a header name"));
  EXPECT_THAT(m, HasSubstr("destinations.b.signing.algorithm"));
  EXPECT_THAT(m, HasSubstr("destinations.c.signing.type"));
  for (const char* secret : {"c2hvcnQ", "not-base64", "gh-secret-1"}) {
    EXPECT_THAT(m, Not(HasSubstr(secret)));
  }
}

TEST_F(SigningConfigTest, AValidBlockBindsAndItsSecretsAreMasked) {
  Result<Config> c = Load(std::string(kSigningDatabase) + R"(
destinations:
  a:
    type: http
    baseUrl: http://127.0.0.1:1
    signing:
      type: standard-webhooks
      secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
      previousSecrets: [whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD1W0Jbk6tKvU=]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string printed = RenderMasked(*c);
  EXPECT_THAT(printed, HasSubstr("standard-webhooks"));
  EXPECT_THAT(printed, Not(HasSubstr("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")));
  EXPECT_THAT(printed, Not(HasSubstr("C2FVsBQIhrscChlQIMV")));
}

}  // namespace
}  // namespace queuebox

namespace queuebox {
namespace {

TEST_F(SigningConfigTest, RateLimitBindsAndItsRangesAreChecked) {
  Result<Config> c = Load(std::string(kSigningDatabase) + R"(
destinations:
  a: {type: http, baseUrl: 'http://127.0.0.1:1', rateLimit: {messagesPerSecond: 50, burst: 10}}
  b: {type: file, path: /tmp/qb-out.jsonl, rateLimit: {messagesPerSecond: 5}}
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->destinations.at("a").rate_limit, (RateLimitConfig{50, 10}));
  EXPECT_EQ(c->destinations.at("b").rate_limit, (RateLimitConfig{5, std::nullopt}));
  EXPECT_THAT(RenderMasked(*c), HasSubstr("messagesPerSecond: 50"));

  Result<Config> bad = Load(std::string(kSigningDatabase) + R"(
destinations:
  a: {type: http, baseUrl: 'http://127.0.0.1:1', rateLimit: {messagesPerSecond: 0}}
  b: {type: http, baseUrl: 'http://127.0.0.1:1', rateLimit: {burst: 3}}
)");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("destinations.a.rateLimit.messagesPerSecond"));
  EXPECT_THAT(bad.status().message(), HasSubstr("destinations.b.rateLimit.messagesPerSecond"));
}

}  // namespace
}  // namespace queuebox
