#include "sources/broker_intake.h"

#include <openssl/evp.h>
#include <strings.h>

#include <nlohmann/json.hpp>

#include "admin/metrics.h"
#include "core/header_filter.h"
#include "core/json_path.h"
#include "core/log.h"
#include "sources/intake_parts.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

constexpr int kMaxBodyDepth = 1000;

bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) return false;
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

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

// The last value of header `name` (any letter case), trimmed; nullopt when absent or empty.
std::optional<std::string> Header(const BrokerMessage& m, std::string_view name) {
  for (auto it = m.headers.rbegin(); it != m.headers.rend(); ++it) {
    if (it->first.size() == name.size() &&
        strncasecmp(it->first.data(), name.data(), name.size()) == 0) {
      std::string v = Trimmed(it->second);
      if (v.empty()) return std::nullopt;
      return v;
    }
  }
  return std::nullopt;
}

std::optional<std::string> NonBlank(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  std::string t = Trimmed(*v);
  if (t.empty()) return std::nullopt;
  return t;
}

}  // namespace

struct BrokerIntake::Rules {
  std::string kind;
  std::string source;
  BrokerSourceKeys keys;
  HeaderFilter filter;
  std::vector<JsonPath> key_paths, aggregate_paths, event_type_paths, publish_paths;
  InboxConsumption consumption = InboxConsumption::kPush;
  const SourceTransforms* transforms = nullptr;
  Metrics* metrics = nullptr;
};

std::string HeaderText(std::string_view bytes) {
  if (IsUtf8(bytes)) return std::string(bytes);
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return "base64:" + out;
}

std::string BodyDigestKey(std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(body.data(), body.size(), digest, &len, EVP_sha256(), nullptr);
  return "sha256:" + Hex(digest, len);
}

Result<BrokerIntake> BrokerIntake::Create(std::string kind, std::string source_name,
                                          const BrokerSourceKeys& keys,
                                          const SourceTransforms* transforms, Metrics* metrics) {
  auto rules = std::make_shared<Rules>();
  rules->transforms = transforms;
  rules->metrics = metrics;
  const std::string prefix = "sources." + source_name + ".";
  rules->kind = std::move(kind);
  rules->source = std::move(source_name);
  rules->keys = keys;
  auto filter = HeaderFilter::Parse(keys.keys.filter);
  if (!filter.ok()) return InvalidArgument(prefix + "filter: " + filter.status().message());
  rules->filter = std::move(filter).value();
  struct {
    const std::vector<std::string>* paths;
    std::vector<JsonPath>* out;
    const char* key;
  } lists[] = {{&keys.idempotency_key_path, &rules->key_paths, "idempotencyKeyPath"},
               {&keys.keys.aggregate_id_path, &rules->aggregate_paths, "aggregateIdPath"},
               {&keys.keys.event_type_path, &rules->event_type_paths, "eventTypePath"},
               {&keys.keys.scheduled_at_path, &rules->publish_paths, "scheduledAtPath"}};
  for (auto& l : lists) {
    auto compiled = CompilePaths(*l.paths, prefix + l.key);
    if (!compiled.ok()) return compiled.status();
    *l.out = std::move(compiled).value();
  }
  rules->consumption =
      keys.keys.consumption == "pull" ? InboxConsumption::kPull : InboxConsumption::kPush;
  return BrokerIntake(std::move(rules));
}

const std::string& BrokerIntake::source() const { return rules_->source; }

