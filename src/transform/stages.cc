// stages.cc: the route and destination stages (see stages.h).
#include "queuebox/transform/stages.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <thread>
#include <utility>

#include "core/log.h"
#include "core/redaction.h"
#include "problems.h"

namespace queuebox::transform {
namespace {

// One line per failure kind per second at most: a broken expression fails every message.
log::RateLimiter& FailureLimiter() {
  static log::RateLimiter* const limiter = new log::RateLimiter(std::chrono::milliseconds(1000));
  return *limiter;
}

void LogFailure(const Stage& stage, const OutboxRow& row, const TransformError& error) {
  const char* what = stage.on_error == OnError::kSkip   ? "the stage's input is delivered"
                     : stage.on_error == OnError::kDead ? "the message is dead"
                                                        : "the delivery fails and is retried";
  log::WriteLimited(FailureLimiter(), log::Level::kWarn, std::string("A transform failed; ") + what,
                    {{"message_id", row.id},
                     {"topic", row.topic},
                     {"attempt", std::to_string(row.attempt)},
                     {"transform", stage.path},
                     {"on_error", std::string(StrategyLabel(stage.on_error))},
                     {"reason", SanitizeError(error.ToString(), 2000)}});
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// What Create compiles: every block by its key path, and for each route the paths of its stages.
struct Plan {
  std::vector<std::pair<std::string, const TransformConfig*>> destinations;  // path, block
  std::map<std::string, size_t> destination_index;                           // name -> index
  std::vector<const TransformConfig*> routes;                                // may be null
};

Plan MakePlan(const Config& config) {
  Plan plan;
  for (const auto& [name, d] : config.destinations) {
    if (!d.transform) continue;
    plan.destination_index[name] = plan.destinations.size();
    plan.destinations.emplace_back("destinations." + name + ".transform", &*d.transform);
  }
  for (const RouteConfig& r : config.routes) {
    plan.routes.push_back(r.transform ? &*r.transform : nullptr);
  }
  return plan;
}

bool PlanIsEmpty(const Plan& plan) {
  return plan.destinations.empty() &&
         std::none_of(plan.routes.begin(), plan.routes.end(), [](auto* t) { return t != nullptr; });
}

// Compiles every block of `plan` on a thread of its own, joined before returning: the start-up
// check loads an engine there and frees it with the thread, instead of keeping one on the
// caller's thread for the life of the process.
Status CompilePlan(const Plan& plan, std::vector<std::unique_ptr<Stage>>* destinations,
                   std::vector<std::optional<Stage>>* routes) {
  std::vector<std::string> problems;
  std::thread compiler([&] {
    for (const auto& [path, block] : plan.destinations) {
      Result<Stage> s = CompileStage(*block, path);
      if (s.ok()) {
        destinations->push_back(std::make_unique<Stage>(std::move(s).value()));
      } else {
        problems.push_back(s.status().message());
      }
    }
    for (size_t i = 0; i < plan.routes.size(); ++i) {
      routes->emplace_back();
      if (plan.routes[i] == nullptr) continue;
      Result<Stage> s =
          CompileStage(*plan.routes[i], "routes[" + std::to_string(i) + "].transform");
      if (s.ok()) {
        routes->back() = std::move(s).value();
      } else {
        problems.push_back(s.status().message());
      }
    }
  });
  compiler.join();
  if (!problems.empty()) return internal::ConfigProblems(problems);
  return Status::Ok();
}

}  // namespace

std::optional<OnError> ParseOnError(std::string_view text) {
  if (text == "Fail") return OnError::kFail;
  if (text == "Skip") return OnError::kSkip;
  if (text == "Dead") return OnError::kDead;
  return std::nullopt;
}

std::string_view StrategyLabel(OnError on_error) {
  switch (on_error) {
    case OnError::kFail:
      return "fail";
    case OnError::kSkip:
      return "skip";
    case OnError::kDead:
      return "dead";
  }
  return "fail";
}

const std::vector<std::string_view>& StrategyLabels() {
  static const std::vector<std::string_view>* const labels =
      new std::vector<std::string_view>{"fail", "skip", "dead"};
  return *labels;
}

Result<Stage> CompileStage(const TransformConfig& block, std::string path) {
  std::optional<OnError> on_error = ParseOnError(block.on_error);
  if (!on_error) {
    return InvalidArgument(path + ".onError: must be one of Fail, Skip, Dead (exact case), got '" +
                           block.on_error + "'");
  }
  if (block.timeout_ms <= 0) {
    return InvalidArgument(path + ".timeoutMs: must be at least 1, got " +
                           std::to_string(block.timeout_ms));
  }
  if (block.max_depth <= 0) {
    return InvalidArgument(path + ".maxDepth: must be at least 1, got " +
                           std::to_string(block.max_depth));
  }
  Limits limits;
  limits.timeout = std::chrono::milliseconds(block.timeout_ms);
  limits.max_depth = block.max_depth;
  TransformResult<Expression> compiled = Expression::Compile(block.expression, limits);
  if (!compiled.ok()) {
    const TransformError& e = compiled.error();
    if (e.kind == ErrorKind::kEngine) {
      return Internal(path + ".expression: the JSONata engine could not load: " + e.ToString());
    }
    return InvalidArgument(path + ".expression: " + e.ToString());
  }
  return Stage{std::move(compiled).value(), *on_error, std::move(path)};
}

std::string InstantText(std::string_view iso) {
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  if (iso.size() < 20 || iso.back() != 'Z' || iso[10] != 'T') return std::string(iso);
  std::string_view seconds = iso.substr(0, 19);
  std::string_view rest = iso.substr(19, iso.size() - 20);  // "" or ".ffff"
  if (rest.empty()) return std::string(iso);
  if (rest[0] != '.' || !AllDigits(rest.substr(1))) return std::string(iso);
  std::string digits(rest.substr(1));
  if (digits.size() > 9) return std::string(iso);
  digits.resize(9, '0');
  // Java prints 0, 3, 6 or 9 digits: the shortest group that keeps every non-zero digit.
  size_t keep = 9;
  while (keep > 0 && digits.compare(keep - 3, 3, "000") == 0) keep -= 3;
  std::string out(seconds);
  if (keep > 0) out += "." + digits.substr(0, keep);
  return out + "Z";
}

Bindings DeliveryBindings(const OutboxRow& row) {
  Bindings b;
  b.SetString("messageId", row.id)
      .SetString("topic", row.topic)
      .SetInt("attempt", row.attempt)
      .SetString("timestamp", InstantText(row.created_at));
  return b;
}

StageResult ApplyDeliveryStages(const Stage* route, const Stage* destination,
                                const OutboxRow& row) {
  StageResult result;
  const Bindings bindings = DeliveryBindings(row);
  // A stage's failure: Skip delivers `input` (nullopt: the row's payload) and ends the stages.
  auto fail = [&](const Stage& stage, const TransformError& error,
                  std::optional<std::string> input) {
    LogFailure(stage, row, error);
    result.failed_strategy = StrategyLabel(stage.on_error);
    switch (stage.on_error) {
      case OnError::kSkip:
        result.kind = StageResult::Kind::kDeliver;
        result.body = std::move(input);
        break;
      case OnError::kFail:
        result.kind = StageResult::Kind::kRetry;
        result.error = "Transform failed: " + error.ToString();
        break;
      case OnError::kDead:
        result.kind = StageResult::Kind::kDead;
        result.error = "Transform dead-lettered the message: " + error.ToString();
        break;
    }
    return result;
  };
  std::optional<std::string> body;  // nullopt: the row's payload
  if (route != nullptr) {
    auto out = route->expression.Evaluate(row.payload, bindings);
    // Skip on the route: the row's payload, and the destination stage does not run.
    if (!out.ok()) return fail(*route, out.error(), std::nullopt);
    body = std::move(out).value().value_or("null");
  }
  if (destination != nullptr) {
    auto out = destination->expression.Evaluate(body ? *body : row.payload, bindings);
    // Skip on the destination: the route's output (or the payload without a route stage).
    if (!out.ok()) return fail(*destination, out.error(), std::move(body));
    body = std::move(out).value().value_or("null");
  }
  result.kind = StageResult::Kind::kDeliver;
  result.body = std::move(body);
  return result;
}

Result<std::shared_ptr<DeliveryStages>> DeliveryStages::Create(const Config& config, int threads) {
  Plan plan = MakePlan(config);
  if (PlanIsEmpty(plan)) return std::shared_ptr<DeliveryStages>();
  std::shared_ptr<DeliveryStages> stages(new DeliveryStages());
  std::vector<std::optional<Stage>> routes;
  QB_RETURN_IF_ERROR(CompilePlan(plan, &stages->destinations_, &routes));
  for (size_t i = 0; i < routes.size(); ++i) {
    RouteStages rs;
    rs.route = std::move(routes[i]);
    auto d = plan.destination_index.find(config.routes[i].destination);
    if (d != plan.destination_index.end()) rs.destination = stages->destinations_[d->second].get();
    stages->routes_.push_back(std::move(rs));
  }
  stages->threads_ = std::make_unique<EvaluationThreads>(threads);
  return stages;
}

bool DeliveryStages::Applies(std::size_t route) const {
  return route < routes_.size() &&
         (routes_[route].route.has_value() || routes_[route].destination != nullptr);
}

void DeliveryStages::Apply(std::span<const Message> messages, std::span<Result> results) const {
  threads_->Run(messages.size(), [&](std::size_t i) {
    const Message& m = messages[i];
    if (m.route >= routes_.size()) {
      results[i] = Result{};  // no stage: the payload as is
      return;
    }
    const RouteStages& rs = routes_[m.route];
    results[i] = ApplyDeliveryStages(rs.route ? &*rs.route : nullptr, rs.destination, *m.row);
  });
}

Status CheckTransforms(const Config& config) {
  Plan plan = MakePlan(config);
  if (PlanIsEmpty(plan)) return Status::Ok();
  std::vector<std::unique_ptr<Stage>> destinations;
  std::vector<std::optional<Stage>> routes;
  return CompilePlan(plan, &destinations, &routes);
}

int DefaultEvaluationThreads(int workers) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::clamp(cores, 1, std::max(1, workers));
}

}  // namespace queuebox::transform
