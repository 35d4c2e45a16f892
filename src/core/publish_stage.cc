#include "core/publish_stage.h"

#include <mutex>
#include <utility>

#include "core/log.h"
#include "core/outcome.h"
#include "core/redaction.h"
#include "telemetry/otlp.h"
#include "telemetry/tracer.h"

namespace queuebox {
namespace {

// Collects the outcomes of one batch; a message the destination never reported is a failure.
class BatchSink : public OutcomeSink {
 public:
  explicit BatchSink(size_t n) : outcomes_(n), reported_(n, false) {}
  void Report(size_t index, Outcome outcome) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (index >= outcomes_.size() || reported_[index]) return;
    outcomes_[index] = std::move(outcome);
    reported_[index] = true;
  }
  std::vector<Outcome> Take() {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < outcomes_.size(); ++i) {
      if (!reported_[i])
        outcomes_[i] = Outcome::Retry("Publish failed: the destination reported no outcome");
    }
    return std::move(outcomes_);
  }

 private:
  std::mutex mu_;
  std::vector<Outcome> outcomes_;
  std::vector<bool> reported_;
};

// The span attribute queuebox.outcome.
std::string_view OutcomeName(Outcome::Kind kind) {
  switch (kind) {
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
  return "retry";
}

}  // namespace

namespace {

// A destination's publish-span attributes that never change (OpenTelemetry messaging
// conventions), encoded once.
std::string FixedSpanAttributes(const Destination& d) {
  const telemetry::Attribute fixed[] = {
      {"messaging.system", d.type()},
      {"messaging.operation.name", std::string_view("publish")},
      {"messaging.operation.type", std::string_view("send")},
      {"messaging.destination.name", std::string_view(d.name())},
      {"queuebox.destination", std::string_view(d.name())},
  };
  return telemetry::EncodeSpanAttributes(fixed);
}

}  // namespace

PublishStage::PublishStage(const RelayOptions& options,
                           const std::map<std::string, std::unique_ptr<Destination>>& destinations,
                           RelayObserver* observer)
    : transforms_(options.transforms), observer_(observer), tracer_(options.tracer) {
  for (const auto& [name, d] : destinations) {
    if (tracer_) span_attributes_[d.get()] = FixedSpanAttributes(*d);
    auto found = options.circuit_breakers.find(name);
    CircuitBreakerConfig c =
        found != options.circuit_breakers.end() ? found->second : CircuitBreakerConfig{};
    if (!c.enabled) continue;
    const std::string dest = name;
    breakers_[name] = std::make_unique<CircuitBreaker>(
        c, [this, dest](CircuitBreaker::State from, CircuitBreaker::State to,
                        std::string_view reason) { OnBreakerTransition(dest, from, to, reason); });
    observer_->OnCircuitState(name, static_cast<int>(CircuitBreaker::State::kClosed));
  }
}

bool PublishStage::HasBreaker(const Destination& destination) const {
  return BreakerOf(destination) != nullptr;
}

std::string PublishStage::CircuitState(const std::string& destination) const {
  auto it = breakers_.find(destination);
  if (it == breakers_.end()) return "";
  return std::string(CircuitBreaker::Name(it->second->state()));
}

CircuitBreaker* PublishStage::BreakerOf(const Destination& d) const {
  auto it = breakers_.find(d.name());
  return it == breakers_.end() ? nullptr : it->second.get();
}

struct PublishStage::Traces {
  std::vector<TraceHeaders> headers;                       // by message
  std::vector<std::optional<telemetry::SpanStart>> spans;  // by message; unset: no trace
};

void PublishStage::Publish(DeliveryTask& task, size_t begin, size_t end) {
  CircuitBreaker* breaker = BreakerOf(*task.destination);
  Admitted admitted = Admit(task, breaker, begin, end);
  Messages m = Transform(task, admitted.rows);
  DropCancelled(task, m);
  Traces traces;
  if (tracer_) BeginSpans(m, traces);
  BatchSink sink(m.messages.size());
  const auto start = RelayClock::now();
  if (!m.messages.empty()) task.destination->PublishBatch(m.messages, sink);
  const auto done = RelayClock::now();
  Record(task, breaker, admitted, begin, m, sink.Take(), start, done);
  if (tracer_) EndSpans(task, m, traces);
  observer_->OnQueueDepth(task.destination->name(), -static_cast<int64_t>(end - begin));
}

