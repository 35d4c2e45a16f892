// idempotency.cc: Wrap and InMemorySeenStore (see idempotency.h).
#include "babelqueue/idempotency.h"

#include <utility>

namespace babelqueue {

Result<bool> InMemorySeenStore::Seen(const std::string& id) {
  std::lock_guard lock(mu_);
  return ids_.count(id) > 0;
}

Status InMemorySeenStore::Remember(const std::string& id) {
  std::lock_guard lock(mu_);
  ids_.insert(id);
  return Status::Ok();
}

Status InMemorySeenStore::Forget(const std::string& id) {
  std::lock_guard lock(mu_);
  ids_.erase(id);
  return Status::Ok();
}

Handler Wrap(Handler handler, SeenStore& store) {
  return [handler = std::move(handler), &store](const Envelope& envelope) -> Status {
    const std::string& id = envelope.meta.id;
    if (id.empty()) return handler(envelope);
    Result<bool> seen = store.Seen(id);
    if (!seen.ok()) return seen.status();
    if (*seen) return Status::Ok();
    QB_RETURN_IF_ERROR(handler(envelope));
    (void)store.Remember(id);  // best effort, as documented
    return Status::Ok();
  };
}

}  // namespace babelqueue
