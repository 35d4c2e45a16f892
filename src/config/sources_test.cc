// sources.<name> and inbox.*: the start-up checks of QueueBox reference §11.4 and what this build
// refuses by name (broker kinds, source transforms).
#include "config/sources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config/config_test_util.h"

namespace queuebox {
namespace {

using ::testing::HasSubstr;
using Env = std::map<std::string, std::string>;

constexpr char kDatabase[] = "database:\n  url: /tmp/queuebox-test.db\n";

class SourcesConfigTest : public testing::ConfigFileTest {
 protected:
  std::string Error(const std::string& yaml, Env env = {}) {
    Result<Config> c = Load(std::string(kDatabase) + yaml, std::move(env));
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(SourcesConfigTest, HttpSourceBindsWithDefaults) {
  Result<Config> c = Load(std::string(kDatabase) + R"(
inbox:
  basePath: /hooks
sources:
  stripe:
    path: /stripe
    idempotencyKeyPath: $.id
    eventTypePath: [$.type, $.kind]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->inbox.base_path, "/hooks");
  EXPECT_EQ(c->inbox.max_body_bytes, 1048576);
  ASSERT_EQ(c->sources.count("stripe"), 1u);
  EXPECT_EQ(c->sources.at("stripe").type, "http");
  auto s = cfg::BindHttpSource(c->sources.at("stripe"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->path, "/stripe");
  EXPECT_EQ(s->topic, "{{ eventType }}");
  EXPECT_EQ(s->idempotency_key_path, std::vector<std::string>{"$.id"});
  EXPECT_EQ(s->keys.event_type_path, (std::vector<std::string>{"$.type", "$.kind"}));
  EXPECT_EQ(s->keys.consumption, "push");
}

TEST_F(SourcesConfigTest, BrokerKindsAreRefusedByName) {
  EXPECT_THAT(Error("sources:\n  orders:\n    type: kafka\n    topics: [orders]\n"),
              HasSubstr("sources.orders.type: kafka sources are not in this build yet (only http "
                        "sources are); remove sources.orders or run it with QueueBox"));
}

TEST_F(SourcesConfigTest, TransformsAndExpressionsAreRefused) {
  std::string e = Error(R"(
sources:
  stripe:
    path: /stripe
    idempotencyKeyExpression: id
    transform:
      expression: $
)");
  EXPECT_THAT(e, HasSubstr("sources.stripe.idempotencyKeyExpression: not supported on sources in "
                           "this build yet; JSONata transforms run on routes and destinations "
                           "only"));
  EXPECT_THAT(e, HasSubstr("sources.stripe.transform: not supported on sources"));
}

TEST_F(SourcesConfigTest, StartUpChecks) {
  std::string e = Error(R"(
sources:
  a:
    path: stripe
    idempotencyKeyPath: $..id
  b:
    path: /b
    idempotencyKeyPath: $.id
    eventTypePath: $.type
  c:
    path: /c
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    idempotencyKeyHeader: Authorization
  d:
    path: /b
    idempotencyKeyPath: $.id
    eventTypePath: $.type
  e:
    path: /e
    eventTypePath: $.type
)");
  EXPECT_THAT(e, HasSubstr("sources.a.path: must start with /"));
  EXPECT_THAT(e, HasSubstr("sources.a.idempotencyKeyPath: $..id is not a definite JSONPath"));
  EXPECT_THAT(e, HasSubstr("sources.e.idempotencyKeyPath: required for an http source"));
  EXPECT_THAT(e, HasSubstr("sources.d.path: POST /inbox/b is already the route of source b"));
  EXPECT_THAT(e, HasSubstr("sources.c.idempotencyKeyHeader: Authorization carries a credential"));
}

TEST_F(SourcesConfigTest, BasePathShape) {
  EXPECT_THAT(Error("inbox:\n  basePath: inbox/\n"),
              HasSubstr("inbox.basePath: must start with / and not end with /"));
}

}  // namespace
}  // namespace queuebox
