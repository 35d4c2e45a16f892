// claim_window_state.h: what the PostgreSQL claim remembers from one claim to the next.
//
// The claim statement (claim.sql, docs/claim.md) reads a window of due pending rows and, only
// when the window comes up short, walks the keys. Its inputs besides the batch and the key share
// come from here: where the window starts, whether to read it, where the key walk resumes,
// whether the walk may run, and how many keys of the share a recent walk saw. This class turns
// what earlier claims reported and what the store did since (an outcome written, a retry
// scheduled, leases reclaimed, a new key share) into those inputs.
//
// None of it decides which row may be claimed: the head check in the statement does, on the row
// itself. Stale state costs a claim time (a longer read, a later claim of a row), never order.
// Each rule below bounds that cost with its own period.
//
// It holds no connection and reads time only from the injected clock, so its rules are tested
// without a database or sleeps (claim_window_state_test.cc).
//
// Thread-safety: every method may be called from any thread (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "store/monotonic_clock.h"

namespace queuebox::store {

class ClaimWindowState {
 public:
  // Rule "window start": the window starts where the previous claim's window found its first
  // due pending row, because the rows before it are gone (their dead index entries cost every
  // claim that steps over them). Rows can become pending behind that position (a reclaimed
  // lease, a replay, a row committed late or inserted with a past scheduled_at), so the window
  // reads from the beginning at least this often.
  static constexpr std::chrono::milliseconds kReadFromBeginningEvery{1000};
  // Rule "fallback": after a claim whose window came up short and needed the key walk, the
  // window is mostly rows blocked behind a hot key's head; claims skip it for this long.
  static constexpr std::chrono::milliseconds kSkipWindowAfterFallbackFor{1000};
  // Rule "walk rest": after a claim that returned nothing, the key walk would visit the same busy
  // keys again; it rests until this store writes an outcome, a retry it scheduled falls due, the
  // share changes, or this long has passed.
  static constexpr std::chrono::milliseconds kWalkRestsAtMost{1000};
  // Rule "share key count": a walk that went round every key of the share reports how many it
  // saw; for this long a claim whose window holds rows of that many keys skips the walk.
  static constexpr std::chrono::milliseconds kShareKeyCountTrustedFor{1000};

  // The claim statement's inputs that come from earlier claims (claim.sql parameters).
  struct NextClaim {
    // Where the window starts in idx_outbox_pending_due: (scheduled_at, sequence).
    std::string window_from_at = "-infinity";  // timestamptz text
    int64_t window_from_sequence = 0;
    // False during kSkipWindowAfterFallbackFor after a fallback.
    bool read_window = true;
    // The key walk starts after this key and wraps around to it ("": from the first key), so
    // successive walks visit the keys round-robin.
    std::string walk_after_key;
    // False while the walk rests (kWalkRestsAtMost). Never false together with read_window: the
    // window still sees rows that became due or arrived at its front.
    bool walk_allowed = true;
    // Keys of this replica's share that the last complete walk saw, within
    // kShareKeyCountTrustedFor; -1 when unknown.
    int64_t share_key_count = -1;
    // RowsCommitted calls before this claim (so Claimed knows which rows its snapshot saw).
    uint64_t generation = 0;
  };

  // What one claim statement reported in its RETURNING columns (claim.sql).
  struct ClaimReport {
    // Rows came back. Without rows the statement reports nothing else.
    bool claimed_any = false;
    // "<scheduled_at> <sequence>" of the first due pending row of the share its window read;
    // nullopt when the window was not read.
    std::optional<std::string> window_first_row;
    // Set when the key walk ran: the key it stopped after.
    std::optional<std::string> walk_last_key;
    // When the walk ran: the keys of the share it saw if it went round every key with no head
    // pending but not yet due and no due unkeyed row waiting; else -1.
    int64_t walk_share_keys = -1;
    // When the walk ran: the keys among the window's rows; -1 when unknown.
    int64_t window_keys = -1;
  };

  // `now` returns monotonic milliseconds (SteadyNowMs in production, a fake clock in tests).
  explicit ClaimWindowState(MonotonicMs now = SteadyNowMs) : now_(std::move(now)) {}

  // The inputs for the next claim. Also applies the rules' periods: a call may start the window
  // from the beginning or end the walk's rest.
  NextClaim Next();

  // A claim ran with `used` (what Next returned) and reported `report`.
  void Claimed(const NextClaim& used, const ClaimReport& report);
  // This store wrote an outcome (sent, retry, dead) that changed rows: a key's next row may now
  // head its key, so the walk may run again.
  void OutcomeWritten();
  // This store scheduled a retry whose row falls due in about `delay_ms`. A retried head sorts
  // after its key's later rows, so behind a window full of them only the walk finds it: the
  // share key count is dropped, and the walk's rest ends when the row falls due.
  void RetryScheduled(int64_t delay_ms);
  // This store reclaimed expired leases: the reclaimed rows keep their due time, which may lie
  // before the window start, so the next window starts from the beginning.
  void LeasesReclaimed();
  // This replica's key share changed: the window starts from the beginning, the share key count
  // is dropped and the walk may run (the old share's state says nothing about the new one).
  void ShareChanged();
  // This process committed outbox rows whose first in (scheduled_at, sequence) order is
  // `first_row` ("<scheduled_at> <sequence>", the format of ClaimReport::window_first_row). They
  // may lie behind the window start: their sequence numbers were taken before those of rows
  // another transaction committed first (the inbox relay's lanes forward side by side). The
  // window starts no later than that row until a claim that began after this call read it.
  void RowsCommitted(const std::string& first_row);

 private:
  MonotonicMs now_;
  std::mutex mu_;
  std::string window_from_at_ = "-infinity";
  int64_t window_from_sequence_ = 0;
  std::optional<int64_t> read_from_beginning_at_;  // last time the window read from the start
  std::string walk_after_key_;
  std::optional<int64_t> fell_back_at_;
  bool walk_resting_ = false;  // the last claim came back empty and nothing has changed since
  int64_t walk_resting_since_ = 0;
  int64_t share_key_count_ = -1;
  std::optional<int64_t> share_key_count_at_;
  std::optional<int64_t> retry_due_at_;  // the earliest time a scheduled retry falls due
  uint64_t committed_generation_ = 0;    // RowsCommitted calls so far
  uint64_t behind_generation_ = 0;       // the call that set behind_
  std::optional<std::pair<std::string, int64_t>> behind_;  // earliest row RowsCommitted named
};

}  // namespace queuebox::store
