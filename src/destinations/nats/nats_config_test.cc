// Configuration errors of every nats key: the block validator and the factory
// (LoadConfig end to end: tests/integration/nats_destination_test.cc)
// (QueueBox reference §7.4, §7.5).
#ifdef QB_WITH_NATS
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "destinations/nats/nats_destination.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

nlohmann::json NatsBlock(nlohmann::json extra) {
  nlohmann::json b = {{"servers", "nats://127.0.0.1:4222"},
                      {"subject", "events"},
                      {"jetStream", true},
                      {"timeoutMs", 30000}};
  if (extra.is_object()) b.update(extra);
  return b;
}

TEST(NatsBlock, DefaultsAreValid) { EXPECT_THAT(ValidateNatsBlock(NatsBlock({})), IsEmpty()); }

TEST(NatsBlock, UsernameAndPasswordGoTogether) {
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"username", "u"}})),
              ElementsAre(HasSubstr("password: required when username is set")));
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"password", "p"}})),
              ElementsAre(HasSubstr("username: required when password is set")));
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"username", "u"}, {"password", "p"}})), IsEmpty());
}

TEST(NatsBlock, TokenExcludesUsername) {
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"token", "t"}, {"username", "u"}, {"password", "p"}})),
              ElementsAre(HasSubstr("token: use either token or username and password")));
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"token", "t"}})), IsEmpty());
}

TEST(NatsBlock, SubjectTemplateColumnAndServers) {
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"subject", "a.{{ b }}"}})),
              ElementsAre(HasSubstr("subject: unknown placeholder '{{ b }}'")));
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"subjectFrom", "headers"}})),
              ElementsAre(HasSubstr("subjectFrom: 'headers' is not a column")));
  EXPECT_THAT(ValidateNatsBlock(NatsBlock({{"servers", " , "}})),
              ElementsAre(HasSubstr("servers: needs at least one")));
}

TEST(NatsFactory, ErrorsNameTheDestinationAndKey) {
  NatsDestinationSettings s;
  s.name = "js";
  s.servers = "nats://127.0.0.1:4222";
  s.subject = "{{ nope }}";
  EXPECT_THAT(NatsDestination::Create(s).status().message(),
              HasSubstr("destinations.js.subject: unknown placeholder"));
  s.subject = "x";
  s.timeout_ms = 0;
  EXPECT_THAT(NatsDestination::Create(s).status().message(),
              HasSubstr("destinations.js.timeoutMs"));
}

// A static header NATS cannot carry stops the start (each row would otherwise go dead).
TEST(NatsFactory, StaticHeaderNamesAreCheckedAtTheStart) {
  NatsDestinationSettings s;
  s.name = "js";
  s.servers = "nats://127.0.0.1:4222";
  s.subject = "x";
  s.static_headers = {{"X-Team", "billing"}};
  EXPECT_TRUE(NatsDestination::Create(s).ok());
  s.static_headers = {{"X Team", "billing"}};
  EXPECT_EQ(NatsDestination::Create(s).status().message(),
            "destinations.js.headers: \"X Team\" (name): contains a space or a control "
            "character, which a header name cannot carry");
  s.static_headers = {{"x-message-id: spoof", "v"}};
  EXPECT_THAT(NatsDestination::Create(s).status().message(),
              HasSubstr("destinations.js.headers: \"x-message-id: spoof\" (name): contains ':'"));
  s.static_headers = {{"", "v"}};
  EXPECT_EQ(NatsDestination::Create(s).status().message(),
            "destinations.js.headers: a name is empty");
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_NATS
