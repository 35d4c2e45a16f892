// fake_destination.h: a Destination whose outcomes a test programs. It records every published
// message (id, attempt, key, routing key, body) in order and can be slowed down.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "queuebox/destination.h"

namespace queuebox::testing {

class FakeDestination : public Destination {
 public:
  struct Published {
    std::string id, topic;
    std::optional<std::string> key, routing_key;
    int attempt = 0;
    std::string body;  // what was sent: the transformed body or the row's payload
  };
  // Decides the outcome of one message; default: delivered.
  using Decider = std::function<Outcome(const OutboxRow&)>;

  explicit FakeDestination(std::string name, std::string type = "fake")
      : name_(std::move(name)), type_(std::move(type)) {}

  const std::string& name() const override { return name_; }
  std::string_view type() const override { return type_; }
  Status Start() override { return Status::Ok(); }
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;

  void set_decider(Decider d);
  void set_delay(std::chrono::milliseconds d) { delay_ms_ = d.count(); }
  std::vector<Published> published();
  size_t count();
  // Waits until at least n messages were published (true) or the timeout passed (false).
  bool WaitForCount(size_t n, std::chrono::milliseconds timeout);
  int max_batch() const { return max_batch_; }

 private:
  std::string name_, type_;
  std::mutex mu_;
  std::condition_variable cv_;
  Decider decider_;
  std::vector<Published> published_;
  std::atomic<int64_t> delay_ms_{0};
  std::atomic<int> max_batch_{0};
};

}  // namespace queuebox::testing
