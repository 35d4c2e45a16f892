// claim_ledger.h: the claims one outbox relay replica holds, from the claim until its outcome
// write is accounted for (relay.h; QueueBox reference §4.5, §13.8): each row's claim token, the
// cancel flag of its publish, and whether its lease is still ours.
//
// A held claim is renewed by Renew (the relay's lease keeper, every lease/3) until its outcome
// write starts (StartWriting): from then on the fenced write decides. A claim the renewal did not
// renew, and whose write has not started, is lost (another replica owns the row): its publish is
// cancelled where not yet handed over, and it is counted once, there. A claim lost after its
// write started is found by the fenced write, which changes nothing; the outcome writer counts it
// unless the renewal already did (CountedLost).
//
// A row claimed again while an older claim of it is held (that lease passed mid-publish and the
// row came back) replaces the entry: the older claim is lost and its publish cancelled; its own
// fenced write later finds it lost and counts it.
//
// Thread-safety: every method may be called from several threads at once (one mutex; Renew
// holds it only around its bookkeeping, not during the statement).
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/delivery_task.h"
#include "queuebox/status.h"
#include "queuebox/store.h"

namespace queuebox {

class ClaimLedger {
 public:
  // Holds the claims of rows that go to a publish; returns their cancel flags (flags[i] is
  // rows[i]'s), which the caller keeps with the rows.
  CancelFlags HoldForPublish(std::span<const OutboxRow> rows);
  // Holds the claims of rows whose outcome is written at once, without a publish (unroutable
  // rows): never renewed, never cancelled.
  void HoldForWrite(std::span<const OutboxRow> rows);
  // The outcome writes of `rows` start: a renewal no longer judges them.
  void StartWriting(std::span<const OutboxRow> rows);
  // Per row: true when a renewal found its claim lost and counted it (OnClaimsLost).
  std::vector<bool> CountedLost(std::span<const OutboxRow* const> rows) const;
  // Forgets the claims of `rows`, each only under its own token (the row may be held again
  // under a newer claim).
  void Release(std::span<const OutboxRow* const> rows);

  struct Renewal {
    Status status;       // the renewal statement's; OK when there was nothing to renew
    size_t renewed = 0;  // claims the statement renewed
    int64_t lost = 0;    // claims found lost by this renewal (their publishes cancelled)
  };
  // Renews every held claim not known lost with one statement (OutboxClaims::Renew).
  Renewal Renew(OutboxClaims& claims, int64_t lease_ms);

  size_t size() const;  // claims held

 private:
  struct Held {
    std::string token;
    CancelFlags cancel;    // the row's task's flags; null: a row written without a publish
    size_t index = 0;      // the row's flag in `cancel`
    bool writing = false;  // its outcome write started: the fenced write decides
    bool lost = false;     // a renewal missed it; counted there
  };
  Held& Hold(const std::string& id, const std::string& token);  // mu_ held
  Held* Find(const std::string& id, const std::string& token);  // mu_ held; this claim only
  const Held* Find(const std::string& id, const std::string& token) const;

  mutable std::mutex mu_;
  std::unordered_map<std::string, Held> claims_;  // by row id
};

}  // namespace queuebox
