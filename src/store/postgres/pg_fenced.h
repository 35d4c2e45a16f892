// pg_fenced.h: the fenced batch writes of the PostgreSQL outbox and inbox stores, written once.
//
// A fenced write changes a claimed row only while its claim holds: same id, same claim token,
// state `processing` and a lease not yet expired (database clock). Each is one
// UPDATE ... FROM unnest(<arrays>) per batch, its arrays in id order (pg_arrays.h InIdOrder), so
// two batch writes that share rows lock them in one order. Mark dead, renew and the reclaim of
// expired leases are the same statements on both tables; the outbox's other outcomes (sent,
// retry, release) and the inbox's forward build theirs from Update and FencePredicate.
//
// Thread-safety: as the store's Runner (every method may be called from any thread when it may).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/store.h"
#include "store/common.h"
#include "store/postgres/pg_arrays.h"
#include "store/postgres/pg_connection.h"

namespace queuebox::store {

// What differs between the tables a fenced write updates.
struct FencedTable {
  std::string alias;  // the table's alias in a fenced UPDATE: "o" (outbox), "i" (inbox)
  // Appended to the SET of mark dead and reclaim: ", {updated_at} = clock_timestamp()" where the
  // table has that column.
  std::string touch;
  // A condition on the reclaimed row `r`, with its trailing " AND " ("" for every row).
  std::string reclaim_only;
  // outbox_attempts.row_table of this table's attempts.
  std::string row_table = "outbox";
};

// The attempt history's arrays of a fenced batch (AttemptRecord of each fence, in batch order),
// bound after the write's own arrays.
struct HistoryArrays {
  std::vector<std::string> attempts, destinations, durations, answers;
  void Add(const Fence& f);
  void AppendTo(std::vector<SqlParam>& params) const;
};

// Ids and claim tokens of a fenced batch, in id order, unmatchable fences left out.
struct FenceArrays {
  std::vector<std::string> ids, tokens;
  bool empty() const { return ids.empty(); }
};

// FenceArrays of `items` (fence_of(item): its Fence); `each(item)` runs for every item kept, in
// the same order, so the caller can fill its other arrays.
template <typename T, typename FenceOf, typename Each>
FenceArrays FencedBatch(std::span<const T> items, FenceOf fence_of, Each each) {
  FenceArrays out;
  for (const T* item : InIdOrder(items, fence_of)) {
    out.ids.push_back(fence_of(*item).id);
    out.tokens.push_back(fence_of(*item).claim_token);
    each(*item);
  }
  return out;
}

FenceArrays FencedBatch(std::span<const Fence> fences);

class PgFencedWrites {
 public:
  // Runs a store template ({T}, {id}, ...) on a pooled connection; `changes` may be null.
  using Runner =
      std::function<Result<SqlRows>(const std::string& tmpl, const std::vector<SqlParam>& params,
                                    int64_t* changes, PgConnection::Plan plan)>;

  PgFencedWrites(FencedTable table, Runner run);

  // "<a>.{id} = <s>.qb_id AND <a>.{claim_token} = <s>.qb_token AND <a>.{state} = 'processing'
  // AND <a>.{lease_expires_at} > clock_timestamp()" for the table's alias <a> and the batch's
  // relation <s>.
  std::string FencePredicate(const std::string& source) const;
  // UPDATE {T} AS <a> SET `set` FROM unnest(`unnest`) AS f(`names`) WHERE <fence over f>
  // RETURNING <a>.{id}::text. `names` start with qb_id, qb_token.
  std::string Update(const std::string& set, const std::string& unnest,
                     const std::string& names) const;
  // Update's statement that also records each changed row's attempt in outbox_attempts, in the
  // same statement (a data-modifying CTE): the unnest gains the HistoryArrays at $first_param..
  // $first_param+3, the history row gets `outcome` and f.qb_error when `has_error`. Returns the
  // changed ids as Update does.
  std::string Recorded(const std::string& set, const std::string& unnest, const std::string& names,
                       int first_param, std::string_view outcome, bool has_error) const;
  // The attempt history from now on (OutboxStore::EnableAttemptHistory): a batch whose first
  // fence carries an AttemptRecord runs the Recorded form of its write.
  void EnableHistory() { history_ = true; }
  // Whether the table outbox_attempts exists (asked once, then remembered).
  Result<bool> HistoryTableExists() const;
  // Retention: deletes the rows `doomed` selects as qb_id ($1 is their state) and, when
  // outbox_attempts exists, their attempts, in one statement. Returns the rows deleted.
  Result<int64_t> DeleteWithHistory(const std::string& doomed,
                                    const std::vector<SqlParam>& params) const;
  bool history() const { return history_.load(); }
  bool Recording(const Fence& first) const { return history() && first.record.has_value(); }
  // The ids a fenced template changed (its first column), planned per call: the arrays differ
  // in length from batch to batch.
  Result<std::vector<std::string>> Ids(const std::string& tmpl,
                                       const std::vector<SqlParam>& params) const;

  // `dead` with the order's error, claim cleared. Returns the ids changed.
  Result<std::vector<std::string>> MarkDead(std::span<const DeadOrder> orders) const;
  // Leases extended to now + lease_ms. kInvalidArgument for lease_ms <= 0 (a non-empty batch).
  Result<std::vector<std::string>> Renew(std::span<const Fence> fences, int64_t lease_ms) const;
  // Rows in `processing` whose lease expired (or has none) back to `pending`, skipping rows a
  // fenced write holds locked. Returns the number of rows changed.
  Result<int64_t> ReclaimExpired() const;

  // The templates (tests, EXPLAIN).
  const std::string& mark_dead_sql() const { return mark_dead_; }
  const std::string& renew_sql() const { return renew_; }
  const std::string& reclaim_sql() const { return reclaim_; }

 private:
  FencedTable table_;
  Runner run_;
  std::string mark_dead_, mark_dead_recorded_, renew_, reclaim_;
  std::atomic<bool> history_{false};
  mutable std::atomic<int> history_table_{-1};  // -1 not asked yet, 0 missing, 1 there
};

}  // namespace queuebox::store
