#include "store/postgres/claim_window_state.h"

#include <algorithm>

#include "store/common.h"

namespace queuebox::store {
namespace {

// True when `since` is set and at least `period` lies between it and `now`; an unset time is
// long ago.
bool Elapsed(const std::optional<int64_t>& since, int64_t now, std::chrono::milliseconds period) {
  return !since.has_value() || now - *since >= period.count();
}

// (at, sequence) of `a` before `b`; "-infinity" first, then the fixed-width UTC text in order.
bool Before(const std::string& a_at, int64_t a_seq, const std::string& b_at, int64_t b_seq) {
  if (a_at == b_at) return a_seq < b_seq;
  if (b_at == "-infinity") return false;
  if (a_at == "-infinity") return true;
  return a_at < b_at;
}

}  // namespace

ClaimWindowState::NextClaim ClaimWindowState::Next() {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = now_();
  NextClaim next;
  if (Elapsed(read_from_beginning_at_, now, kReadFromBeginningEvery)) {
    read_from_beginning_at_ = now;  // `next` keeps the default start: the beginning
  } else {
    next.window_from_at = window_from_at_;
    next.window_from_sequence = window_from_sequence_;
  }
  if (behind_.has_value() &&
      Before(behind_->first, behind_->second, next.window_from_at, next.window_from_sequence)) {
    next.window_from_at = behind_->first;
    next.window_from_sequence = behind_->second;
  }
  next.generation = committed_generation_;
  next.walk_after_key = walk_after_key_;
  next.read_window = Elapsed(fell_back_at_, now, kSkipWindowAfterFallbackFor);
  if (retry_due_at_.has_value() && now >= *retry_due_at_) {
    walk_resting_ = false;  // a retried head may be due behind a window of its key's rows
    retry_due_at_.reset();
  }
  next.walk_allowed = !walk_resting_ || now - walk_resting_since_ >= kWalkRestsAtMost.count();
  if (next.walk_allowed) {
    walk_resting_ = false;
  } else {
    next.read_window = true;
  }
  next.share_key_count =
      Elapsed(share_key_count_at_, now, kShareKeyCountTrustedFor) ? -1 : share_key_count_;
  return next;
}

void ClaimWindowState::Claimed(const NextClaim& used, const ClaimReport& report) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t now = now_();
  if (!report.claimed_any) {
    if (!walk_resting_) walk_resting_since_ = now;
    walk_resting_ = true;
    return;
  }
  if (report.window_first_row.has_value()) {
    const std::string& first = *report.window_first_row;
    const size_t space = first.rfind(' ');
    const std::optional<int64_t> sequence =
        space == std::string::npos ? std::nullopt : ParseInt(first.substr(space + 1));
    if (sequence.has_value()) {
      window_from_at_ = first.substr(0, space);
      window_from_sequence_ = *sequence;
    }
  }
  if (behind_.has_value()) {
    if (used.read_window && report.window_first_row.has_value() &&
        used.generation >= behind_generation_) {
      behind_.reset();  // this claim's window began at or before those rows, after their commit
    } else if (Before(behind_->first, behind_->second, window_from_at_, window_from_sequence_)) {
      window_from_at_ = behind_->first;  // committed after this claim's snapshot
      window_from_sequence_ = behind_->second;
    }
  }
  if (!report.walk_last_key.has_value()) return;
  walk_after_key_ = *report.walk_last_key;
  share_key_count_ = report.walk_share_keys;
  share_key_count_at_ = now;
  // The walk counts as a fallback only when the window was read and came up short: not when this
  // claim skipped the window, nor when the window held a row of every key the walk saw.
  const bool window_held_every_key =
      report.walk_share_keys >= 0 && report.window_keys >= report.walk_share_keys;
  if (used.read_window && !window_held_every_key) fell_back_at_ = now;
}

void ClaimWindowState::RowsCommitted(const std::string& first_row) {
  const size_t space = first_row.rfind(' ');
  const std::optional<int64_t> sequence =
      space == std::string::npos ? std::nullopt : ParseInt(first_row.substr(space + 1));
  if (!sequence.has_value()) return;
  std::lock_guard<std::mutex> lock(mu_);
  const std::string at = first_row.substr(0, space);
  behind_generation_ = ++committed_generation_;
  if (!behind_.has_value() || Before(at, *sequence, behind_->first, behind_->second)) {
    behind_ = std::make_pair(at, *sequence);
  }
}

void ClaimWindowState::OutcomeWritten() {
  std::lock_guard<std::mutex> lock(mu_);
  walk_resting_ = false;
}

void ClaimWindowState::RetryScheduled(int64_t delay_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t due = now_() + std::max<int64_t>(0, delay_ms);
  if (!retry_due_at_.has_value() || due < *retry_due_at_) retry_due_at_ = due;
  share_key_count_ = -1;
}

void ClaimWindowState::LeasesReclaimed() {
  std::lock_guard<std::mutex> lock(mu_);
  window_from_at_ = NextClaim{}.window_from_at;
  window_from_sequence_ = NextClaim{}.window_from_sequence;
}

void ClaimWindowState::ShareChanged() {
  std::lock_guard<std::mutex> lock(mu_);
  window_from_at_ = NextClaim{}.window_from_at;
  window_from_sequence_ = NextClaim{}.window_from_sequence;
  share_key_count_ = -1;
  walk_resting_ = false;
}

}  // namespace queuebox::store
