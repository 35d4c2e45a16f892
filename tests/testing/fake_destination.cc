#include "testing/fake_destination.h"

#include <thread>

namespace queuebox::testing {

void FakeDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  int n = static_cast<int>(batch.size());
  int prev = max_batch_.load();
  while (n > prev && !max_batch_.compare_exchange_weak(prev, n)) {
  }
  Decider decider;
  {
    std::lock_guard<std::mutex> lock(mu_);
    decider = decider_;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_.load()));
    const OutboxRow& row = *batch[i].row;
    Outcome o = decider ? decider(row) : Outcome::Delivered();
    {
      std::lock_guard<std::mutex> lock(mu_);
      published_.push_back({row.id, row.topic, row.key, batch[i].routing_key, row.attempt,
                            std::string(batch[i].body())});
    }
    cv_.notify_all();
    sink.Report(i, std::move(o));
  }
}

void FakeDestination::set_decider(Decider d) {
  std::lock_guard<std::mutex> lock(mu_);
  decider_ = std::move(d);
}

std::vector<FakeDestination::Published> FakeDestination::published() {
  std::lock_guard<std::mutex> lock(mu_);
  return published_;
}

size_t FakeDestination::count() {
  std::lock_guard<std::mutex> lock(mu_);
  return published_.size();
}

bool FakeDestination::WaitForCount(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return published_.size() >= n; });
}

}  // namespace queuebox::testing