std::optional<NewInboxMessage> BrokerIntake::Receive(const BrokerMessage& message) const {
  const Rules& r = *rules_;
  const AttributeHeaders& names = r.keys.attribute_headers;
  // The header filter runs before anything is read (QueueBox reference §11.2).
  if (!r.filter.empty()) {
    auto failed = r.filter.FirstFailure([&message](std::string_view name) {
      for (auto it = message.headers.rbegin(); it != message.headers.rend(); ++it) {
        if (it->first.size() == name.size() &&
            strncasecmp(it->first.data(), name.data(), name.size()) == 0) {
          return std::optional<std::string>(it->second);
        }
      }
      return std::optional<std::string>();
    });
    if (failed) {
      log::Debug("A message was filtered out.", {{"source", r.source}, {"rule", *failed}});
      return std::nullopt;
    }
  }

  NewInboxMessage m;
  m.source = r.source;
  m.consumption = r.consumption;
  m.headers = StoredHeaders(message.headers, "");

  std::string correlation;
  if (auto h = Header(message, "X-Correlation-Id")) correlation = SanitizeCorrelationId(*h);
  if (correlation.empty() && message.correlation_property) {
    correlation = SanitizeCorrelationId(*message.correlation_property);
  }
  if (correlation.empty()) correlation = NewUuid();
  m.correlation_id = correlation;

  json body;
  // No NUL: nlohmann's lexer ends its input there, so `{}\0junk` would parse as `{}`.
  bool is_json = IsUtf8(message.body) && message.body.find('\0') == std::string::npos &&
                 JsonDepth(message.body, kMaxBodyDepth) <= kMaxBodyDepth;
  if (is_json) {
    body = json::parse(message.body, nullptr, /*allow_exceptions=*/false);
    is_json = !body.is_discarded();
  }
  const bool kafka = r.kind == "kafka";
  ExpressionValues expressed;
  if (is_json && r.transforms != nullptr && r.transforms->HasKeyExpressions(r.source)) {
    expressed = r.transforms->EvaluateKeys(r.source, message.body);
  }
  // Idempotency key: header, expression, path(s), the broker's id (record key for Kafka), body
  // digest.
  std::optional<std::string> key = Header(message, names.idempotency_key);
  if (!key) key = NonBlank(expressed.idempotency_key);
  if (!key && is_json) key = FirstText(r.key_paths, body);
  if (!key) key = NonBlank(kafka ? message.record_key : message.message_id);
  if (!key) key = BodyDigestKey(message.body);
  // Aggregate id: expression, path(s), header, record key (Kafka).
  std::optional<std::string> aggregate = NonBlank(expressed.aggregate_id);
  if (!aggregate && is_json) aggregate = FirstText(r.aggregate_paths, body);
  if (!aggregate) aggregate = Header(message, names.aggregate_id);
  if (!aggregate && kafka) aggregate = NonBlank(message.record_key);
  // Event type: expression, path(s), then the header when eventTypeFromHeader.
  std::optional<std::string> event_type = NonBlank(expressed.event_type);
  if (!event_type && is_json) event_type = FirstText(r.event_type_paths, body);
  if (!event_type && r.keys.event_type_from_header) {
    event_type = Header(message, names.event_type);
  }

  if (!is_json) {
    // Stored dead, never pending, and acknowledged: a body that is not JSON would otherwise
    // come back forever (QueueBox reference §11.3).
    m.dead = true;
    m.last_error = "The message body is not JSON; stored as {\"raw\": ...}";
    m.payload = json{{"raw", message.body}}.dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    m.payload = message.body;
  }
  // A value over its column cannot be stored as is; the row goes dead (never lost) under a
  // digest of the long key, so a redelivery still finds it.
  auto too_long = [](const std::optional<std::string>& v) {
    return v && CodePoints(*v) > kMaxKeyChars;
  };
  const char* long_key = too_long(key)          ? "idempotency key"
                         : too_long(aggregate)  ? "aggregate id"
                         : too_long(event_type) ? "event type"
                                                : nullptr;
  if (long_key != nullptr) {
    if (too_long(key)) key = BodyDigestKey(*key);
    if (too_long(aggregate)) aggregate.reset();
    if (too_long(event_type)) event_type.reset();
    if (!m.dead) {
      m.dead = true;
      m.last_error = std::string("The ") + long_key + " is longer than 255 characters";
    }
  }
  m.idempotency_key = std::move(*key);
  m.aggregate_id = std::move(aggregate);
  m.event_type = std::move(event_type);
  if (m.dead) return m;

  if (r.keys.keys.initial_delay_ms) m.delay_ms = *r.keys.keys.initial_delay_ms;
  if (r.keys.keys.scheduled_at_header || !r.publish_paths.empty()) {
    std::optional<std::string> raw;
    if (r.keys.keys.scheduled_at_header) raw = Header(message, *r.keys.keys.scheduled_at_header);
    if (!raw) raw = FirstText(r.publish_paths, body);
    if (raw) {
      m.publish_time_ms = ParsePublishTime(*raw);
      if (!m.publish_time_ms) {
        log::Warn("The publish time of a message of source '" + r.source +
                      "' is not a time, so it is ignored.",
                  {{"source", r.source}});
      }
    }
    if (!m.publish_time_ms) m.publish_time_ms = message.broker_time_ms;
  }
  if (r.transforms != nullptr && r.transforms->HasTransform(r.source)) {
    TransformInput input;
    input.message_id = NewUuid();
    input.received_at = NowIso();
    input.idempotency_key = m.idempotency_key;
    input.event_type = m.event_type;
    input.headers = StoredHeaderPairs(m.headers);
    TransformOutput out = r.transforms->Apply(r.source, message.body, input);
    if (out.rejected) {
      // The original payload, dead and acknowledged: never forwarded (QueueBox reference §11.3).
      m.dead = true;
      m.delay_ms = 0;
      m.publish_time_ms.reset();
      m.last_error = "Transform failed: " + out.reason;
      if (r.metrics != nullptr) r.metrics->OnInboxRejection("transform_failed");
      log::Warn("A message failed its source transform and is stored dead.",
                {{"source", r.source}, {"reason", out.reason}});
    } else {
      m.id = std::move(input.message_id);
      m.payload = std::move(out.payload);
    }
  }
  return m;
}

void BrokerIntake::Count(Metrics* metrics, std::span<const InboxStoreOutcome> outcomes,
                         int64_t filtered) const {
  if (metrics == nullptr) return;
  int64_t stored = 0, duplicate = 0;
  for (const InboxStoreOutcome& o : outcomes) {
    switch (o.kind) {
      case InboxStoreOutcome::Kind::kStored:
        ++stored;
        break;
      case InboxStoreOutcome::Kind::kDuplicate:
        ++duplicate;
        break;
      case InboxStoreOutcome::Kind::kRejected:
        metrics->OnInboxRejection("invalid_message");
        break;
    }
  }
  if (stored > 0) metrics->OnInboxMessages("new", stored);
  if (duplicate > 0) metrics->OnInboxMessages("duplicate", duplicate);
  for (int64_t i = 0; i < filtered; ++i) metrics->OnInboxFiltered(rules_->source);
}

}  // namespace queuebox::sources
