// sources.cc: the sources.<name> option tables and their start-up checks (QueueBox reference
// §9.4, §11.1, §11.2, §11.4, §11.5, §12.2).
#include "config/sources.h"

#include <algorithm>
#include <cctype>

#include "core/header_filter.h"
#include "core/json_path.h"

namespace queuebox::cfg {
namespace {

using nlohmann::json;

// A path key: one definite JSONPath, or a list of them (first non-empty wins). The block
// validator checks the form; an environment variable sets one path.
template <typename S>
Option<S> Paths(std::string key, std::vector<std::string> S::*member, std::string description) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = OptionType::kAny;
  spec.description = std::move(description);
  return opt::Custom<S>(
      std::move(spec),
      [member](S& s, const json& v) {
        if (v.is_string()) {
          s.*member = {v.get<std::string>()};
        } else {
          s.*member = v.get<std::vector<std::string>>();
        }
      },
      [member](const S& s) { return (s.*member).empty() ? json() : json(s.*member); });
}

// A key that this build declares but refuses (it needs the transforms issue).
template <typename S>
Option<S> Refused(std::string key, std::string description) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = OptionType::kAny;
  spec.description = std::move(description) + ": " + kNeedsTransforms;
  return opt::Custom<S>(
      std::move(spec), [](S&, const json&) {}, [](const S&) { return json(); });
}

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

const char* const kRefusedKeys[] = {"idempotencyKeyExpression", "aggregateIdExpression",
                                    "eventTypeExpression", "transform"};

bool Blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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

bool Has(const json& block, const char* key) {
  return block.contains(key) && !block[key].is_null() &&
         !(block[key].is_array() && block[key].empty());
}

// The checks of §11.4 that need only the http block (defaults filled).
std::vector<std::string> CheckHttpSource(const json& block) {
  std::vector<std::string> problems;
  for (const char* key : kRefusedKeys) {
    if (Has(block, key)) problems.push_back(std::string(key) + ": " + kNeedsTransforms);
  }
  const std::string path = block.value("path", std::string());
  if (path.empty() || path[0] != '/') {
    problems.push_back("path: must start with / (the route is inbox.basePath + path)");
  } else if (path.find_first_of("?# \t") != std::string::npos) {
    problems.push_back("path: must not hold ?, #, or blanks");
  }
  for (const char* key :
       {"idempotencyKeyPath", "aggregateIdPath", "eventTypePath", "scheduledAtPath"}) {
    CheckPaths(block, key, problems);
  }
  const bool key_path = Has(block, "idempotencyKeyPath");
  const bool key_header = Has(block, "idempotencyKeyHeader");
  if (!key_path && !key_header) {
    problems.push_back(
        "idempotencyKeyPath: required for an http source (or set idempotencyKeyHeader)");
  }
  // Key headers: never a credential header (those are never stored), never blank.
  std::vector<std::string> credentials = {"authorization", "proxy-authorization", "cookie"};
  if (block.contains("auth") && block["auth"].is_object()) {
    const json& auth = block["auth"];
    std::string type = auth.value("type", std::string());
    if (type == "api-key" || type == "hmac") {
      credentials.push_back(Lower(auth.value("headerName", std::string())));
    }
  }
  for (const char* key :
       {"idempotencyKeyHeader", "aggregateIdHeader", "eventTypeHeader", "scheduledAtHeader"}) {
    if (!block.contains(key) || block[key].is_null()) continue;
    const std::string name = block[key].get<std::string>();
    if (Blank(name)) {
      problems.push_back(std::string(key) + ": must name a header (it is blank)");
    } else if (std::find(credentials.begin(), credentials.end(), Lower(name)) !=
               credentials.end()) {
      problems.push_back(std::string(key) + ": " + name +
                         " carries a credential, which QueueBox never stores; read the key from "
                         "another header or the body");
    }
  }
  const std::string consumption = block.value("consumption", std::string("push"));
  const std::string topic = block.value("topic", std::string());
  if (consumption == "push") {
    if (Blank(topic)) {
      problems.push_back("topic: must not be blank on a push source (the relay's outbox topic)");
    } else if (topic.find("eventType") != std::string::npos && !Has(block, "eventTypePath") &&
               !Has(block, "eventTypeHeader")) {
      problems.push_back(
          "topic: renders {{ eventType }}, so the source needs eventTypePath or eventTypeHeader "
          "(a message without an event type would go dead)");
    }
  }
  const bool publish_time = Has(block, "scheduledAtHeader") || Has(block, "scheduledAtPath");
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
  return problems;
}

