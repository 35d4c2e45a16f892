// schema.cc: the option tables (QueueBox reference §5.5, §6, §11.1, §12.2, §13.2).
#include "config/schema.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "destinations/registry.h"

namespace queuebox::cfg {
namespace {

constexpr int64_t kIntMax = INT_MAX;  // int fields of Config

OptionSpec Opt(std::string key, OptionType type, nlohmann::json def, std::string description) {
  OptionSpec s;
  s.key = std::move(key);
  s.type = type;
  s.default_value = std::move(def);
  s.description = std::move(description);
  return s;
}

OptionSpec Required(std::string key, OptionType type, std::string description) {
  OptionSpec s = Opt(std::move(key), type, nullptr, std::move(description));
  s.required = true;
  return s;
}

OptionSpec Ranged(OptionSpec s, int64_t min, int64_t max = kIntMax) {
  s.min = min;
  s.max = max;
  return s;
}

OptionSpec Enum(std::string key, std::vector<std::string> values, nlohmann::json def,
                std::string description) {
  OptionSpec s = Opt(std::move(key), OptionType::kEnum, std::move(def), std::move(description));
  s.enum_values = std::move(values);
  return s;
}

std::vector<OptionSpec> DatabaseOptions() {
  std::vector<OptionSpec> o = {
      Enum("type", {"postgresql", "sqlite"}, "sqlite",
           "Database kind. SQLite is the embedded default; PostgreSQL for several replicas"),
      Required("url", OptionType::kString,
               "SQLite: a file path. PostgreSQL: a postgresql:// or postgres:// URI, or "
               "jdbc:postgresql://. Not a secret (no file:); its password is masked in printouts"),
      Opt("username", OptionType::kString, nullptr, "PostgreSQL role; overrides the URL's user"),
      Opt("password", OptionType::kSecret, nullptr,
          "PostgreSQL password; overrides the URL's password"),
      Ranged(Opt("poolSize", OptionType::kInt, 10, "Connections per replica (PostgreSQL)"), 1),
      Ranged(Opt("connectionTimeoutMs", OptionType::kMillis, 30000,
                 "Wait for a free pooled connection"),
             1, INT64_MAX),
      Ranged(Opt("startupTimeoutMs", OptionType::kMillis, 60000,
                 "Wait for the database at start (retried with backoff), then exit"),
             1, INT64_MAX),
      Opt("migrate", OptionType::kBool, true,
          "Apply the bundled migrations at start; must be false with a renamed table or column"),
      Opt("outboxTableName", OptionType::kString, "outbox", "Name of the outbox table"),
  };
  const std::pair<const char*, const char*> columns[] = {
      {"id", "id"},
      {"topic", "topic"},
      {"key", "key"},
      {"aggregateType", "aggregate_type"},
      {"payload", "payload"},
      {"headers", "headers"},
      {"state", "state"},
      {"attempt", "attempt"},
      {"maxAttempts", "max_attempts"},
      {"scheduledAt", "scheduled_at"},
      {"createdAt", "created_at"},
      {"updatedAt", "updated_at"},
      {"claimedAt", "claimed_at"},
      {"claimToken", "claim_token"},
      {"leaseExpiresAt", "lease_expires_at"},
      {"lastError", "last_error"},
      {"sequence", "sequence"},
  };
  for (const auto& [key, column] : columns) {
    o.push_back(Opt(std::string("columnMapping.outbox.") + key, OptionType::kString, column,
                    "Column name in the outbox table"));
  }
  return o;
}

std::vector<Section> BuildSections() {
  return {
      {"server",
       "The HTTP servers of the relay (health, metrics, admin routes).",
       {
           Ranged(Opt("httpPort", OptionType::kInt, 8080, "Port of the data HTTP server"), 1,
                  65535),
           Ranged(Opt("managementPort", OptionType::kInt, nullptr,
                      "Moves /health*, /metrics and /admin/* to this port; must differ from "
                      "httpPort"),
                  1, 65535),
           Opt("address", OptionType::kString, "127.0.0.1", "Interface the servers bind to"),
       }},
      {"database", "Where the outbox table lives.", DatabaseOptions()},
      {"outbox",
       "The relay loop: claiming, retrying and stopping.",
       {
           Ranged(Opt("pollIntervalMs", OptionType::kMillis, 100,
                      "Wait between claims when the last claim found nothing"),
                  1, INT64_MAX),
           Ranged(Opt("batchSize", OptionType::kInt, 100, "Rows claimed per claim"), 1),
           Ranged(Opt("concurrency", OptionType::kInt, 8, "Messages in flight per replica"), 1),
           Ranged(Opt("retryBaseDelayMs", OptionType::kMillis, 1000,
                      "Backoff base: base x 2^attempt plus up to 25% jitter, at most 60 s"),
                  0, INT64_MAX),
           Ranged(Opt("maxAttempts", OptionType::kInt, 5,
                      "max_attempts stamped on rows QueueBox creates"),
                  1),
           Ranged(Opt("claimTimeoutMs", OptionType::kMillis, 300000,
                      "Lease of a claim; renewed every third of it while in flight"),
                  1, INT64_MAX),
           Ranged(Opt("pendingGaugeIntervalMs", OptionType::kMillis, 5000,
                      "Minimum interval between pending-gauge queries"),
                  0, INT64_MAX),
           Ranged(Opt("shutdownTimeoutMs", OptionType::kMillis, 30000,
                      "Wait for in-flight messages at shutdown"),
                  1, INT64_MAX),
           Opt("notify.enabled", OptionType::kBool, false,
               "Wake up on PostgreSQL LISTEN/NOTIFY; polling stays the source of truth"),
           Opt("keyAffinity.enabled", OptionType::kBool, true,
               "PostgreSQL: replicas split the keys between them (a heartbeat in "
               "queuebox_relay_replicas), so adding replicas adds throughput; off: every "
               "replica claims every key"),
       }},
      {"http",
       "Settings shared by HTTP destinations.",
       {
           Ranged(Opt("maxErrorBodyBytes", OptionType::kInt, 2048,
                      "Bytes of a failed response body kept in last_error (redacted)"),
                  1),
       }},
      {"admin",
       "The admin routes (replay). `admin.auth` is described below.",
       {
           Opt("enabled", OptionType::kBool, false, "Register the /admin/* routes"),
           Opt("insecure", OptionType::kBool, false,
               "Allow admin routes without auth (a local test only)"),
           Ranged(Opt("maxPayloadBytes", OptionType::kInt, 65536,
                      "Largest admin request body; larger gets 413"),
                  1),
       }},
      {"retention",
       "Deletion of old sent and dead outbox rows.",
       {
           Opt("enabled", OptionType::kBool, false, "Run the retention loop"),
           Enum("outbox.policy", {"AGE", "COUNT", "DISABLED"}, "DISABLED",
                "AGE deletes rows older than maxAge; COUNT keeps the maxCount newest per state"),
           Opt("outbox.maxAge", OptionType::kDuration, nullptr,
               "Age (from updated_at) after which sent/dead rows go; required by AGE"),
           Ranged(Opt("outbox.maxCount", OptionType::kInt, nullptr,
                      "Rows kept per state (sent, dead); required by COUNT"),
                  1, INT64_MAX),
           Opt("outbox.cleanupInterval", OptionType::kDuration, "1h", "Wait between runs"),
           Ranged(Opt("outbox.batchSize", OptionType::kInt, 1000, "Rows deleted per statement"), 1),
       }},
      {"logging",
       "Log lines on standard output.",
       {
           Enum("format", {"json", "text"}, "json", "One JSON object per line, or plain text"),
           Enum("level", {"debug", "info", "warn", "error"}, "info", "Lowest level written"),
       }},
  };
}

std::vector<Variant> BuildAuthVariants() {
  Variant bearer{
      "bearer",
      {Required("token", OptionType::kSecret, "Expected token of `Authorization: Bearer <token>`")},
      nullptr};
  Variant api_key{"api-key",
                  {Required("key", OptionType::kSecret, "Expected API key"),
                   Opt("headerName", OptionType::kString, "X-API-Key", "Header carrying the key")},
                  nullptr};
  Variant hmac{
      "hmac",
      {
          Required("secret", OptionType::kSecret, "HMAC key (UTF-8)"),
          Opt("headerName", OptionType::kString, "X-Signature", "Header carrying the signature"),
          Enum("algorithm", {"HmacSHA256", "HmacSHA512"}, "HmacSHA256", "HMAC hash"),
          Opt("signaturePrefix", OptionType::kString,
              "sha256=", "Text before the lowercase hex signature; may be empty"),
          Opt("timestampHeader", OptionType::kString, nullptr,
              "Header with the request time in Unix milliseconds; checked when set"),
          Ranged(Opt("timestampTolerance", OptionType::kMillis, 300000,
                     "Largest accepted distance between the timestamp and now"),
                 0, INT64_MAX),
          Enum("signaturePayloadFormat",
               {"BODY", "TIMESTAMP_DOT_BODY", "body", "timestamp-dot-body"}, nullptr,
               "What is signed: the body, or `<timestamp>.<body>`. Default TIMESTAMP_DOT_BODY "
               "when timestampHeader is set, else BODY"),
      },
      [](const nlohmann::json& block) {
        std::vector<std::string> problems;
        std::string format = block.value("signaturePayloadFormat", std::string());
        if ((format == "TIMESTAMP_DOT_BODY" || format == "timestamp-dot-body") &&
            !block.contains("timestampHeader")) {
          problems.push_back("signaturePayloadFormat: " + format +
                             " needs timestampHeader; set timestampHeader or use BODY");
        }
        return problems;
      }};
  return {api_key, bearer, hmac};
}

}  // namespace

const char kAdminGuardMessage[] =
    "The admin routes are enabled with no authentication. Set 'admin.auth' to a bearer token, an "
    "API key, or an HMAC signature. Set 'admin.insecure' to true only for a local test, or set "
    "'admin.enabled' to false.";

const std::vector<Section>& RootSections() {
  static const std::vector<Section>* const sections = new std::vector<Section>(BuildSections());
  return *sections;
}

const std::vector<OptionSpec>& RootTable() {
  static const std::vector<OptionSpec>* const table = [] {
    auto* t = new std::vector<OptionSpec>();
    for (const Section& s : RootSections()) {
      for (OptionSpec o : s.options) {
        o.key = s.name + "." + o.key;
        t->push_back(std::move(o));
      }
    }
    return t;
  }();
  return *table;
}

const std::vector<std::string>& ReservedRootKeys() {
  static const std::vector<std::string>* const keys =
      new std::vector<std::string>{"routes", "destinations", "admin.auth"};
  return *keys;
}

const std::vector<OptionSpec>& RouteOptions() {
  static const std::vector<OptionSpec>* const table = new std::vector<OptionSpec>{
      Required("topicPattern", OptionType::kString,
               "Glob on the whole topic: `*` one segment without a dot, `**` any text; not "
               "blank, no `***`"),
      Required("destination", OptionType::kString, "Name of a destination"),
      Opt("routingKeyTemplate", OptionType::kString, nullptr,
          "RabbitMQ routing key / Kafka record key, e.g. `{{ topic }}`"),
      Opt("routingKeyMissingFieldDefault", OptionType::kString, "",
          "Rendered for a placeholder whose value is missing"),
  };
  return *table;
}

const std::vector<OptionSpec>& DestinationCommonOptions() {
  static const std::vector<OptionSpec>* const table = new std::vector<OptionSpec>{
      Opt("headers", OptionType::kStringMap, nlohmann::json::object(),
          "Static headers on every message; a row header of the same name wins"),
  };
  return *table;
}

const std::vector<Variant>& DestinationVariants() {
  static const std::vector<Variant>* const variants = [] {
    auto* v = new std::vector<Variant>();
    for (const DestinationType& t : BuiltinDestinationTypes()) {
      v->push_back(Variant{t.type, t.options, t.validate});
    }
    return v;
  }();
  return *variants;
}

const std::vector<Variant>& AdminAuthVariants() {
  static const std::vector<Variant>* const variants = new std::vector<Variant>(BuildAuthVariants());
  return *variants;
}

std::string KnownAuthTypes() {
  std::vector<std::string> names;
  for (const Variant& v : AdminAuthVariants()) names.push_back(v.type);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

bool IsIdentifierKey(const std::string& root_key) {
  return root_key == "database.outboxTableName" ||
         root_key.rfind("database.columnMapping.", 0) == 0;
}

}  // namespace queuebox::cfg
