// Configuration errors of every rabbitmq key: the block validator and the factory
// (LoadConfig end to end: tests/integration/rabbitmq_destination_test.cc)
// (QueueBox reference §7.2, §7.5).
#ifdef QB_WITH_RABBITMQ
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "destinations/rabbitmq/rabbitmq_destination.h"

namespace queuebox {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

nlohmann::json RabbitmqBlock(nlohmann::json extra) {
  nlohmann::json b = {{"url", "amqp://guest:guest@127.0.0.1:5672/"},
                      {"exchange", "events"},
                      {"exchangeType", "topic"},
                      {"routingKeyTemplate", "{{ topic }}"},
                      {"deliveryMode", "persistent"}};
  if (extra.is_object()) b.update(extra);
  return b;
}

TEST(RabbitMqBlock, DefaultsAreValid) {
  EXPECT_THAT(ValidateRabbitMqBlock(RabbitmqBlock({})), IsEmpty());
}

TEST(RabbitMqBlock, UrlMustBeAnAmqpUriAndIsNotEchoed) {
  std::vector<std::string> p =
      ValidateRabbitMqBlock(RabbitmqBlock({{"url", "http://u:s3cret@host/"}}));
  ASSERT_THAT(p, ElementsAre(HasSubstr("url: not a valid AMQP URI")));
  EXPECT_THAT(p[0], Not(HasSubstr("s3cret")));
}

TEST(RabbitMqBlock, ExchangeTemplateAndColumn) {
  EXPECT_THAT(ValidateRabbitMqBlock(RabbitmqBlock({{"exchange", "{{ tenant }}.events"}})),
              ElementsAre(HasSubstr("exchange: unknown placeholder '{{ tenant }}'")));
  EXPECT_THAT(ValidateRabbitMqBlock(RabbitmqBlock({{"exchangeFrom", "aggregate-type"}})),
              ElementsAre(HasSubstr("exchangeFrom: 'aggregate-type' is not a column")));
  // Routing-key templates never stop the start (§7.6): unknown names render the default.
  EXPECT_THAT(ValidateRabbitMqBlock(RabbitmqBlock({{"routingKeyTemplate", "{{ region }}"}})),
              IsEmpty());
}

TEST(RabbitMqFactory, ErrorsNameTheDestinationAndKey) {
  RabbitMqDestinationSettings s;
  s.name = "bus";
  s.url = "amqp://127.0.0.1/";
  s.exchange = "{{ nope }}";
  EXPECT_THAT(RabbitMqDestination::Create(s).status().message(),
              HasSubstr("destinations.bus.exchange: unknown placeholder"));
  s.exchange = "x";
  s.exchange_type = "headers";
  EXPECT_THAT(RabbitMqDestination::Create(s).status().message(),
              HasSubstr("destinations.bus.exchangeType"));
  s.exchange_type = "fanout";
  s.exchange_from = "payload";
  EXPECT_THAT(RabbitMqDestination::Create(s).status().message(),
              HasSubstr("destinations.bus.exchangeFrom"));
}

}  // namespace
}  // namespace queuebox
#endif  // QB_WITH_RABBITMQ
