// StrictOrderBound: the claim's bound (and the window's latest start) from the readings of the
// sequence and its lock holders. Strict order on a real PostgreSQL:
// tests/contract/store_postgres_strict_order_test.cc.
#include "store/postgres/strict_order.h"

#include <gtest/gtest.h>

namespace queuebox::store {
namespace {

using Holders = std::vector<StrictOrderBound::Holder>;

// Holders that began at unknown times.
Holders Open(std::initializer_list<const char*> vxids) {
  Holders out;
  for (const char* v : vxids) out.push_back({v, "-infinity"});
  return out;
}

TEST(StrictOrderBoundTest, WithoutHoldersTheBoundIsTheLastValueRead) {
  StrictOrderBound b;
  EXPECT_EQ(b.Observe(10, {}).bound, 10);
  StrictOrderBound::Reading r = b.Observe(25, {});
  EXPECT_EQ(r.bound, 25);
  EXPECT_FALSE(r.window_from_at.has_value());
}

TEST(StrictOrderBoundTest, AHolderOfTheFirstReadingMayHoldAnyValueUntilItEnds) {
  StrictOrderBound b;
  EXPECT_EQ(b.Observe(10, Open({"3/7"})).bound, 0);
  EXPECT_EQ(b.Observe(20, Open({"3/7"})).bound, 0);
  EXPECT_EQ(b.Observe(30, {}).bound, 30);
}

TEST(StrictOrderBoundTest, ANewHolderTookItsValuesAfterThePreviousReading) {
  StrictOrderBound b;
  EXPECT_EQ(b.Observe(10, {}).bound, 10);
  // Not listed at the reading of 10: its values are above 10.
  EXPECT_EQ(b.Observe(14, Open({"4/1"})).bound, 10);
  // Its floor stays while it is open; a holder new at 14 has floor 14.
  EXPECT_EQ(b.Observe(20, Open({"4/1", "5/2"})).bound, 10);
  EXPECT_EQ(b.Observe(22, Open({"5/2"})).bound, 14);
  EXPECT_EQ(b.Observe(23, {}).bound, 23);
}

TEST(StrictOrderBoundTest, APreparedTransactionHoldsEveryValueBack) {
  StrictOrderBound b;
  EXPECT_EQ(b.Observe(10, {}).bound, 10);
  // Preparing gave it a new vxid: its values may lie below the last reading's.
  EXPECT_EQ(b.Observe(12, Open({"-1/734"})).bound, 0);
  EXPECT_EQ(b.Observe(13, {}).bound, 13);
}

TEST(StrictOrderBoundTest, AnEndedVxidSeenAgainIsANewTransaction) {
  StrictOrderBound b;
  EXPECT_EQ(b.Observe(10, Open({"3/7"})).bound, 0);
  EXPECT_EQ(b.Observe(12, {}).bound, 12);
  EXPECT_EQ(b.Observe(15, Open({"3/7"})).bound, 12);
}

// The window starts no later than the earliest holder's start, and once more after it ended (the
// claim after that reading is the first to see its rows).
TEST(StrictOrderBoundTest, TheWindowStartsNoLaterThanAHolderUntilTheClaimThatSeesItsRows) {
  StrictOrderBound b;
  const Holders two = {{"3/7", "2026-01-01T10:00:05.000000Z"},
                       {"4/1", "2026-01-01T10:00:01.000000Z"}};
  EXPECT_EQ(b.Observe(10, two).window_from_at, "2026-01-01T10:00:01.000000Z");
  const Holders one = {{"3/7", "2026-01-01T10:00:05.000000Z"}};
  EXPECT_EQ(b.Observe(11, one).window_from_at, "2026-01-01T10:00:01.000000Z");  // 4/1 ended
  EXPECT_EQ(b.Observe(12, one).window_from_at, "2026-01-01T10:00:05.000000Z");
  EXPECT_EQ(b.Observe(13, {}).window_from_at, "2026-01-01T10:00:05.000000Z");
  EXPECT_FALSE(b.Observe(14, {}).window_from_at.has_value());
  EXPECT_EQ(b.Observe(15, Open({"5/2"})).window_from_at, "-infinity");
}

}  // namespace
}  // namespace queuebox::store
