// ClaimWindowState's rules on a fake clock: the same rules that
// tests/contract/store_postgres_claim_window_test.cc proves through PostgreSQL with real time.
#include "store/postgres/claim_window_state.h"

#include <gtest/gtest.h>

namespace queuebox::store {
namespace {

using NextClaim = ClaimWindowState::NextClaim;
using ClaimReport = ClaimWindowState::ClaimReport;

constexpr int64_t kSecond = 1000;
static_assert(ClaimWindowState::kReadFromBeginningEvery.count() == kSecond);
static_assert(ClaimWindowState::kSkipWindowAfterFallbackFor.count() == kSecond);
static_assert(ClaimWindowState::kWalkRestsAtMost.count() == kSecond);
static_assert(ClaimWindowState::kShareKeyCountTrustedFor.count() == kSecond);

class ClaimWindowStateTest : public ::testing::Test {
 protected:
  // Starts far from 0, as a steady clock does.
  int64_t now_ = 1'000'000;
  ClaimWindowState state_{[this] { return now_; }};

  // A claim that read the window, found rows and no walk ran.
  static ClaimReport WindowOnly(const std::string& first_row) {
    ClaimReport r;
    r.claimed_any = true;
    r.window_first_row = first_row;
    return r;
  }
  // A claim whose key walk ran and stopped after `last_key`.
  static ClaimReport Walked(const std::string& last_key, int64_t share_keys = -1,
                            int64_t window_keys = -1) {
    ClaimReport r;
    r.claimed_any = true;
    r.walk_last_key = last_key;
    r.walk_share_keys = share_keys;
    r.window_keys = window_keys;
    return r;
  }
  static ClaimReport Nothing() { return ClaimReport{}; }

