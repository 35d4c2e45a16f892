// waking_intake.h: the sources' path into the inbox when an inbox relay forwards their rows: after
// a store that kept a new row it calls `wake` (InboxRelay::Wake), so a received message is
// forwarded now rather than at the relay's next poll (inbox.relay.pollIntervalMs).
//
// Thread-safety: Store may be called from any number of threads (as the inner intake allows);
// `wake` must be cheap and thread-safe (InboxRelay::Wake is, and conflates).
#pragma once

#include <algorithm>
#include <functional>
#include <span>
#include <utility>
#include <vector>

#include "queuebox/inbox.h"

namespace queuebox::sources {

class WakingIntake final : public InboxIntake {
 public:
  // `inner` is borrowed and must outlive this; `wake` may be empty (nothing to wake).
  WakingIntake(InboxIntake* inner, std::function<void()> wake)
      : inner_(inner), wake_(std::move(wake)) {}

  Result<std::vector<InboxStoreOutcome>> Store(std::span<const NewInboxMessage> messages) override {
    Result<std::vector<InboxStoreOutcome>> out = inner_->Store(messages);
    if (out.ok() && wake_ && std::any_of(out->begin(), out->end(), [](const InboxStoreOutcome& o) {
          return o.kind == InboxStoreOutcome::Kind::kStored;
        })) {
      wake_();
    }
    return out;
  }

 private:
  InboxIntake* inner_;
  std::function<void()> wake_;
};

}  // namespace queuebox::sources
