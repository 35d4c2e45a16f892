// intake.cc: the steps of the intake pipeline (intake.h), in order, and the refusal policy.
#include "sources/intake.h"

#include <openssl/evp.h>
#include <strings.h>

#include <nlohmann/json.hpp>

#include "sources/intake_parts.h"
#include "telemetry/tracer.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

std::string Hex(const unsigned char* data, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[data[i] >> 4]);
    out.push_back(kDigits[data[i] & 0xF]);
  }
  return out;
}

std::optional<std::string> NonBlank(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  std::string t = Trimmed(*v);
  if (t.empty()) return std::nullopt;
  return t;
}

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::string Describe(const std::vector<JsonPath>& paths) {
  std::string out;
  for (const JsonPath& p : paths) out += (out.empty() ? "" : ", ") + p.text();
  return out;
}

// Where the idempotency key was looked for, for the refusal: "header X or
// idempotencyKeyExpression or $.id".
std::string Where(const KeyPlan& plan) {
  std::string out;
  for (KeyFrom from : plan.order) {
    std::string part = from == KeyFrom::kHeader       ? "header " + plan.header
                       : from == KeyFrom::kExpression ? "idempotencyKeyExpression"
                       : from == KeyFrom::kPaths      ? Describe(plan.paths)
                       : from == KeyFrom::kMessageId  ? "the message id"
                                                      : "";
    if (!part.empty()) out += (out.empty() ? "" : " or ") + part;
  }
  return out;
}

bool TooLong(const std::optional<std::string>& v) { return v && CodePoints(*v) > kMaxKeyChars; }

}  // namespace

// One message on its way through the steps.
struct Intake::Draft {
  Intaken out;
  std::string body;  // the arrival's body; becomes the payload unless a step sets one
  bool payload_set = false;
  const Arrival* arrival = nullptr;  // headers and the broker's fields (its body moved out)
  bool is_json = false;
  json document;  // the parsed body when is_json
  ExpressionValues expressed;
  std::optional<std::string> key, aggregate, event_type;
};

Intake::Intake(IntakeRules rules) : rules_(std::make_unique<const IntakeRules>(std::move(rules))) {}
Intake::~Intake() = default;
Intake::Intake(Intake&&) noexcept = default;
Intake& Intake::operator=(Intake&&) noexcept = default;

const std::string& Intake::source() const { return rules_->source; }

Intaken Intake::Receive(Arrival arrival) const {
  static constexpr Step kSteps[] = {
      &Intake::Filter,   &Intake::Correlate,      &Intake::KeepHeaders,    &Intake::GuardJson,
      &Intake::ReadKeys, &Intake::CheckKeyLength, &Intake::SetPublishTime, &Intake::Transform,
  };
  std::optional<telemetry::SpanStart> span;
  if (rules_->tracer) span = BeginSpan(arrival);
  Draft d;
  d.body = std::move(arrival.body);
  d.arrival = &arrival;
  d.out.row.source = rules_->source;
  d.out.row.consumption = rules_->consumption;
  for (Step step : kSteps) {
    if (!(this->*step)(d)) break;
  }
  if (d.out.kind == Intaken::Kind::kRow && !d.payload_set) d.out.row.payload = std::move(d.body);
  if (span) EndSpan(*span, d.out);
  return std::move(d.out);
}

std::optional<telemetry::SpanStart> Intake::BeginSpan(Arrival& arrival) const {
  std::optional<telemetry::TraceContext> parent = telemetry::FromHeaders(arrival.headers);
  std::erase_if(arrival.headers, [](const auto& h) { return telemetry::IsTraceHeader(h.first); });
  if (!parent && !rules_->tracer->start_traces()) return std::nullopt;
  telemetry::SpanStart span = telemetry::Begin(parent);
  arrival.headers.emplace_back(std::string(telemetry::kTraceparent), span.traceparent());
  if (!span.context.tracestate.empty()) {
    arrival.headers.emplace_back(std::string(telemetry::kTracestate), span.context.tracestate);
  }
  return span;
}

