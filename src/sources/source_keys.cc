// source_keys.cc: the tables of the keys every kind takes, and the checks the kinds share
// (QueueBox reference §9.4, §11.2, §11.3, §11.4, §11.5).
#include "sources/source_keys.h"

#include <algorithm>
#include <cctype>

#include "core/header_filter.h"
#include "core/json_path.h"
#include "core/transform_options.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

template <typename S>
Option<S> AnyBlock(std::string key, json S::*member, std::string description) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = OptionType::kAny;
  spec.description = std::move(description);
  return opt::Custom<S>(
      std::move(spec), [member](S& s, const json& v) { s.*member = v; },
      [member](const S& s) { return s.*member; });
}

// "key: reason" problems of a path key's value (absent is fine).
void CheckPaths(const json& block, const char* key, std::vector<std::string>& problems) {
  if (!block.contains(key) || block[key].is_null()) return;
  const json& v = block[key];
  std::vector<std::string> paths;
  if (v.is_string()) {
    paths = {v.get<std::string>()};
  } else if (v.is_array() && !v.empty() &&
             std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); })) {
    paths = v.get<std::vector<std::string>>();
  } else {
    problems.push_back(std::string(key) +
                       ": must be a JSONPath such as $.id, or a non-empty list of them");
    return;
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    auto p = JsonPath::Compile(paths[i]);
    if (!p.ok()) {
      problems.push_back(std::string(key) + (v.is_array() ? "[" + std::to_string(i) + "]" : "") +
                         ": " + p.status().message());
    }
  }
}

// A push topic that renders {{ eventType }} needs a source of event types.
void CheckTopic(const json& block, const std::vector<const char*>& event_type_keys,
                std::vector<std::string>& problems) {
  const std::string consumption = block.value("consumption", std::string("push"));
  const std::string topic = block.value("topic", std::string());
  if (consumption != "push") return;
  if (IsBlank(topic)) {
    problems.push_back("topic: must not be blank on a push source (the relay's outbox topic)");
    return;
  }
  const bool has_event_type =
      std::any_of(event_type_keys.begin(), event_type_keys.end(), [&block](const char* k) {
        return HasKey(block, k) && !(block[k].is_boolean() && !block[k].get<bool>());
      });
  if (topic.find("eventType") == std::string::npos || has_event_type) return;
  std::string names;
  for (size_t i = 0; i < event_type_keys.size(); ++i) {
    names += (i == 0 ? "" : i + 1 == event_type_keys.size() ? " or " : ", ");
    names += event_type_keys[i];
    if (std::string(event_type_keys[i]) == "eventTypeFromHeader") names += ": true";
  }
  problems.push_back("topic: renders {{ eventType }}, so the source needs " + names +
                     " (a message without an event type would go dead)");
}

OptionTable<SourceKeys> BuildKeyOptions() {
  using S = SourceKeys;
  OptionTable<S> t = {
      opt::Choice("consumption", &S::consumption, {"push", "pull"}, "push",
                  "push: the inbox relay forwards the row to the outbox; pull: a pull worker "
                  "claims it. Stored on the row at receipt"),
      PathsOption("aggregateIdPath", &S::aggregate_id_path,
                  "JSONPath(s) of the aggregate id (the outbox key the relay writes)"),
      PathsOption("eventTypePath", &S::event_type_path, "JSONPath(s) of the event type"),
      opt::Text("scheduledAtHeader", &S::scheduled_at_header, nullptr,
                "Header with the publish time (epoch s or ms, or ISO-8601); needs initialDelay"),
      PathsOption("scheduledAtPath", &S::scheduled_at_path,
                  "JSONPath(s) of the publish time; needs initialDelay"),
      opt::Duration("initialDelay", &S::initial_delay_ms, nullptr,
                    "Hold each row this long: scheduled_at = min(publish time, receipt) + delay"),
      AnyBlock("filter", &S::filter,
               "Header filter: require/exclude lists of rules (header + equals, in, matches or "
               "exists: true); a dropped message gets 202 filtered and no row"),
  };
  t.Add(opt::Text("idempotencyKeyExpression", &S::idempotency_key_expression, nullptr,
                  "JSONata giving the idempotency key from the body; tried before the path"));
  t.Add(opt::Text("aggregateIdExpression", &S::aggregate_id_expression, nullptr,
                  "JSONata giving the aggregate id from the body; tried before the path"));
  t.Add(opt::Text("eventTypeExpression", &S::event_type_expression, nullptr,
                  "JSONata giving the event type from the body; tried before the path"));
  t.Add(opt::Block("transform", &S::transform, TransformOptions(),
                   "JSONata rewrite of the stored payload, after the keys were read"));
  return t;
}

