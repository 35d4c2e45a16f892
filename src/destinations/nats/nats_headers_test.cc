// ParseNatsHeaderText, ReadNatsHeaders and FindNatsHeader (no server).
#include "destinations/nats/nats_headers.h"

#include <gtest/gtest.h>
#include <nats/nats.h>

#include <string>
#include <vector>

namespace queuebox {
namespace {

// The same message as its bytes came off the wire: an empty value is empty, and the header after
// it keeps its own (nats.c 3.4.1's parser reads "empty" as "next: v" and loses "next").
TEST(NatsHeaderText, AnEmptyValueIsEmptyAndTheNextHeaderStays) {
  std::vector<NatsHeader> read =
      ParseNatsHeaderText("NATS/1.0\r\nempty: \r\nnext: v\r\nbare:\r\nlast:  w \r\n\r\n");
  ASSERT_EQ(read.size(), 4U);
  EXPECT_EQ(read[0].name, "empty");
  EXPECT_EQ(read[0].values, std::vector<std::string>{""});
  EXPECT_EQ(read[1].name, "next");
  EXPECT_EQ(read[1].values, std::vector<std::string>{"v"});
  EXPECT_EQ(read[2].name, "bare");
  EXPECT_EQ(read[2].values, std::vector<std::string>{""});
  EXPECT_EQ(read[3].name, "last");
  EXPECT_EQ(read[3].values, std::vector<std::string>{"w"});
}

TEST(NatsHeaderText, NamesAreExactValuesInOrderAndContinuationsJoin) {
  std::vector<NatsHeader> read = ParseNatsHeaderText(
      "NATS/1.0\r\nx-attempth1: Q\r\nx-attempt: 4\r\nX-Attempt: 5\r\nx-attempt: 6\r\n"
      " more\r\nno colon\r\n: no name\r\n\r\nafter: end\r\n");
  ASSERT_EQ(read.size(), 3U);
  EXPECT_EQ(read[0].name, "x-attempth1");
  EXPECT_EQ(read[0].values, std::vector<std::string>{"Q"});
  EXPECT_EQ(read[1].name, "x-attempt");
  EXPECT_EQ(read[1].values, (std::vector<std::string>{"4", "6 more"}));
  EXPECT_EQ(read[2].name, "X-Attempt");
  EXPECT_EQ(FindNatsHeader(read, "x-attempt"), &read[1]);
  EXPECT_EQ(FindNatsHeader(read, "X-ATTEMPT"), &read[1]);  // another case: the first in order
  EXPECT_EQ(FindNatsHeader(read, "x-attempth"), nullptr);
}

// A message built in memory keeps an empty value too, and Nats-Msg-Id is found in any letter
// case when its exact name is absent.
TEST(NatsHeaders, AnEmptyValueOfABuiltMessageIsRead) {
  EXPECT_EQ(nats_Open(-1), NATS_OK);
  natsMsg* m = nullptr;
  ASSERT_EQ(natsMsg_Create(&m, "orders.created", nullptr, "{}", 2), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Set(m, "empty", ""), NATS_OK);
  ASSERT_EQ(natsMsgHeader_Set(m, "nats-msg-id", "ID"), NATS_OK);
  std::vector<NatsHeader> read = ReadNatsHeaders(m);
  natsMsg_Destroy(m);
  const NatsHeader* empty = FindNatsHeader(read, "empty");
  ASSERT_NE(empty, nullptr);
  EXPECT_EQ(empty->values, std::vector<std::string>{""});
  const NatsHeader* id = FindNatsHeader(read, "Nats-Msg-Id");
  ASSERT_NE(id, nullptr);
  EXPECT_EQ(id->values, std::vector<std::string>{"ID"});
}

}  // namespace
}  // namespace queuebox