// One CONSUMER span per message received, by the OpenTelemetry messaging conventions.
void Intake::EndSpan(const telemetry::SpanStart& span, const Intaken& out) const {
  static constexpr std::string_view kOutcomes[] = {"stored", "filtered", "refused"};
  const bool refused = out.kind == Intaken::Kind::kRefused;
  telemetry::Attribute a[8] = {
      {"messaging.system", std::string_view(rules_->kind)},
      {"messaging.operation.name", std::string_view("receive")},
      {"messaging.operation.type", std::string_view("receive")},
      {"messaging.destination.name", std::string_view(rules_->source)},
      {"queuebox.source", std::string_view(rules_->source)},
      {"queuebox.outcome", kOutcomes[static_cast<int>(out.kind)]},
  };
  size_t n = 6;
  if (out.kind == Intaken::Kind::kRow) {
    a[n++] = {"queuebox.idempotency_key", std::string_view(out.row.idempotency_key)};
    if (out.row.correlation_id) {
      a[n++] = {"messaging.message.conversation_id", std::string_view(*out.row.correlation_id)};
    }
  }
  rules_->tracer->Record(span, {.name_prefix = "receive ",
                                .name = rules_->source,
                                .kind = telemetry::SpanKind::kConsumer,
                                .attributes = std::span(a, n),
                                .encoded_attributes = {},
                                .error = refused,
                                .status_message = refused ? std::string_view(out.error) : ""});
}

std::optional<std::string> Intake::Header(const Arrival& a, std::string_view name) const {
  if (rules_->repeated == RepeatedHeader::kFirstWins) {
    for (const auto& [n, v] : a.headers) {
      if (SameName(n, name)) return v;
    }
  } else {
    for (auto it = a.headers.rbegin(); it != a.headers.rend(); ++it) {
      if (SameName(it->first, name)) return it->second;
    }
  }
  return std::nullopt;
}

void Intake::Warn(const std::string& message, std::initializer_list<log::Field> fields) const {
  if (rules_->refusal_log != nullptr) {
    log::WriteLimited(*rules_->refusal_log, log::Level::kWarn, message, fields);
  } else {
    log::Warn(message, fields);
  }
}

bool Intake::OnFault(Draft& d, Fault fault, std::string text) const {
  const IntakeRules& r = *rules_;
  NewInboxMessage& m = d.out.row;
  if (r.policy == RefusalPolicy::kRefuse) {
    static constexpr struct {
      int status;
      const char* reason;
    } kAnswers[] = {{400, "invalid_json"},
                    {400, "extraction_failed"},
                    {400, "extraction_failed"},
                    {422, "transform_failed"}};
    const auto& answer = kAnswers[static_cast<int>(fault)];
    if (r.observer != nullptr) r.observer->OnInboxRejection(answer.reason);
    d.out.kind = Intaken::Kind::kRefused;
    d.out.status = answer.status;
    d.out.error = std::move(text);
    return false;
  }
  // kStoreDead: the first fault names the row's error; the row is stored all the same.
  if (!m.dead) m.last_error = std::move(text);
  m.dead = true;
  if (fault == Fault::kInvalidJson) {
    m.payload = json{{"raw", d.body}}.dump(-1, ' ', false, json::error_handler_t::replace);
    d.payload_set = true;
  } else if (fault == Fault::kTransformFailed) {
    m.delay_ms = 0;
    m.publish_time_ms.reset();
    if (r.observer != nullptr) r.observer->OnInboxRejection("transform_failed");
  }
  return true;
}

// 1. The header filter runs before anything is read (QueueBox reference §11.2).
bool Intake::Filter(Draft& d) const {
  const IntakeRules& r = *rules_;
  if (r.filter.empty()) return true;
  std::optional<std::string> failed =
      r.filter.FirstFailure([this, &d](std::string_view name) { return Header(*d.arrival, name); });
  if (!failed) return true;
  log::Debug(r.policy == RefusalPolicy::kRefuse ? "A webhook was filtered out."
                                                : "A message was filtered out.",
             {{"source", r.source}, {"rule", *failed}});
  d.out.kind = Intaken::Kind::kFiltered;
  d.out.filter_rule = std::move(*failed);
  return false;
}

