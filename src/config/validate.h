// validate.h: the generic checks behind LoadConfig: values against an OptionSpec, blocks against
// an option table (unknown keys with a did-you-mean, defaults, required keys), typed blocks
// (variants) and the collected error message (QueueBox reference §12.1 "Strict").
//
// Thread-safety: functions are pure; a Diagnostics belongs to one load.
#pragma once

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/schema.h"
#include "queuebox/options.h"
#include "queuebox/status.h"

namespace queuebox::cfg {

// Every problem of one load, each "<yaml path>[ (<env var>)]: <reason>".
class Diagnostics {
 public:
  // Records that the value at `path` came from environment variable `var`.
  void SetSource(const std::string& path, const std::string& var) { sources_[path] = var; }
  const std::string* SourceOf(const std::string& path) const;
  void Add(const std::string& path, const std::string& reason);
  size_t size() const { return errors_.size(); }
  bool empty() const { return errors_.empty(); }
  // kInvalidArgument: "The configuration has N errors. Fix each one and start QueueBox
  // again.\n  - a: b\n  - c: d" (singular for one error).
  Status ToStatus() const;

 private:
  std::map<std::string, std::string> sources_;
  std::vector<std::string> errors_;
};

std::string JoinPath(const std::string& base, const std::string& key);
std::string IndexPath(const std::string& base, size_t index);

// Lower case with '-' and '_' removed: the key comparison of QueueBox's env loader.
std::string NormalizeKey(std::string_view key);
// Edit distance between a and b when it is at most `limit`, else limit + 1 (the cost is
// O(|a| * limit)).
size_t Levenshtein(std::string_view a, std::string_view b, size_t limit);
// The closest candidate (case-insensitive edit distance, at most min(max(1, len/3), 8)), if any.
// A candidate equal to `key` under NormalizeKey is at distance 0; the first closest one wins.
std::optional<std::string> DidYouMean(const std::string& key,
                                      const std::vector<std::string>& candidates);

// DidYouMean one candidate at a time (no list to build): Offer each candidate in order, then
// best() is what DidYouMean(key, those candidates) returns. A candidate whose length rules it out
// costs no allocation and no distance.
class Suggester {
 public:
  explicit Suggester(std::string_view key);
  void Offer(std::string_view candidate);
  const std::optional<std::string>& best() const { return best_; }

 private:
  std::string lower_key_, normal_key_, lower_candidate_;
  std::vector<size_t> prev_, cur_;  // the distance's rows, reused
  size_t best_distance_;            // a candidate must come closer than this
  std::optional<std::string> best_;
};
// ^[a-zA-Z_][a-zA-Z0-9_]*$: what OptionSpec::identifier values must match.
bool IsSqlIdentifier(std::string_view s);
// "a, b, c".
std::string JoinNames(const std::vector<std::string>& names);

// Checks one value against its spec (secrets read from file:, durations to ms, scalars from
// environment strings coerced). nullopt after adding an error to `d`.
std::optional<nlohmann::json> ValidateValue(const nlohmann::json& value, const OptionSpec& spec,
                                            const std::string& path, Diagnostics& d);

struct TableRules {
  std::vector<std::string> reserved;  // dotted keys the caller checks itself
  // The reason for an unknown dotted key when something better than did-you-mean fits.
  std::function<std::optional<std::string>(const std::string& key)> unknown_reason;
};

// Checks `block` (an object or null) against `table` and returns the validated block: nested by
// the dotted keys, defaults filled, reserved keys left out.
nlohmann::json ValidateTable(const nlohmann::json& block, const std::vector<OptionSpec>& table,
                             const TableRules& rules, const std::string& path, Diagnostics& d);

// A block selected by its `type` among `variants`, plus `common` keys for every type. `what`
// names the blocks for messages ("destination"). Runs the variant's BlockValidator when the block
// had no other problem. Returns nullopt (errors added) or {type, validated block without type}.
struct VariantResult {
  std::string type;
  nlohmann::json block;
};
std::optional<VariantResult> ValidateVariant(const nlohmann::json& block,
                                             const std::vector<Variant>& variants,
                                             const std::vector<OptionSpec>& common,
                                             const std::string& known_types,
                                             const std::string& path, Diagnostics& d);

}  // namespace queuebox::cfg