PublishStage::Admitted PublishStage::Admit(DeliveryTask& task, CircuitBreaker* breaker,
                                           size_t begin, size_t end) {
  Admitted out;
  out.rows.reserve(end - begin);
  out.probe.assign(end - begin, 0);
  const auto admit_time = RelayClock::now();
  for (size_t i = begin; i < end; ++i) {
    if (breaker == nullptr) {
      out.rows.push_back(i);
      continue;
    }
    CircuitBreaker::Admission a = breaker->Admit(admit_time);
    if (a.publish) {
      out.rows.push_back(i);
      out.probe[i - begin] = a.probe;
    } else {
      task.attempts[i].outcome = Outcome::Unavailable(std::string(kNotPublished) + "destination '" +
                                                      task.destination->name() + "' is out");
      task.attempts[i].release_delay_ms = a.release_delay_ms;
    }
  }
  return out;
}

// Without a stage the rows go as they are. With one (QueueBox reference §8), the rows to publish
// get their bodies; a row that a failed stage keeps from the destination gets its outcome
// (Fail: retry, Dead: reject).
PublishStage::Messages PublishStage::Transform(DeliveryTask& task,
                                               const std::vector<size_t>& rows) {
  Messages out;
  out.messages.reserve(rows.size());
  out.index.reserve(rows.size());
  if (!task.transformed) {
    for (size_t i : rows) {
      out.messages.push_back(
          {.row = &task.rows[i], .routing_key = task.routing_keys[i], .cancel = &task.cancel[i]});
      out.index.push_back(i);
    }
    return out;
  }
  std::vector<DeliveryTransforms::Message> in(rows.size());
  for (size_t k = 0; k < rows.size(); ++k) in[k] = {&task.rows[rows[k]], task.routes[rows[k]]};
  std::vector<DeliveryTransforms::Result> results(rows.size());
  transforms_->Apply(in, results);
  for (size_t k = 0; k < rows.size(); ++k) {
    const size_t i = rows[k];
    DeliveryTransforms::Result& r = results[k];
    if (!r.failed_strategy.empty()) observer_->OnTransformFailure(r.failed_strategy);
    switch (r.kind) {
      case DeliveryTransforms::Result::Kind::kDeliver:
        out.messages.push_back({.row = &task.rows[i],
                                .routing_key = task.routing_keys[i],
                                .transformed_body = std::move(r.body),
                                .cancel = &task.cancel[i]});
        out.index.push_back(i);
        break;
      case DeliveryTransforms::Result::Kind::kRetry:
        task.attempts[i].outcome = Outcome::Retry(std::move(r.error));
        break;
      case DeliveryTransforms::Result::Kind::kDead:
        task.attempts[i].outcome = Outcome::Reject(std::move(r.error));
        break;
    }
  }
  return out;
}

// Rows whose claim was lost while they were queued are not published at all.
void PublishStage::DropCancelled(DeliveryTask& task, Messages& m) {
  size_t kept = 0;
  for (size_t j = 0; j < m.messages.size(); ++j) {
    if (m.messages[j].cancel_requested()) {
      task.attempts[m.index[j]].outcome = Outcome::Cancelled();
      continue;
    }
    if (kept != j) {
      m.messages[kept] = std::move(m.messages[j]);
      m.index[kept] = m.index[j];
    }
    ++kept;
  }
  m.messages.resize(kept);
  m.index.resize(kept);
}

// A row's valid traceparent is the parent; a row without one starts a trace (startTraces) or
// gets none. An invalid row value never reaches the destination either way.
void PublishStage::BeginSpans(Messages& m, Traces& traces) const {
  traces.headers.resize(m.messages.size());
  traces.spans.resize(m.messages.size());
  for (size_t j = 0; j < m.messages.size(); ++j) {
    std::optional<telemetry::TraceContext> parent =
        telemetry::FromHeadersJson(m.messages[j].row->headers);
    if (parent || tracer_->start_traces()) {
      traces.spans[j] = telemetry::Begin(parent);
      traces.headers[j].traceparent = traces.spans[j]->traceparent();
      traces.headers[j].tracestate = traces.spans[j]->context.tracestate;
    }
    m.messages[j].trace = &traces.headers[j];
  }
}