// 2. X-Correlation-Id, the broker's correlation property, or a new id.
bool Intake::Correlate(Draft& d) const {
  std::string correlation;
  if (auto h = NonBlank(Header(*d.arrival, "X-Correlation-Id"))) {
    correlation = SanitizeCorrelationId(*h);
  }
  if (correlation.empty() && d.arrival->correlation_property) {
    correlation = SanitizeCorrelationId(*d.arrival->correlation_property);
  }
  if (correlation.empty()) correlation = NewUuid();
  d.out.row.correlation_id = std::move(correlation);
  return true;
}

// 3. The headers stored with the row.
bool Intake::KeepHeaders(Draft& d) const {
  const IntakeRules& r = *rules_;
  if (r.unstored == nullptr) {
    d.out.row.headers = StoredHeaders(d.arrival->headers, r.credential_headers);
    return true;
  }
  std::vector<std::pair<std::string, std::string>> kept;
  kept.reserve(d.arrival->headers.size());
  for (const auto& h : d.arrival->headers) {
    if (!r.unstored(h.first)) kept.push_back(h);
  }
  d.out.row.headers = StoredHeaders(kept, r.credential_headers);
  return true;
}

// 4. JSON, whatever a Content-Type says. The depth guard runs before the parser so it never
// recurses past it; no NUL, since nlohmann's lexer ends its input there (`{}\0junk` is `{}`).
bool Intake::GuardJson(Draft& d) const {
  d.is_json = IsUtf8(d.body) && d.body.find('\0') == std::string::npos &&
              JsonDepth(d.body, kMaxJsonDepth) <= kMaxJsonDepth;
  if (d.is_json) {
    d.document = json::parse(d.body, nullptr, /*allow_exceptions=*/false);
    d.is_json = !d.document.is_discarded();
  }
  if (d.is_json) return true;
  return OnFault(d, Fault::kInvalidJson,
                 rules_->policy == RefusalPolicy::kRefuse
                     ? "Invalid JSON"
                     : "The message body is not JSON; stored as {\"raw\": ...}");
}

std::optional<std::string> Intake::Read(const Draft& d, const KeyPlan& plan,
                                        const std::optional<std::string>& expressed) const {
  for (KeyFrom from : plan.order) {
    std::optional<std::string> v;
    switch (from) {
      case KeyFrom::kHeader:
        v = NonBlank(Header(*d.arrival, plan.header));
        break;
      case KeyFrom::kExpression:
        v = NonBlank(expressed);
        break;
      case KeyFrom::kPaths:
        if (d.is_json) v = FirstText(plan.paths, d.document);
        break;
      case KeyFrom::kMessageId:
        v = NonBlank(d.arrival->message_id);
        break;
      case KeyFrom::kRecordKey:
        v = NonBlank(d.arrival->record_key);
        break;
      case KeyFrom::kBodyDigest:
        v = BodyDigestKey(d.body);
        break;
    }
    if (v) return v;
  }
  return std::nullopt;
}

// 5. The keys, from the original body and the headers.
bool Intake::ReadKeys(Draft& d) const {
  const IntakeRules& r = *rules_;
  if (d.is_json && r.transforms != nullptr && r.transforms->HasKeyExpressions(r.source)) {
    d.expressed = r.transforms->EvaluateKeys(r.source, d.body);
  }
  d.key = Read(d, r.idempotency_key, d.expressed.idempotency_key);
  d.aggregate = Read(d, r.aggregate_id, d.expressed.aggregate_id);
  d.event_type = Read(d, r.event_type, d.expressed.event_type);
  if (d.key) return true;
  std::string text = "No idempotency key: " + Where(r.idempotency_key) + " gave no value";
  if (!OnFault(d, Fault::kNoKey, std::move(text))) return false;
  d.key = BodyDigestKey(d.body);
  return true;
}

// 6. A value over its column cannot be stored as is. Dead, it is kept under a digest of the long
// key, so a redelivery still finds it.
bool Intake::CheckKeyLength(Draft& d) const {
  const char* long_key = TooLong(d.key)          ? "idempotency key"
                         : TooLong(d.aggregate)  ? "aggregate id"
                         : TooLong(d.event_type) ? "event type"
                                                 : nullptr;
  if (long_key != nullptr) {
    if (!OnFault(d, Fault::kKeyTooLong,
                 std::string("The ") + long_key + " is longer than 255 characters")) {
      return false;
    }
    if (TooLong(d.key)) d.key = BodyDigestKey(*d.key);
    if (TooLong(d.aggregate)) d.aggregate.reset();
    if (TooLong(d.event_type)) d.event_type.reset();
  }
  NewInboxMessage& m = d.out.row;
  m.idempotency_key = std::move(*d.key);
  m.aggregate_id = std::move(d.aggregate);
  m.event_type = std::move(d.event_type);
  return !m.dead;  // a dead row gets no delay, no publish time and no transform
}