const OptionTable<AttributeHeaders>& AttributeHeaderOptions() {
  using S = AttributeHeaders;
  static const OptionTable<S>* const t = new OptionTable<S>{
      opt::Text("idempotencyKey", &S::idempotency_key, "x-idempotency-key",
                "Header with the idempotency key (tried first)"),
      opt::Text("aggregateId", &S::aggregate_id, "x-aggregate-id",
                "Header with the aggregate id (after aggregateIdPath)"),
      opt::Text("eventType", &S::event_type, "x-event-type",
                "Header with the event type (with eventTypeFromHeader)"),
  };
  return *t;
}

OptionTable<BrokerSourceKeys> BuildBrokerKeyOptions() {
  using S = BrokerSourceKeys;
  OptionSpec key_paths;
  key_paths.key = "idempotencyKeyPath";
  key_paths.type = OptionType::kAny;
  key_paths.default_value = "$.id";
  key_paths.description =
      "JSONPath(s) of the idempotency key; then the broker's message id, then sha256 of the body";
  OptionTable<S> t = {
      opt::Text("topic", &S::topic, "{{ source }}",
                "Outbox topic the relay writes: {{ source }} and {{ eventType }} render"),
      opt::Custom<S>(
          std::move(key_paths),
          [](S& s, const json& v) {
            if (v.is_string()) {
              s.idempotency_key_path = {v.get<std::string>()};
            } else {
              s.idempotency_key_path = v.get<std::vector<std::string>>();
            }
          },
          [](const S& s) {
            return s.idempotency_key_path.size() == 1 ? json(s.idempotency_key_path[0])
                                                      : json(s.idempotency_key_path);
          }),
      opt::Flag("eventTypeFromHeader", &S::event_type_from_header, false,
                "Read the event type from attributeHeaders.eventType when no path gives one"),
  };
  t.Nest("attributeHeaders", &S::attribute_headers, AttributeHeaderOptions());
  t.Nest("", &S::keys, SourceKeyOptions());
  return t;
}

}  // namespace

const OptionTable<SourceKeys>& SourceKeyOptions() {
  static const OptionTable<SourceKeys>* const t = new OptionTable<SourceKeys>(BuildKeyOptions());
  return *t;
}

const OptionTable<BrokerSourceKeys>& BrokerKeyOptions() {
  static const OptionTable<BrokerSourceKeys>* const t =
      new OptionTable<BrokerSourceKeys>(BuildBrokerKeyOptions());
  return *t;
}

bool IsBlank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

bool HasKey(const json& block, const char* key) {
  return block.contains(key) && !block[key].is_null() &&
         !(block[key].is_array() && block[key].empty());
}

void CheckCommonKeys(const json& block, const std::vector<const char*>& event_type_keys,
                     std::vector<std::string>& problems) {
  for (const char* key :
       {"idempotencyKeyPath", "aggregateIdPath", "eventTypePath", "scheduledAtPath"}) {
    CheckPaths(block, key, problems);
  }
  CheckTopic(block, event_type_keys, problems);
  const bool publish_time = HasKey(block, "scheduledAtHeader") || HasKey(block, "scheduledAtPath");
  const int64_t delay = block.contains("initialDelay") && block["initialDelay"].is_number()
                            ? block["initialDelay"].get<int64_t>()
                            : 0;
  if (publish_time && delay <= 0) {
    problems.push_back(
        "initialDelay: scheduledAtHeader and scheduledAtPath need initialDelay above 0 "
        "(scheduled_at = min(publish time, receipt) + initialDelay)");
  }
  if (block.contains("initialDelay") && block["initialDelay"].is_number() && delay < 0) {
    problems.push_back("initialDelay: must not be negative");
  }
  for (const std::string& p : HeaderFilter::Problems(block.value("filter", json()))) {
    problems.push_back("filter." + p);
  }
}

void CheckBrokerKeys(const json& block, std::vector<std::string>& problems) {
  for (const char* key : {"attributeHeaders.idempotencyKey", "attributeHeaders.aggregateId",
                          "attributeHeaders.eventType", "scheduledAtHeader"}) {
    const std::string k(key);
    const size_t dot = k.find('.');
    const json* v = &block;
    if (dot != std::string::npos) {
      if (!block.contains(k.substr(0, dot)) || !block[k.substr(0, dot)].is_object()) continue;
      v = &block[k.substr(0, dot)];
    }
    const std::string leaf = dot == std::string::npos ? k : k.substr(dot + 1);
    if (!v->contains(leaf) || (*v)[leaf].is_null() || !(*v)[leaf].is_string()) continue;
    if (IsBlank((*v)[leaf].get<std::string>())) {
      problems.push_back(k + ": must name a header (it is blank)");
    }
  }
  CheckCommonKeys(block, {"eventTypePath", "eventTypeExpression", "eventTypeFromHeader"}, problems);
}

}  // namespace queuebox::sources