// One PRODUCER span per delivery attempt, by the OpenTelemetry messaging conventions.
void PublishStage::EndSpans(const DeliveryTask& task, const Messages& m, Traces& traces) const {
  const Destination& d = *task.destination;
  auto found = span_attributes_.find(&d);
  const std::string made = found == span_attributes_.end() ? FixedSpanAttributes(d) : "";
  const std::string_view fixed = found != span_attributes_.end() ? found->second : made;
  for (size_t j = 0; j < m.messages.size(); ++j) {
    if (!traces.spans[j]) continue;
    const OutboxRow& row = *m.messages[j].row;
    const Outcome& o = task.attempts[m.index[j]].outcome;
    const bool delivered = o.kind == Outcome::Kind::kDelivered;
    // The destination's five attributes are encoded once (span_attributes_), these four per span.
    const telemetry::Attribute a[] = {
        {"messaging.message.id", std::string_view(row.id)},
        {"queuebox.topic", std::string_view(row.topic)},
        {"queuebox.attempt", static_cast<int64_t>(row.attempt)},
        {"queuebox.outcome", OutcomeName(o.kind)},
    };
    tracer_->Record(*traces.spans[j],
                    {.name_prefix = "publish ",
                     .name = d.name(),
                     .kind = telemetry::SpanKind::kProducer,
                     .attributes = a,
                     .encoded_attributes = fixed,
                     .error = !delivered,
                     .status_message = delivered ? std::string_view() : std::string_view(o.error)});
  }
}

void PublishStage::Record(DeliveryTask& task, CircuitBreaker* breaker, const Admitted& admitted,
                          size_t begin, Messages& m, std::vector<Outcome> published,
                          RelayClock::time_point start, RelayClock::time_point done) {
  std::vector<char> recorded(admitted.probe.size(), 0);
  int64_t successes = 0, failures = 0;
  for (size_t j = 0; j < m.index.size(); ++j) {
    DeliveryAttempt& attempt = task.attempts[m.index[j]];
    attempt.publish_start = start;
    attempt.publish_duration = done - start;
    if (published[j].kind == Outcome::Kind::kCancelled) {
      // Only a lost claim cancels; a destination that cancels a held claim failed it.
      if (!m.messages[j].cancel_requested()) {
        published[j] = Outcome::Retry("Publish failed: cancelled by the destination");
      } else {
        attempt.outcome = std::move(published[j]);
        continue;  // nothing was published
      }
    }
    Outcome& o = published[j];
    ++(o.kind == Outcome::Kind::kDelivered ? successes : failures);
    if (breaker != nullptr) {
      const size_t i = m.index[j];
      const bool outage = o.kind == Outcome::Kind::kUnavailable;
      attempt.release_delay_ms =
          breaker->Record(outage, admitted.probe[i - begin], o.retry_after_ms, done, o.error);
      recorded[i - begin] = 1;
    }
    attempt.outcome = std::move(o);
  }
  observer_->OnPublishes(*task.destination, successes, failures,
                         std::chrono::duration<double>(done - start).count());
  // A probe a transform kept from the destination has no verdict.
  if (breaker != nullptr) {
    for (size_t k = 0; k < admitted.probe.size(); ++k) {
      if (admitted.probe[k] != 0 && recorded[k] == 0) breaker->Abandon(admitted.probe[k]);
    }
  }
}

// One log line per transition (the breaker's lock is held: no call back into it).
void PublishStage::OnBreakerTransition(const std::string& destination, CircuitBreaker::State from,
                                       CircuitBreaker::State to, std::string_view reason) {
  observer_->OnCircuitState(destination, static_cast<int>(to));
  std::string from_name(CircuitBreaker::Name(from)), to_name(CircuitBreaker::Name(to));
  switch (to) {
    case CircuitBreaker::State::kOpen:
      log::Warn(
          "The destination is unavailable; its circuit breaker is open. Its messages are "
          "released without spending an attempt until a probe succeeds.",
          {{"destination", destination},
           {"from", from_name},
           {"to", to_name},
           {"reason", SanitizeError(std::string(reason), kMaxLastErrorChars)}});
      break;
    case CircuitBreaker::State::kHalfOpen:
      log::Info("The circuit breaker of the destination is half-open; probing",
                {{"destination", destination}, {"from", from_name}, {"to", to_name}});
      break;
    case CircuitBreaker::State::kClosed:
      log::Info("The destination is available again; its circuit breaker is closed",
                {{"destination", destination}, {"from", from_name}, {"to", to_name}});
      break;
  }
}

}  // namespace queuebox