// 7. initialDelay, and the publish time when a publish-time key is configured.
bool Intake::SetPublishTime(Draft& d) const {
  const IntakeRules& r = *rules_;
  NewInboxMessage& m = d.out.row;
  if (r.initial_delay_ms) m.delay_ms = *r.initial_delay_ms;
  if (!r.scheduled_at_header && r.publish_paths.empty()) return true;
  std::optional<std::string> raw;
  if (r.scheduled_at_header) raw = NonBlank(Header(*d.arrival, *r.scheduled_at_header));
  if (!raw) raw = FirstText(r.publish_paths, d.document);
  if (raw) {
    m.publish_time_ms = ParsePublishTime(*raw);
    if (!m.publish_time_ms) {
      Warn("The publish time of a message of source '" + r.source +
               "' is not a time, so it is ignored.",
           {{"source", r.source}});
    }
  }
  if (!m.publish_time_ms) m.publish_time_ms = d.arrival->broker_time_ms;
  return true;
}

// 8. The source transform, on the original body; the row gets the id it saw.
bool Intake::Transform(Draft& d) const {
  const IntakeRules& r = *rules_;
  if (r.transforms == nullptr || !r.transforms->HasTransform(r.source)) return true;
  NewInboxMessage& m = d.out.row;
  TransformInput input;
  input.message_id = NewUuid();
  input.received_at = NowIso();
  input.idempotency_key = m.idempotency_key;
  input.event_type = m.event_type;
  input.headers = StoredHeaderPairs(m.headers);
  TransformOutput out = r.transforms->Apply(r.source, d.body, input);
  if (out.rejected) {
    if (r.policy == RefusalPolicy::kRefuse) {
      Warn("A webhook failed its source transform.",
           {{"source", r.source}, {"reason", out.reason}});
    } else {
      Warn("A message failed its source transform and is stored dead.",
           {{"source", r.source}, {"reason", out.reason}});
    }
    return OnFault(d, Fault::kTransformFailed, "Transform failed: " + out.reason);
  }
  m.id = std::move(input.message_id);
  m.payload = std::move(out.payload);
  d.payload_set = true;
  return true;
}

Result<IntakeRules> RulesFromKeys(const std::string& source, const SourceKeys& keys,
                                  const std::vector<std::string>& idempotency_key_path) {
  IntakeRules r;
  r.source = source;
  r.tracer = telemetry::ProcessTracer();
  const std::string prefix = "sources." + source + ".";
  auto filter = HeaderFilter::Parse(keys.filter);
  if (!filter.ok()) return InvalidArgument(prefix + "filter: " + filter.status().message());
  r.filter = std::move(filter).value();
  QB_ASSIGN_OR_RETURN(r.idempotency_key.paths,
                      CompilePaths(idempotency_key_path, prefix + "idempotencyKeyPath"));
  QB_ASSIGN_OR_RETURN(r.aggregate_id.paths,
                      CompilePaths(keys.aggregate_id_path, prefix + "aggregateIdPath"));
  QB_ASSIGN_OR_RETURN(r.event_type.paths,
                      CompilePaths(keys.event_type_path, prefix + "eventTypePath"));
  QB_ASSIGN_OR_RETURN(r.publish_paths,
                      CompilePaths(keys.scheduled_at_path, prefix + "scheduledAtPath"));
  r.scheduled_at_header = keys.scheduled_at_header;
  r.initial_delay_ms = keys.initial_delay_ms;
  r.consumption = keys.consumption == "pull" ? InboxConsumption::kPull : InboxConsumption::kPush;
  return r;
}

std::string BodyDigestKey(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(body.data(), body.size(), digest, &len, EVP_sha256(), nullptr);
  return "sha256:" + Hex(digest, len);
}

}  // namespace queuebox::sources
