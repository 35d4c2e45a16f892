#include "core/transform_options.h"

namespace queuebox {

const OptionTable<TransformConfig>& TransformOptions() {
  using S = TransformConfig;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Text("expression", &S::expression, nullptr,
                "JSONata expression; `$` is the input, `$messageId`, `$topic`, `$attempt`, "
                "`$timestamp` the stage's variables. Compiled at start: a syntax error stops it")
          .Required(),
      opt::Millis("timeoutMs", &S::timeout_ms, 100,
                  "Wall-clock limit of one evaluation; past it the evaluation fails")
          .Min(1),
      opt::Int("maxDepth", &S::max_depth, 100,
               "Depth limit of one evaluation (JSONata's evaluation frames)")
          .Min(1),
      opt::Choice("onError", &S::on_error, {"Fail", "Skip", "Dead"}, "Fail",
                  "What a failed evaluation does (exact case). Route/destination: Fail retries "
                  "the delivery, Skip delivers the stage's input, Dead marks the row dead"),
  };
  return *table;
}

}  // namespace queuebox
