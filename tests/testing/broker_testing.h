// broker_testing.h: helpers shared by the broker destination tests (Kafka, RabbitMQ, NATS):
// rows, batches and a sink that records one outcome per index.
//
// Thread-safety: CollectingSink is thread-safe; the rest are plain values.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "queuebox/destination.h"

namespace queuebox::testing {

// Records outcomes; fails the test when an index is reported twice.
class CollectingSink : public OutcomeSink {
 public:
  void Report(std::size_t index, Outcome outcome) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(outcomes_.count(index), 0u) << "index " << index << " reported twice";
    outcomes_[index] = std::move(outcome);
  }
  std::map<std::size_t, Outcome> outcomes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return outcomes_;
  }
  // The outcome of `index` (a kRetry with "<not reported>" when missing).
  Outcome at(std::size_t index) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = outcomes_.find(index);
    return it == outcomes_.end() ? Outcome::Retry("<not reported>") : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::size_t, Outcome> outcomes_;
};

inline OutboxRow BrokerRow(std::string id, std::string topic, std::optional<std::string> key,
                           std::string payload, std::string headers = "{}") {
  OutboxRow r;
  r.id = std::move(id);
  r.topic = std::move(topic);
  r.key = std::move(key);
  r.payload = std::move(payload);
  r.headers = std::move(headers);
  r.claim_token = "token";
  return r;
}

// One OutboundMessage per row (rows must outlive the batch), no route routing key.
inline std::vector<OutboundMessage> BatchOf(const std::vector<OutboxRow>& rows) {
  std::vector<OutboundMessage> out;
  for (const OutboxRow& r : rows) out.push_back(OutboundMessage{&r, std::nullopt});
  return out;
}

// Publishes `rows` as one batch and returns the outcomes in index order.
inline std::vector<Outcome> PublishAll(Destination& d, const std::vector<OutboxRow>& rows) {
  std::vector<OutboundMessage> batch = BatchOf(rows);
  CollectingSink sink;
  d.PublishBatch(batch, sink);
  std::vector<Outcome> out;
  for (std::size_t i = 0; i < rows.size(); ++i) out.push_back(sink.at(i));
  EXPECT_EQ(sink.outcomes().size(), rows.size());
  return out;
}

// A destination of type D made from `settings` and started; nullptr (and a test failure) when
// either step fails.
template <class D, class Settings>
std::unique_ptr<D> StartedDestination(Settings settings) {
  Result<std::unique_ptr<D>> d = D::Create(std::move(settings));
  EXPECT_TRUE(d.ok()) << d.status().ToString();
  if (!d.ok()) return nullptr;
  Status st = (*d)->Start();
  EXPECT_TRUE(st.ok()) << st.ToString();
  return std::move(d).value();
}

// Polls `done` every 20 ms until it holds or `timeout` passes; returns its last value.
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

inline const char* KindName(Outcome::Kind k) {
  switch (k) {
    case Outcome::Kind::kDelivered:
      return "delivered";
    case Outcome::Kind::kRetry:
      return "retry";
    case Outcome::Kind::kReject:
      return "reject";
    case Outcome::Kind::kCancelled:
      return "cancelled";
    case Outcome::Kind::kUnavailable:
      return "unavailable";
  }
  return "?";
}

}  // namespace queuebox::testing
