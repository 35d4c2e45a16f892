// NatsHeaderStrings against nats.c's own messages (no server).

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "sources/nats/nats_source.h"

namespace queuebox::sources {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// A message with `headers` set in order (natsMsgHeader_Set), read back by the source.
Pairs ReadBack(const Pairs& headers) {
  EXPECT_EQ(nats_Open(-1), NATS_OK);
  natsMsg* m = nullptr;
  EXPECT_EQ(natsMsg_Create(&m, "orders.created", nullptr, "{}", 2), NATS_OK);
  for (const auto& [name, value] : headers) {
    EXPECT_EQ(natsMsgHeader_Set(m, name.c_str(), value.c_str()), NATS_OK) << name;
  }
  Pairs read = NatsHeaderStrings(m);
  natsMsg_Destroy(m);
  std::sort(read.begin(), read.end());
  return read;
}

TEST(NatsHeaderStrings, OneValuePerNameTheLastAndNotUtf8AsBase64) {
  Pairs read = ReadBack({{"X-Trace", "a"}, {"x-trace", "b"}, {"X-Trace", "c"}, {"k", "ü"}});
  EXPECT_EQ(read, (Pairs{{"X-Trace", "c"}, {"k", "ü"}, {"x-trace", "b"}}));
}

// Found by the broker_headers fuzz target (seed fuzz/corpus/broker_headers/nats_prefix_lookup):
// nats.c 3.4.1 answers natsMsgHeader_Get/Values of "x-attempt" with the value of
// "x-attempth1" once its hash has grown and the two share a bucket, so a sender could choose what
// the source read for a header (Nats-Msg-Id, the key fallback, included). The source no longer
// looks names up (nats_headers.h).
TEST(NatsHeaderStrings, ANameThatPrefixesAnotherReadsItsOwnValue) {
  Pairs headers = {{"X-Static", "1"}, {"x-attempth1", "Q"}};
  for (const char* h : {"h2", "h3", "h4", "h5", "h6", "h7", "h35", "h36", "h37", "h38", "h39"}) {
    headers.emplace_back(h, h);
  }
  headers.insert(headers.end(), {{"x-message-id", "ID"},
                                 {"x-topic", "orders.created"},
                                 {"x-attempt", "4"},
                                 {"Nats-Msg-Id", "ID"}});
  Pairs read = ReadBack(headers);
  auto attempt =
      std::find_if(read.begin(), read.end(), [](const auto& h) { return h.first == "x-attempt"; });
  ASSERT_NE(attempt, read.end());
  EXPECT_EQ(attempt->second, "4");
}

}  // namespace
}  // namespace queuebox::sources
