// outbox.h: the BabelQueue transactional outbox (ADR-0029; seed 004, reference §3).
//
// The producer writes the business row and the encoded envelope in ONE database transaction that
// the caller owns (begin ... Outbox::Write ... commit); a separate OutboxRelay later publishes the
// stored bytes verbatim through a publish-only Transport and marks them published. Exactly-once
// handoff into the outbox, at-least-once on the wire: a crash between publish and mark-published
// republishes the row; consumers dedupe on meta.id (idempotency.h).
//
// Nothing here begins or commits a transaction, decodes a stored body or re-encodes it. The
// outbox's own columns (id, status, attempts, last_error) surround the envelope, never enter it.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "babelqueue/envelope.h"

namespace babelqueue {

// Default name of the database stores' outbox table (its own table, not QueueBox's `outbox`).
inline constexpr const char* kDefaultOutboxTable = "babelqueue_outbox";

// One pending outbox row as the relay sees it.
struct OutboxRecord {
  std::string id;     // the store's own key (not meta.id)
  std::string body;   // the encoded envelope, exactly as stored
  std::string queue;  // logical queue captured at write time
  int attempts = 0;   // failed publishes so far
};

// The four-method persistence contract every BabelQueue SDK shares (reference §3.1).
// Implementations document their own thread-safety; each call is one short operation.
class OutboxStore {
 public:
  virtual ~OutboxStore() = default;
  // Persists the encoded envelope bytes and queue; returns the new row id. Runs inside the
  // caller's open transaction; never begins or commits.
  virtual Result<std::string> Save(std::string_view encoded, std::string_view queue) = 0;
  // Up to `limit` pending rows, oldest first (limit <= 0: none). A database store claims the rows
  // it returns so that two relays never hold one row at the same time.
  virtual Result<std::vector<OutboxRecord>> FetchUnpublished(int limit) = 0;
  // Marks rows published; called only after the transport accepted them. Unknown ids are ignored.
  virtual Status MarkPublished(const std::vector<std::string>& ids) = 0;
  // Records a failed publish: attempts + 1, last error kept, the row stays pending.
  virtual Status MarkFailed(const std::string& id, std::string_view error) = 0;
};

// The publish-only broker seam the relay forwards through (Go transport.go, Publish only).
class Transport {
 public:
  virtual ~Transport() = default;
  // Publishes `body` (the envelope bytes, verbatim) to `queue`. OK only when the broker accepted
  // it; any error leaves the row pending. Its message becomes the row's last error, so it must
  // hold no secret.
  virtual Status Publish(std::string_view queue, std::string_view body) = 0;
};

// The writer (reference §3.3): encode once, Save with meta.queue (blank -> "default").
// Thread-safety: as safe as the store it writes to.
class Outbox {
 public:
  explicit Outbox(OutboxStore& store) : store_(store) {}
  // The new row id. Encoding errors (kInvalidArgument) are returned before anything is saved;
  // store errors are returned as is. Never begins or commits anything.
  Result<std::string> Write(const Envelope& envelope);

 private:
  OutboxStore& store_;
};

struct RelayOptions {
  int batch_size = 100;           // rows per Flush; <= 0 -> 100
  int64_t backoff_step_ms = 50;   // linear backoff step (ms); <= 0 -> 50
  int64_t backoff_cap_ms = 5000;  // backoff ceiling (ms); <= 0 -> 5000
  // Sleeps after a failed publish (argument in ms). Unset -> std::this_thread::sleep_for.
  std::function<void(int64_t ms)> sleeper;
};

inline constexpr int kDefaultDrainCeiling = 10000;  // passes

struct RelayResult {
  int published = 0;
  int failed = 0;
  // OK, or the store error that ended the pass (counts cover what happened before it).
  Status status;
  int attempted() const { return published + failed; }
};

// The relay (reference §3.5). Thread-safety: one relay instance is used by one thread; run
// several relays (each with its own store connection) for parallelism.
class OutboxRelay {
 public:
  OutboxRelay(Transport& transport, OutboxStore& store, RelayOptions options = {});

  // One batch: fetch up to batch_size rows; publish each body verbatim to its queue; a failed
  // publish -> MarkFailed(id, error) then sleep min(step * (attempts + 1), cap) ms and continue;
  // finally MarkPublished(all accepted ids) in one call. A fetch / mark error ends the pass with
  // that status (rows already published stay pending and are republished later).
  RelayResult Flush();
  // Flush while a pass publishes something, at most max_passes passes (<= 0 -> 10000). Totals of
  // every pass; a store error stops the drain and is returned with the totals so far.
  RelayResult Drain(int max_passes = 0);

  // The backoff after a row's failure given its attempts before this failure (ms).
  int64_t BackoffFor(int prior_attempts) const;

 private:
  Transport& transport_;
  OutboxStore& store_;
  RelayOptions options_;
};

// The reference store (reference §3.4): process-local, insertion ordered, ids "ob-1", "ob-2", ...
// No transaction (Save is immediate, a rollback cannot undo it) and no claiming: one relay only.
// Thread-safety: a mutex guards every call, so a writer thread and a relay thread may share it.
class InMemoryOutboxStore final : public OutboxStore {
 public:
  Result<std::string> Save(std::string_view encoded, std::string_view queue) override;
  Result<std::vector<OutboxRecord>> FetchUnpublished(int limit) override;
  Status MarkPublished(const std::vector<std::string>& ids) override;
  Status MarkFailed(const std::string& id, std::string_view error) override;

  // Test helpers.
  int PendingCount() const;
  int AttemptsOf(const std::string& id) const;           // 0 when unknown
  std::string LastErrorOf(const std::string& id) const;  // "" when unknown

 private:
  struct Row {
    OutboxRecord record;
    bool published = false;
    std::string last_error;
  };
  int IndexOf(const std::string& id) const;  // -1 when unknown; mu_ held

  mutable std::mutex mu_;
  std::vector<Row> rows_;  // insertion order = oldest first
  int64_t sequence_ = 0;
};

}  // namespace babelqueue