OptionTable<SourceKeys> BuildKeyOptions() {
  using S = SourceKeys;
  OptionTable<S> t = {
      opt::Choice("consumption", &S::consumption, {"push", "pull"}, "push",
                  "push: the inbox relay forwards the row to the outbox; pull: a pull worker "
                  "claims it. Stored on the row at receipt"),
      Paths("aggregateIdPath", &S::aggregate_id_path,
            "JSONPath(s) of the aggregate id (the outbox key the relay writes)"),
      Paths("eventTypePath", &S::event_type_path, "JSONPath(s) of the event type"),
      opt::Text("scheduledAtHeader", &S::scheduled_at_header, nullptr,
                "Header with the publish time (epoch s or ms, or ISO-8601); needs initialDelay"),
      Paths("scheduledAtPath", &S::scheduled_at_path,
            "JSONPath(s) of the publish time; needs initialDelay"),
      opt::Duration("initialDelay", &S::initial_delay_ms, nullptr,
                    "Hold each row this long: scheduled_at = min(publish time, receipt) + delay"),
      AnyBlock("filter", &S::filter,
               "Header filter: require/exclude lists of rules (header + equals, in, matches or "
               "exists: true); a dropped message gets 202 filtered and no row"),
  };
  for (const char* key : kRefusedKeys) {
    t.Add(Refused<S>(key, std::string(key) == "transform" ? "JSONata rewrite of the payload"
                                                          : "JSONata key expression"));
  }
  return t;
}

OptionTable<HttpSourceSettings> BuildHttpOptions() {
  using S = HttpSourceSettings;
  OptionTable<S> t = {
      opt::Text("path", &S::path, nullptr,
                "Route path after inbox.basePath (/stripe answers POST /inbox/stripe)")
          .Required(),
      opt::Text("topic", &S::topic, "{{ eventType }}",
                "Outbox topic the relay writes: {{ eventType }} and {{ source }} render"),
      Paths("idempotencyKeyPath", &S::idempotency_key_path,
            "JSONPath(s) of the idempotency key; a request without a key gets 400"),
      opt::Text("idempotencyKeyHeader", &S::idempotency_key_header, nullptr,
                "Header with the idempotency key; tried before idempotencyKeyPath"),
      opt::Text("aggregateIdHeader", &S::aggregate_id_header, nullptr,
                "Header with the aggregate id; tried before aggregateIdPath"),
      opt::Text("eventTypeHeader", &S::event_type_header, nullptr,
                "Header with the event type; tried before eventTypePath"),
      opt::Int("rateLimit.requestsPerMinute", &S::requests_per_minute, nullptr,
               "Requests per 60 s for the whole source (a token bucket); more get 429")
          .Min(1),
      opt::TypedBlock("auth", &S::auth, AdminAuthVariants(),
                      "Authentication of each request: bearer, api-key or hmac (as admin.auth)"),
  };
  t.Nest("", &S::keys, SourceKeyOptions());
  return t;
}

}  // namespace

const OptionTable<SourceKeys>& SourceKeyOptions() {
  static const OptionTable<SourceKeys>* const t = new OptionTable<SourceKeys>(BuildKeyOptions());
  return *t;
}

const OptionTable<HttpSourceSettings>& HttpSourceOptions() {
  static const OptionTable<HttpSourceSettings>* const t =
      new OptionTable<HttpSourceSettings>(BuildHttpOptions());
  return *t;
}

const std::vector<Variant>& SourceVariants() {
  static const std::vector<Variant>* const v = new std::vector<Variant>{
      Variant{"http", HttpSourceOptions().specs(), &CheckHttpSource, nullptr},
  };
  return *v;
}

std::string KnownSourceTypes() { return KnownTypes(SourceVariants()); }

Result<HttpSourceSettings> BindHttpSource(const SourceConfig& source) {
  if (source.type != "http") {
    return InvalidArgument("sources." + source.name + " is of type " + source.type + ", not http");
  }
  HttpSourceSettings s;
  s.name = source.name;
  QB_RETURN_IF_ERROR(HttpSourceOptions().Bind(source.options, s, "sources." + source.name));
  return s;
}

}  // namespace queuebox::cfg