  // Next(), then Claimed() with its result.
  NextClaim Claim(const ClaimReport& report) {
    NextClaim used = state_.Next();
    state_.Claimed(used, report);
    return used;
  }
};

TEST_F(ClaimWindowStateTest, AFirstClaimReadsTheWholeWindowAndMayWalkEveryKey) {
  NextClaim next = state_.Next();
  EXPECT_EQ(next.window_from_at, "-infinity");
  EXPECT_EQ(next.window_from_sequence, 0);
  EXPECT_TRUE(next.read_window);
  EXPECT_EQ(next.walk_after_key, "");
  EXPECT_TRUE(next.walk_allowed);
  EXPECT_EQ(next.share_key_count, -1);
}

// RowDueBeforeTheWindowStartIsStillClaimed: the window starts at the first row the previous
// window read, and from the beginning again once a second has passed.
TEST_F(ClaimWindowStateTest, TheWindowStartsWhereThePreviousWindowFoundItsFirstRow) {
  Claim(WindowOnly("2024-01-01T00:00:00.000001Z 42"));
  now_ += 10;
  NextClaim next = state_.Next();
  EXPECT_EQ(next.window_from_at, "2024-01-01T00:00:00.000001Z");
  EXPECT_EQ(next.window_from_sequence, 42);
}

TEST_F(ClaimWindowStateTest, TheWindowReadsFromTheBeginningOnceASecond) {
  Claim(WindowOnly("2024-01-01T00:00:00Z 42"));  // read from the beginning at t0
  now_ += kSecond - 1;
  EXPECT_EQ(state_.Next().window_from_sequence, 42);
  now_ += 1;
  NextClaim again = state_.Next();
  EXPECT_EQ(again.window_from_at, "-infinity");
  EXPECT_EQ(again.window_from_sequence, 0);
  // The position is kept: the claims after that one start there again.
  now_ += 1;
  EXPECT_EQ(state_.Next().window_from_sequence, 42);
}

TEST_F(ClaimWindowStateTest, AClaimThatDidNotReadTheWindowLeavesItsStart) {
  Claim(WindowOnly("2024-01-01T00:00:00Z 42"));
  Claim(Walked("k"));  // no window_first_row
  Claim(WindowOnly("not a position"));
  EXPECT_EQ(state_.Next().window_from_sequence, 42);
}

TEST_F(ClaimWindowStateTest, ReclaimedLeasesStartTheNextWindowFromTheBeginning) {
  Claim(WindowOnly("2024-01-01T00:00:00Z 42"));
  state_.LeasesReclaimed();
  EXPECT_EQ(state_.Next().window_from_at, "-infinity");
}

// FallbackVisitsEveryKeyRoundRobinBehindAHotKey: each walk resumes after the key where the
// previous one stopped.
TEST_F(ClaimWindowStateTest, TheKeyWalkResumesAfterTheLastKeyItVisited) {
  Claim(Walked("c"));
  EXPECT_EQ(state_.Next().walk_after_key, "c");
  now_ += 2 * kSecond;
  Claim(Walked("e"));
  EXPECT_EQ(state_.Next().walk_after_key, "e");
}

// AfterAFallbackTheWindowComesBackWhileClaimsContinue: claims skip the window for a second after
// a fallback, then read it again, even while each claim finds rows.
TEST_F(ClaimWindowStateTest, AfterAFallbackClaimsSkipTheWindowForASecond) {
  Claim(Walked("a"));  // read the window, came up short, walked
  now_ += 200;
  NextClaim skipped = Claim(Walked("k05"));
  EXPECT_FALSE(skipped.read_window);
  now_ += kSecond - 200 - 1;
  EXPECT_FALSE(Claim(Walked("k10")).read_window) << "a walk without the window is no fallback";
  now_ += 1;
  EXPECT_TRUE(state_.Next().read_window);
}

// WhileTheWindowHoldsEveryKeyTheWalkWaitsUpToASecond (first half): a walk whose window held a row
// of every key the walk saw was not needed, so it is no fallback.
TEST_F(ClaimWindowStateTest, AWalkWhoseWindowHeldEveryKeyIsNoFallback) {
  Claim(Walked("b", /*share_keys=*/2, /*window_keys=*/2));
  EXPECT_TRUE(state_.Next().read_window);
  Claim(Walked("b", /*share_keys=*/3, /*window_keys=*/2));
  EXPECT_FALSE(state_.Next().read_window);
}

// WhileTheWindowHoldsEveryKeyTheWalkWaitsUpToASecond (second half): the count of keys a complete
// walk saw is given to the claims of the next second only.
TEST_F(ClaimWindowStateTest, TheShareKeyCountIsTrustedForASecond) {
  Claim(Walked("b", /*share_keys=*/2, /*window_keys=*/1));
  EXPECT_EQ(state_.Next().share_key_count, 2);
  now_ += kSecond - 1;
  EXPECT_EQ(state_.Next().share_key_count, 2);
  now_ += 1;
  EXPECT_EQ(state_.Next().share_key_count, -1);
}

// AHeadScheduledAfterItsKeysLaterRowsIsClaimedOnceDue: a walk that saw a head not yet due reports
// -1, which replaces the count it had.
TEST_F(ClaimWindowStateTest, AWalkThatReportsNoCountDropsTheCount) {
  Claim(Walked("b", 2, 1));
  Claim(Walked("b", -1, 1));
  EXPECT_EQ(state_.Next().share_key_count, -1);
}

// ARetriedHeadIsClaimedByTheFirstClaimAfterItIsDue: after a retry the count is not trusted.
TEST_F(ClaimWindowStateTest, ARetryDropsTheShareKeyCount) {
  Claim(Walked("b", 2, 1));
  state_.RetryScheduled(100);
  EXPECT_EQ(state_.Next().share_key_count, -1);
}

// AfterAnEmptyClaimTheKeyWalkWaitsForAnOutcome.
TEST_F(ClaimWindowStateTest, AfterAnEmptyClaimTheWalkRestsUntilAnOutcome) {
  Claim(Nothing());
  NextClaim resting = state_.Next();
  EXPECT_FALSE(resting.walk_allowed);
  EXPECT_TRUE(resting.read_window);
  state_.OutcomeWritten();
  EXPECT_TRUE(state_.Next().walk_allowed);
}

// AfterAnEmptyClaimTheKeyWalkComesBackWithinASecond: the rest counts from the first empty claim.
TEST_F(ClaimWindowStateTest, TheWalkRestsAtMostASecondAfterTheFirstEmptyClaim) {
  Claim(Nothing());
  now_ += 600;
  EXPECT_FALSE(Claim(Nothing()).walk_allowed);
  now_ += kSecond - 600 - 1;
  EXPECT_FALSE(state_.Next().walk_allowed);
  now_ += 1;
  EXPECT_TRUE(state_.Next().walk_allowed);
  EXPECT_TRUE(state_.Next().walk_allowed) << "the rest ended";
}

// A resting walk never leaves the claim with neither path: the window is read even within a
// second of a fallback.
TEST_F(ClaimWindowStateTest, WhileTheWalkRestsTheWindowIsReadEvenAfterAFallback) {
  Claim(Walked("a"));
  NextClaim skipping = Claim(Nothing());
  EXPECT_FALSE(skipping.read_window);
  NextClaim resting = state_.Next();
  EXPECT_FALSE(resting.walk_allowed);
  EXPECT_TRUE(resting.read_window);
}

// ARetriedHeadBehindAFullWindowIsClaimedOnceDueAfterAnEmptyClaim: the rest ends when the earliest
// retry this store scheduled falls due.
TEST_F(ClaimWindowStateTest, TheWalksRestEndsWhenARetryFallsDue) {
  state_.RetryScheduled(500);
  state_.RetryScheduled(200);
  Claim(Nothing());
  now_ += 199;
  EXPECT_FALSE(state_.Next().walk_allowed);
  now_ += 1;
  EXPECT_TRUE(state_.Next().walk_allowed);
  // That retry is spent: a new rest lasts until an outcome or the second.
  Claim(Nothing());
  now_ += 400;
  EXPECT_FALSE(state_.Next().walk_allowed);
}

TEST_F(ClaimWindowStateTest, ARetryWithANegativeDelayIsDueAtOnce) {
  Claim(Nothing());
  state_.RetryScheduled(-5);
  EXPECT_TRUE(state_.Next().walk_allowed);
}

TEST_F(ClaimWindowStateTest, ANewShareForgetsTheOldSharesState) {
  Claim(WindowOnly("2024-01-01T00:00:00Z 42"));
  Claim(Walked("b", 2, 1));
  Claim(Nothing());
  state_.ShareChanged();
  NextClaim next = state_.Next();
  EXPECT_EQ(next.window_from_at, "-infinity");
  EXPECT_EQ(next.share_key_count, -1);
  EXPECT_TRUE(next.walk_allowed);
}

// Rule "rows committed behind": rows another transaction committed after this store's window
// moved past their position (the inbox relay's lanes) pull the start back to them, also past a
// claim that was in flight when they committed, until a claim begun after the commit read them.
TEST_F(ClaimWindowStateTest, RowsCommittedBehindTheStartPullItBackUntilAClaimAfterThemReadsThem) {
  Claim(WindowOnly("2024-01-01T00:00:05.000000Z 50"));
  now_ += 10;
  NextClaim in_flight = state_.Next();  // began before the commit
  EXPECT_EQ(in_flight.window_from_sequence, 50);
  state_.RowsCommitted("2024-01-01T00:00:04.000000Z 40");
  state_.RowsCommitted("2024-01-01T00:00:06.000000Z 60");  // ahead of the start: changes nothing
  state_.Claimed(in_flight, WindowOnly("2024-01-01T00:00:07.000000Z 70"));
  now_ += 10;
  NextClaim after = state_.Next();
  EXPECT_EQ(after.window_from_at, "2024-01-01T00:00:04.000000Z");
  EXPECT_EQ(after.window_from_sequence, 40);
  state_.Claimed(after, WindowOnly("2024-01-01T00:00:07.000000Z 70"));
  now_ += 10;
  NextClaim later = state_.Next();
  EXPECT_EQ(later.window_from_at, "2024-01-01T00:00:07.000000Z");
  EXPECT_EQ(later.window_from_sequence, 70);
}

}  // namespace
}  // namespace queuebox::store
