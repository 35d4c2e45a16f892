// sources.cc: the sources.<name> option tables and their start-up checks (QueueBox reference
// §9.4, §11.1, §11.2, §11.4, §11.5, §12.2).
#include "config/sources.h"

#include <algorithm>
#include <cctype>

#include "auth/auth_schemes.h"
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

// The checks of §11.4 every kind shares (defaults filled): paths definite,
// a push topic that renders {{ eventType }} has a source of event types (`event_type_keys`,
// named in the message), publish-time keys need initialDelay, the filter.
void CheckCommonKeys(const json& block, const std::vector<const char*>& event_type_keys,
                     std::vector<std::string>& problems) {
  for (const char* key :
       {"idempotencyKeyPath", "aggregateIdPath", "eventTypePath", "scheduledAtPath"}) {
    CheckPaths(block, key, problems);
  }
  const std::string consumption = block.value("consumption", std::string("push"));
  const std::string topic = block.value("topic", std::string());
  if (consumption == "push") {
    if (Blank(topic)) {
      problems.push_back("topic: must not be blank on a push source (the relay's outbox topic)");
    } else if (topic.find("eventType") != std::string::npos &&
               std::none_of(
                   event_type_keys.begin(), event_type_keys.end(), [&block](const char* k) {
                     return Has(block, k) && !(block[k].is_boolean() && !block[k].get<bool>());
                   })) {
      std::string names;
      for (size_t i = 0; i < event_type_keys.size(); ++i) {
        names += (i == 0 ? "" : i + 1 == event_type_keys.size() ? " or " : ", ");
        names += event_type_keys[i];
        if (std::string(event_type_keys[i]) == "eventTypeFromHeader") names += ": true";
      }
      problems.push_back("topic: renders {{ eventType }}, so the source needs " + names +
                         " (a message without an event type would go dead)");
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
}

// The checks of §11.4 that need only the http block (defaults filled).
std::vector<std::string> CheckHttpSource(const json& block) {
  std::vector<std::string> problems;
  const std::string path = block.value("path", std::string());
  if (path.empty() || path[0] != '/') {
    problems.push_back("path: must start with / (the route is inbox.basePath + path)");
  } else if (path.find_first_of("?# \t") != std::string::npos) {
    problems.push_back("path: must not hold ?, #, or blanks");
  }
  if (!Has(block, "idempotencyKeyPath") && !Has(block, "idempotencyKeyHeader") &&
      !Has(block, "idempotencyKeyExpression")) {
    problems.push_back(
        "idempotencyKeyPath: required for an http source (or set idempotencyKeyHeader or "
        "idempotencyKeyExpression)");
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
  CheckCommonKeys(block, {"eventTypePath", "eventTypeExpression", "eventTypeHeader"}, problems);
  return problems;
}

// The checks every broker kind shares: header names not blank, then the common keys.
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
    if (Blank((*v)[leaf].get<std::string>())) {
      problems.push_back(k + ": must name a header (it is blank)");
    }
  }
  CheckCommonKeys(block, {"eventTypePath", "eventTypeExpression", "eventTypeFromHeader"}, problems);
}

std::vector<std::string> CheckRabbitmqSource(const json& block) {
  std::vector<std::string> problems;
  for (const char* key : {"queueName", "connectionUrl"}) {
    if (block.contains(key) && block[key].is_string() && Blank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  if (block.contains("connectionUrl") && block["connectionUrl"].is_string()) {
    const std::string url = block["connectionUrl"].get<std::string>();
    if (url.rfind("amqp://", 0) != 0 && url.rfind("amqps://", 0) != 0) {
      problems.push_back("connectionUrl: must be an amqp:// or amqps:// URL");
    }
  }
  CheckBrokerKeys(block, problems);
  return problems;
}

std::vector<std::string> CheckKafkaSource(const json& block) {
  std::vector<std::string> problems;
  if (block.contains("topics") && block["topics"].is_array()) {
    const json& topics = block["topics"];
    if (topics.empty()) problems.push_back("topics: must name at least one topic");
    for (size_t i = 0; i < topics.size(); ++i) {
      if (!topics[i].is_string() || Blank(topics[i].get<std::string>())) {
        problems.push_back("topics[" + std::to_string(i) + "]: must not be blank");
      }
    }
  }
  for (const char* key : {"bootstrapServers", "groupId"}) {
    if (block.contains(key) && block[key].is_string() && Blank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  const std::string protocol = block.value("securityProtocol", std::string("PLAINTEXT"));
  if (protocol.rfind("SASL_", 0) == 0) {
    for (const char* key : {"saslMechanism", "saslUsername", "saslPassword"}) {
      if (!Has(block, key)) {
        problems.push_back(std::string(key) + ": required when securityProtocol is " + protocol +
                           " (saslMechanism, saslUsername and saslPassword go together)");
      }
    }
  }
  CheckBrokerKeys(block, problems);
  return problems;
}

std::vector<std::string> CheckNatsSource(const json& block) {
  std::vector<std::string> problems;
  for (const char* key : {"servers", "stream", "durable"}) {
    if (block.contains(key) && block[key].is_string() && Blank(block[key].get<std::string>())) {
      problems.push_back(std::string(key) + ": must not be blank");
    }
  }
  if (Has(block, "username") != Has(block, "password")) {
    problems.push_back("password: username and password go together");
  }
  if (Has(block, "token") && Has(block, "username")) {
    problems.push_back("token: use a token or a username and password, not both");
  }
  CheckBrokerKeys(block, problems);
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
      opt::TypedBlock("auth", &S::auth, AuthVariants(),
                      "Authentication of each request: bearer, api-key or hmac (as admin.auth)"),
  };
  t.Nest("", &S::keys, SourceKeyOptions());
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

OptionTable<RabbitmqSourceSettings> BuildRabbitmqOptions() {
  using S = RabbitmqSourceSettings;
  OptionTable<S> t = {
      opt::Text("queueName", &S::queue_name, nullptr, "Queue to consume").Required(),
      opt::Text("connectionUrl", &S::connection_url, nullptr,
                "amqp://user:password@host:port/vhost of the broker")
          .Required(),
      opt::Int("prefetchCount", &S::prefetch_count, 10,
               "Unacknowledged deliveries at most (basic.qos); also the stored batch")
          .Range(1, 65535),
      opt::Flag("declareQueue", &S::declare_queue, false,
                "Declare a durable queue; false: a missing queue stops the source with an error"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
  return t;
}

OptionTable<KafkaSourceSettings> BuildKafkaOptions() {
  using S = KafkaSourceSettings;
  OptionTable<S> t = {
      opt::Text("bootstrapServers", &S::bootstrap_servers, nullptr,
                "Comma-separated host:port list of Kafka brokers")
          .Required(),
      opt::TextList("topics", &S::topics, nullptr, "Topics to consume").Required(),
      opt::Text("groupId", &S::group_id, nullptr,
                "Consumer group; replicas with one group share the partitions")
          .Required(),
      opt::Choice("autoOffsetReset", &S::auto_offset_reset, {"earliest", "latest"}, "earliest",
                  "Where a group without a committed offset starts"),
      opt::Int("maxPollRecords", &S::max_poll_records, 100, "Records per stored batch at most")
          .Range(1, 100000),
      opt::Choice("securityProtocol", &S::security_protocol,
                  {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}, "PLAINTEXT",
                  "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
      opt::Text("saslMechanism", &S::sasl_mechanism, nullptr,
                "SASL mechanism (e.g. PLAIN, SCRAM-SHA-512)"),
      opt::Text("saslUsername", &S::sasl_username, nullptr, "SASL username"),
      opt::Secret("saslPassword", &S::sasl_password, "SASL password (secret; file: allowed)"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
  return t;
}

OptionTable<NatsSourceSettings> BuildNatsOptions() {
  using S = NatsSourceSettings;
  OptionTable<S> t = {
      opt::Text("servers", &S::servers, nullptr, "Comma-separated nats:// server URLs").Required(),
      opt::Text("stream", &S::stream, nullptr, "JetStream stream (never created by QueueBox)")
          .Required(),
      opt::Text("durable", &S::durable, nullptr,
                "Durable pull consumer; replicas with one name share the work")
          .Required(),
      opt::Text("filterSubject", &S::filter_subject, nullptr,
                "Subject filter of the consumer (e.g. orders.>)"),
      opt::Millis("ackWaitMs", &S::ack_wait_ms, 30000,
                  "Redelivery of an unacknowledged message after this many ms")
          .Min(1),
      opt::Int("batchSize", &S::batch_size, 100, "Messages per fetch (and per stored batch)")
          .Range(1, 10000),
      opt::Text("username", &S::username, nullptr, "User name"),
      opt::Secret("password", &S::password, "Password (secret; file: allowed)"),
      opt::Secret("token", &S::token, "Token (secret; file: allowed)"),
  };
  t.Nest("", &S::broker, BrokerKeyOptions());
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

const OptionTable<BrokerSourceKeys>& BrokerKeyOptions() {
  static const OptionTable<BrokerSourceKeys>* const t =
      new OptionTable<BrokerSourceKeys>(BuildBrokerKeyOptions());
  return *t;
}

const OptionTable<RabbitmqSourceSettings>& RabbitmqSourceOptions() {
  static const OptionTable<RabbitmqSourceSettings>* const t =
      new OptionTable<RabbitmqSourceSettings>(BuildRabbitmqOptions());
  return *t;
}

const OptionTable<KafkaSourceSettings>& KafkaSourceOptions() {
  static const OptionTable<KafkaSourceSettings>* const t =
      new OptionTable<KafkaSourceSettings>(BuildKafkaOptions());
  return *t;
}

const OptionTable<NatsSourceSettings>& NatsSourceOptions() {
  static const OptionTable<NatsSourceSettings>* const t =
      new OptionTable<NatsSourceSettings>(BuildNatsOptions());
  return *t;
}

const std::vector<Variant>& SourceVariants() {
  static const std::vector<Variant>* const v = new std::vector<Variant>{
      Variant{"http", HttpSourceOptions().specs(), &CheckHttpSource, nullptr},
      Variant{"kafka", KafkaSourceOptions().specs(), &CheckKafkaSource, nullptr},
      Variant{"nats", NatsSourceOptions().specs(), &CheckNatsSource, nullptr},
      Variant{"rabbitmq", RabbitmqSourceOptions().specs(), &CheckRabbitmqSource, nullptr},
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

namespace {

template <typename S>
Result<S> BindKind(const SourceConfig& source, const char* kind, const OptionTable<S>& table) {
  if (source.type != kind) {
    return InvalidArgument("sources." + source.name + " is of type " + source.type + ", not " +
                           kind);
  }
  S s;
  s.name = source.name;
  QB_RETURN_IF_ERROR(table.Bind(source.options, s, "sources." + source.name));
  return s;
}

}  // namespace

Result<SourceKeys> BindSourceKeys(const SourceConfig& source) {
  SourceKeys keys;
  QB_RETURN_IF_ERROR(
      SourceKeyOptions().BindPresent(source.options, keys, "sources." + source.name));
  return keys;
}

Result<RabbitmqSourceSettings> BindRabbitmqSource(const SourceConfig& source) {
  return BindKind(source, "rabbitmq", RabbitmqSourceOptions());
}

Result<KafkaSourceSettings> BindKafkaSource(const SourceConfig& source) {
  return BindKind(source, "kafka", KafkaSourceOptions());
}

Result<NatsSourceSettings> BindNatsSource(const SourceConfig& source) {
  return BindKind(source, "nats", NatsSourceOptions());
}

}  // namespace queuebox::cfg
