// stages.h: the transform stages of QueueBox reference §8 on the JSONata engine (jsonata.h).
//
//   route        routes[i].transform         every delivery attempt, input: the outbox payload
//   destination  destinations.<n>.transform  every attempt, after the route, input: route output
//   source       sources.<n>.transform       once at receipt (source_stage.h)
//
// Route and destination stages change only the delivered body; the row keeps its payload, so a
// retry transforms it again. Their variables: $messageId (row id), $topic, $attempt (0 on the
// first delivery), $timestamp (created_at, ISO-8601). An expression that gives no value delivers
// `null` (as QueueBox does).
//
// Error strategies (onError), route/destination:
//   Fail  the delivery fails: the retry path (counts an attempt; dead after the last one),
//         last_error "Transform failed: <JSONata code at position n: message>"
//   Skip  the stage passes its input on: a route delivers the row's payload and the
//         destination stage does not run; a destination delivers the route's output
//   Dead  the row is dead at once, last_error "Transform dead-lettered the message: <reason>"
// A timeout or depth overflow is a transform error like any other. Every failure counts once in
// queuebox_transform_failures_total{strategy="fail"|"skip"|"dead"}.
//
// Threads: evaluation happens on the stages' own EvaluationThreads (one engine each), never on
// the caller's thread. Thread-safety: a DeliveryStages is immutable after Create; Apply may be
// called from many threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/message.h"
#include "queuebox/relay.h"
#include "queuebox/status.h"
#include "queuebox/transform/evaluation_threads.h"
#include "queuebox/transform/jsonata.h"

namespace queuebox::transform {

enum class OnError { kFail, kSkip, kDead };

// "Fail" | "Skip" | "Dead" (exact case) -> OnError; nullopt otherwise.
std::optional<OnError> ParseOnError(std::string_view text);
// The metric label: "fail" | "skip" | "dead".
std::string_view StrategyLabel(OnError on_error);
// Every label, for exporting the counter at zero.
const std::vector<std::string_view>& StrategyLabels();

// A compiled transform block.
struct Stage {
  Expression expression;
  OnError on_error = OnError::kFail;
  std::string path;  // "routes[0].transform": where it is configured (logs)
};

// Compiles `block` on the calling thread's engine (loading it). kInvalidArgument naming the key:
//   "routes[0].transform.expression: S0203 at position 22: Expected \"]\" before end of
//   expression"
// kInternal when the engine cannot load.
Result<Stage> CompileStage(const TransformConfig& block, std::string path);

// An ISO-8601 instant as QueueBox prints one (java.time.Instant): the fraction of a second in
// groups of three digits with trailing zero groups dropped, none when zero.
// "2024-05-01T10:00:00.120000Z" -> "2024-05-01T10:00:00.120Z"; "...:00.000Z" -> "...:00Z".
// Text it does not recognise is returned as is.
std::string InstantText(std::string_view iso);

// The $ variables of the route and destination stages for `row`.
Bindings DeliveryBindings(const OutboxRow& row);

// What one message's stages give (the relay's DeliveryTransforms::Result).
using StageResult = DeliveryTransforms::Result;

// The route stage (may be null) then the destination stage (may be null) for one row, on the
// calling thread's engine. Failures are logged (rate-limited; message id, topic, stage path,
// strategy and the reason, redacted).
StageResult ApplyDeliveryStages(const Stage* route, const Stage* destination, const OutboxRow& row);

// The relay's transform stages: one per configured routes[i].transform and
// destinations.<n>.transform.
class DeliveryStages final : public DeliveryTransforms {
 public:
  // Compiles every block of `config` (on a short-lived thread, so the caller loads no engine) and
  // starts `threads` evaluation threads. nullptr when no route or destination has a transform
  // (nothing loads). kInvalidArgument listing every block that does not compile, one per line in
  // the configuration's error format:
  //   "The configuration has 2 errors. Fix each one and start QueueBox again.\n
  //     - routes[0].transform.expression: S0203 at position 22: ..."
  // `routes` must be config.routes (the relay's route indexes).
  static queuebox::Result<std::shared_ptr<DeliveryStages>> Create(const Config& config,
                                                                  int threads);

  bool Applies(std::size_t route) const override;
  void Apply(std::span<const Message> messages, std::span<Result> results) const override;

  int threads() const { return threads_->size(); }

 private:
  struct RouteStages {
    std::optional<Stage> route;
    const Stage* destination = nullptr;  // into destinations_
  };
  DeliveryStages() = default;

  std::vector<std::unique_ptr<Stage>> destinations_;
  std::vector<RouteStages> routes_;
  std::unique_ptr<EvaluationThreads> threads_;
};

// Checks that every transform block of `config` compiles (routes, destinations), on a
// short-lived thread. The same error as DeliveryStages::Create; Ok when none is configured.
// For `queuebox check-config`.
Status CheckTransforms(const Config& config);

// The number of evaluation threads for a relay with `workers` publish workers: the machine's
// cores (evaluation is CPU-bound, more threads only add engines), at most `workers`, at least 1.
int DefaultEvaluationThreads(int workers);

}  // namespace queuebox::transform
