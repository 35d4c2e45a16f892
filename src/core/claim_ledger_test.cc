// The claim ledger (core/claim_ledger.h) against the in-memory store twin.
#include "core/claim_ledger.h"

#include <gtest/gtest.h>

#include "testing/fake_store.h"

namespace queuebox {
namespace {

using testing::FakeStore;

class ClaimLedgerTest : public ::testing::Test {
 protected:
  std::vector<OutboxRow> Claim(int n) {
    for (int i = 0; i < n; ++i) {
      NewOutboxRow row;
      row.topic = "t";
      row.payload = "{}";
      EXPECT_TRUE(store_.Insert(row).ok());
    }
    return store_.Claim(n, 30000).value();
  }
  // Another replica claims `row` (its lease passed, it was reclaimed and claimed again): the
  // row's claim token changes. Returns the row as the other replica holds it.
  OutboxRow Steal(const OutboxRow& row) {
    OutboxRow theirs = row;
    theirs.claim_token = row.claim_token + "-theirs";
    EXPECT_TRUE(
        store_.Update(row.id, [&](FakeStore::Row& r) { r.row.claim_token = theirs.claim_token; }));
    return theirs;
  }

  FakeStore store_;
  ClaimLedger ledger_;
};

TEST_F(ClaimLedgerTest, RenewsEveryHeldClaimInOneStatement) {
  std::vector<OutboxRow> rows = Claim(3);
  CancelFlags flags = ledger_.HoldForPublish(rows);
  const int64_t before = store_.statements();
  ClaimLedger::Renewal r = ledger_.Renew(store_, 90000);
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.renewed, 3u);
  EXPECT_EQ(r.lost, 0);
  EXPECT_EQ(store_.statements(), before + 1);
  for (const auto& row : rows) {
    EXPECT_GT(*store_.Get(row.id).lease_expires_at_ms, store_.NowMs() + 60000);
  }
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_FALSE(flags[i].load());
}

TEST_F(ClaimLedgerTest, NothingHeldMeansNoStatement) {
  const int64_t before = store_.statements();
  EXPECT_TRUE(ledger_.Renew(store_, 30000).status.ok());
  EXPECT_EQ(store_.statements(), before);
}

TEST_F(ClaimLedgerTest, AClaimTheRenewalMissesIsLostCancelledAndCountedOnce) {
  std::vector<OutboxRow> rows = Claim(2);
  CancelFlags flags = ledger_.HoldForPublish(rows);
  Steal(rows[0]);
  ClaimLedger::Renewal r = ledger_.Renew(store_, 30000);
  EXPECT_EQ(r.renewed, 1u);
  EXPECT_EQ(r.lost, 1);
  EXPECT_TRUE(flags[0].load());
  EXPECT_FALSE(flags[1].load());
  const OutboxRow* lost = &rows[0];
  EXPECT_EQ(ledger_.CountedLost(std::span<const OutboxRow* const>(&lost, 1)),
            std::vector<bool>{true});
  // A lost claim is not renewed again, nor counted again.
  r = ledger_.Renew(store_, 30000);
  EXPECT_EQ(r.renewed, 1u);
  EXPECT_EQ(r.lost, 0);
}

TEST_F(ClaimLedgerTest, AClaimWhoseWriteStartedIsLeftToTheFencedWrite) {
  std::vector<OutboxRow> rows = Claim(1);
  CancelFlags flags = ledger_.HoldForPublish(rows);
  ledger_.StartWriting(rows);
  Steal(rows[0]);
  ClaimLedger::Renewal r = ledger_.Renew(store_, 30000);
  EXPECT_EQ(r.lost, 0);
  EXPECT_FALSE(flags[0].load());
  const OutboxRow* row = &rows[0];
  EXPECT_EQ(ledger_.CountedLost(std::span<const OutboxRow* const>(&row, 1)),
            std::vector<bool>{false});
}

TEST_F(ClaimLedgerTest, RowsWrittenWithoutAPublishAreNeverJudgedByARenewal) {
  std::vector<OutboxRow> rows = Claim(1);
  ledger_.HoldForWrite(rows);
  Steal(rows[0]);
  EXPECT_EQ(ledger_.Renew(store_, 30000).lost, 0);
  EXPECT_EQ(ledger_.size(), 1u);
}

TEST_F(ClaimLedgerTest, ANewerClaimOfTheRowCancelsTheOlderOne) {
  std::vector<OutboxRow> rows = Claim(1);
  CancelFlags old_flags = ledger_.HoldForPublish(rows);
  std::vector<OutboxRow> again = {Steal(rows[0])};
  CancelFlags new_flags = ledger_.HoldForPublish(again);
  EXPECT_TRUE(old_flags[0].load());
  EXPECT_FALSE(new_flags[0].load());
  EXPECT_EQ(ledger_.size(), 1u);
  // The older claim's release leaves the newer one held.
  const OutboxRow* old_row = &rows[0];
  ledger_.Release(std::span<const OutboxRow* const>(&old_row, 1));
  EXPECT_EQ(ledger_.size(), 1u);
  const OutboxRow* new_row = &again[0];
  ledger_.Release(std::span<const OutboxRow* const>(&new_row, 1));
  EXPECT_EQ(ledger_.size(), 0u);
}

TEST_F(ClaimLedgerTest, AFailedRenewalReportsItsStatusAndLosesNothing) {
  std::vector<OutboxRow> rows = Claim(2);
  CancelFlags flags = ledger_.HoldForPublish(rows);
  store_.set_down(true);
  ClaimLedger::Renewal r = ledger_.Renew(store_, 30000);
  EXPECT_EQ(r.status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.lost, 0);
  EXPECT_FALSE(flags[0].load());
  EXPECT_FALSE(flags[1].load());
}

}  // namespace
}  // namespace queuebox
