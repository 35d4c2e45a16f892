// KafkaHeaderStrings against librdkafka's own header lists (no cluster).
#include <gtest/gtest.h>
#include <librdkafka/rdkafka.h>

#include <string>
#include <utility>
#include <vector>

#include "sources/kafka/kafka_source.h"

namespace queuebox::sources {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs KafkaReadBack(const Pairs& headers) {
  rd_kafka_headers_t* h = rd_kafka_headers_new(headers.size());
  for (const auto& [name, value] : headers) {
    rd_kafka_header_add(h, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                        static_cast<ssize_t>(value.size()));
  }
  Pairs read = KafkaHeaderStrings(h);
  rd_kafka_headers_destroy(h);
  return read;
}

// Names follow the text rules of AMQP header names (AmqpHeaderStrings): UTF-8 as it is, other
// bytes as "base64:". librdkafka hands a name up to its first NUL.
TEST(KafkaHeaderStrings, NamesThatAreNotUtf8AreBase64LikeValues) {
  Pairs read = KafkaReadBack({{"x-tenant", "ü"},
                              {std::string("\xff\xfe", 2), "v"},
                              {"k", std::string("a\0b", 3)},
                              {std::string("n\0ul", 4), "w"}});
  EXPECT_EQ(read,
            (Pairs{{"x-tenant", "ü"}, {"base64://4=", "v"}, {"k", "base64:YQBi"}, {"n", "w"}}));
}

}  // namespace
}  // namespace queuebox::sources
