// idempotency.h: consumer idempotency (ADR-0022; reference §5, manifest.json `idempotency`).
// The consumer-side mirror of the outbox: at-least-once delivery collapsed to one effect per
// meta.id. It is seen-set, post-success dedupe: not exactly-once and not an in-flight lock (two
// concurrent deliveries of one id may both run).
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "babelqueue/envelope.h"

namespace babelqueue {

// Default name of the database seen-set table.
inline constexpr const char* kDefaultIdempotencyTable = "babelqueue_idempotency";

// The seen-set. Ids are meta.id verbatim (no trimming or normalisation).
class SeenStore {
 public:
  virtual ~SeenStore() = default;
  virtual Result<bool> Seen(const std::string& id) = 0;
  virtual Status Remember(const std::string& id) = 0;
  virtual Status Forget(const std::string& id) = 0;
};

// A process-local seen-set. Thread-safety: a mutex guards every call.
class InMemorySeenStore final : public SeenStore {
 public:
  Result<bool> Seen(const std::string& id) override;
  Status Remember(const std::string& id) override;
  Status Forget(const std::string& id) override;

 private:
  std::mutex mu_;
  std::set<std::string, std::less<>> ids_;
};

// A message handler: OK acks; an error leaves the message to the runtime's retry / dead-letter.
using Handler = std::function<Status(const Envelope&)>;

// Wraps `handler` (Go idempotency.Wrap):
//  1. meta.id empty -> run the handler unchanged (fail open: work that cannot be identified is
//     never dropped).
//  2. Seen(id) error -> returned as is; the handler does not run (the runtime retries).
//  3. Seen -> OK without running the handler (skip and ack).
//  4. Run; an error is returned and the id is NOT remembered (a redelivery runs again).
//  5. OK -> Remember(id). A Remember error is ignored and the message is still acked, as Go does
//     (the effect already happened; a rare redelivery then runs again).
// `store` must outlive the returned handler. Thread-safety: as safe as handler and store.
Handler Wrap(Handler handler, SeenStore& store);

}  // namespace babelqueue
