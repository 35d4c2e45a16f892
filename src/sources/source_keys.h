// source_keys.h: the keys every source kind takes (QueueBox reference §9.4, §11.2, §11.4, §11.5)
// and the keys every broker kind adds (§11.3), with their option tables and the start-up checks
// the kinds share. Each kind nests these tables into its own (sources/<kind>/<kind>_settings.h).
//
// Thread-safety: every table is built once and immutable; the checks are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/options.h"

// The settings structs live in namespace queuebox, as the destinations' do; the tables and checks
// in queuebox::sources.
namespace queuebox {

// The keys of every kind, bound from sources.<name>.*. A list of paths is tried in order; the
// first that gives a value wins.
struct SourceKeys {
  std::string consumption = "push";                // push | pull, stored on the row at receipt
  std::vector<std::string> aggregate_id_path;      // aggregateIdPath: definite JSONPath(s)
  std::vector<std::string> event_type_path;        // eventTypePath
  std::optional<std::string> scheduled_at_header;  // scheduledAtHeader: publish time
  std::vector<std::string> scheduled_at_path;      // scheduledAtPath
  std::optional<int64_t> initial_delay_ms;         // initialDelay (<int><s|m|h|d>)
  nlohmann::json filter;  // null, or {"require": [rules], "exclude": [rules]} (§11.2)
  // JSONata on the original body (QueueBox reference §11.4): tried before the paths.
  std::optional<std::string> idempotency_key_expression;  // idempotencyKeyExpression
  std::optional<std::string> aggregate_id_expression;     // aggregateIdExpression
  std::optional<std::string> event_type_expression;       // eventTypeExpression
  // sources.<name>.transform: rewrites the stored payload after the keys were read (§8).
  std::optional<TransformConfig> transform;
};

// Header names a broker source reads its keys from (attributeHeaders.*; QueueBox reference §9.4).
// Matched in any letter case; values trimmed; an empty value counts as missing.
struct AttributeHeaders {
  std::string idempotency_key = "x-idempotency-key";
  std::string aggregate_id = "x-aggregate-id";
  std::string event_type = "x-event-type";
};

// The keys of every broker kind (QueueBox reference §11.3, §11.4), bound from sources.<name>.*.
struct BrokerSourceKeys {
  std::string topic = "{{ source }}";                        // the relay's topic template
  std::vector<std::string> idempotency_key_path = {"$.id"};  // idempotencyKeyPath
  bool event_type_from_header = false;  // eventTypeFromHeader: read attributeHeaders.eventType
  AttributeHeaders attribute_headers;
  SourceKeys keys;
};

}  // namespace queuebox

namespace queuebox::sources {

const OptionTable<SourceKeys>& SourceKeyOptions();
const OptionTable<BrokerSourceKeys>& BrokerKeyOptions();

// A path key: one definite JSONPath, or a list of them (first non-empty wins). The block
// validator checks the form; an environment variable sets one path.
template <typename S>
Option<S> PathsOption(std::string key, std::vector<std::string> S::*member,
                      std::string description) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = OptionType::kAny;
  spec.description = std::move(description);
  return opt::Custom<S>(
      std::move(spec),
      [member](S& s, const nlohmann::json& v) {
        if (v.is_string()) {
          s.*member = {v.get<std::string>()};
        } else {
          s.*member = v.get<std::vector<std::string>>();
        }
      },
      [member](const S& s) {
        return (s.*member).empty() ? nlohmann::json() : nlohmann::json(s.*member);
      });
}

// The checks of the kinds' block validators ("key: reason", relative to the block; defaults
// filled).
// True when `s` is empty or only blanks.
bool IsBlank(const std::string& s);
// True when the block sets `key` to something other than null or [].
bool HasKey(const nlohmann::json& block, const char* key);
// The checks of §11.4 every kind shares: paths definite, a push topic that renders
// {{ eventType }} has a source of event types (`event_type_keys`, named in the message),
// publish-time keys need initialDelay, the filter.
void CheckCommonKeys(const nlohmann::json& block, const std::vector<const char*>& event_type_keys,
                     std::vector<std::string>& problems);
// The checks every broker kind shares: attribute header names not blank, then the common keys.
void CheckBrokerKeys(const nlohmann::json& block, std::vector<std::string>& problems);

}  // namespace queuebox::sources
