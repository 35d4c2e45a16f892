// config.cc: LoadConfig (QueueBox reference §12): YAML file, then QUEUEBOX_* variables, then
// ${NAME} placeholders, then the option tables; every problem collected into one message.
#include "queuebox/config.h"

#include <regex>

#include "config/env.h"
#include "config/schema.h"
#include "config/validate.h"
#include "config/yaml.h"
#include "core/router.h"
#include "destinations/registry.h"

extern char** environ;

namespace queuebox {
namespace {

using cfg::Diagnostics;
using nlohmann::json;

template <typename T>
T Get(const json& root, const std::string& dotted, T fallback) {
  std::string pointer = "/" + dotted;
  for (char& c : pointer) {
    if (c == '.') c = '/';
  }
  json::json_pointer ptr(pointer);
  if (!root.contains(ptr) || root.at(ptr).is_null()) return fallback;
  return root.at(ptr).get<T>();
}

std::optional<int64_t> GetOptional(const json& root, const std::string& dotted) {
  std::optional<int64_t> none;
  int64_t v = Get<int64_t>(root, dotted, INT64_MIN);
  if (v == INT64_MIN) return none;
  return v;
}

bool StartsWith(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

void CheckDatabase(const json& root, Diagnostics& d) {
  const std::string type = Get<std::string>(root, "database.type", "sqlite");
  if (!root.contains(json::json_pointer("/database/url"))) return;  // reported as missing
  const std::string url = Get<std::string>(root, "database.url", "");
  const bool pg_uri = StartsWith(url, "postgresql://") || StartsWith(url, "postgres://") ||
                      StartsWith(url, "jdbc:postgresql://");
  // The URL is never shown: it may hold a password.
  if (type == "postgresql" && !pg_uri) {
    d.Add("database.url",
          "must be a PostgreSQL URI (postgresql://host/db, postgres://host/db or "
          "jdbc:postgresql://host/db) because database.type is postgresql");
  } else if (type == "sqlite" && (pg_uri || StartsWith(url, "jdbc:"))) {
    d.Add("database.url",
          "is a server URL but database.type is sqlite; set database.type: postgresql, or give "
          "the path of a SQLite file");
  } else if (type == "sqlite" && url.empty()) {
    d.Add("database.url", "must be the path of a SQLite file");
  }
  static const std::regex kIdentifier("^[a-zA-Z_][a-zA-Z0-9_]*$");
  for (const OptionSpec& o : cfg::RootTable()) {
    if (!cfg::IsIdentifierKey(o.key)) continue;
    std::string v = Get<std::string>(root, o.key, "x");
    if (!std::regex_match(v, kIdentifier)) {
      d.Add(o.key,
            "must be a SQL identifier (a letter or _, then letters, digits or _), got '" + v + "'");
    }
  }
}

void CheckCrossKeys(const json& root, bool admin_auth_given, Diagnostics& d) {
  std::optional<int64_t> mgmt = GetOptional(root, "server.managementPort");
  int64_t http = Get<int64_t>(root, "server.httpPort", 8080);
  if (mgmt && *mgmt == http) {
    d.Add("server.managementPort",
          "must differ from server.httpPort (both are " + std::to_string(http) + ")");
  }
  CheckDatabase(root, d);
  const std::string policy = Get<std::string>(root, "retention.outbox.policy", "DISABLED");
  if (policy == "AGE" && !root.contains(json::json_pointer("/retention/outbox/maxAge"))) {
    d.Add("retention.outbox.maxAge", "required when retention.outbox.policy is AGE (e.g. 7d)");
  }
  if (policy == "COUNT" && !root.contains(json::json_pointer("/retention/outbox/maxCount"))) {
    d.Add("retention.outbox.maxCount", "required when retention.outbox.policy is COUNT");
  }
  if (Get<bool>(root, "admin.enabled", false) && !admin_auth_given &&
      !Get<bool>(root, "admin.insecure", false)) {
    d.Add("admin.auth", cfg::kAdminGuardMessage);
  }
}

void FillSections(const json& root, Config& c) {
  c.server.http_port = Get<int>(root, "server.httpPort", c.server.http_port);
  if (auto m = GetOptional(root, "server.managementPort")) {
    c.server.management_port = static_cast<int>(*m);
  }
  c.server.address = Get<std::string>(root, "server.address", c.server.address);

  DatabaseConfig& db = c.database;
  db.type = Get<std::string>(root, "database.type", db.type);
  db.url = Get<std::string>(root, "database.url", "");
  db.username = Get<std::string>(root, "database.username", "");
  db.password = Get<std::string>(root, "database.password", "");
  db.pool_size = Get<int>(root, "database.poolSize", db.pool_size);
  db.connection_timeout_ms =
      Get<int64_t>(root, "database.connectionTimeoutMs", db.connection_timeout_ms);
  db.startup_timeout_ms = Get<int64_t>(root, "database.startupTimeoutMs", db.startup_timeout_ms);
  db.migrate = Get<bool>(root, "database.migrate", db.migrate);
  db.outbox_table = Get<std::string>(root, "database.outboxTableName", db.outbox_table);
  OutboxColumns& col = db.columns;
  const std::pair<const char*, std::string*> columns[] = {
      {"id", &col.id},
      {"topic", &col.topic},
      {"key", &col.key},
      {"aggregateType", &col.aggregate_type},
      {"payload", &col.payload},
      {"headers", &col.headers},
      {"state", &col.state},
      {"attempt", &col.attempt},
      {"maxAttempts", &col.max_attempts},
      {"scheduledAt", &col.scheduled_at},
      {"createdAt", &col.created_at},
      {"updatedAt", &col.updated_at},
      {"claimedAt", &col.claimed_at},
      {"claimToken", &col.claim_token},
      {"leaseExpiresAt", &col.lease_expires_at},
      {"lastError", &col.last_error},
      {"sequence", &col.sequence},
  };
  for (const auto& [key, field] : columns) {
    *field = Get<std::string>(root, std::string("database.columnMapping.outbox.") + key, *field);
  }

  OutboxConfig& o = c.outbox;
  o.poll_interval_ms = Get<int64_t>(root, "outbox.pollIntervalMs", o.poll_interval_ms);
  o.batch_size = Get<int>(root, "outbox.batchSize", o.batch_size);
  o.concurrency = Get<int>(root, "outbox.concurrency", o.concurrency);
  o.retry_base_delay_ms = Get<int64_t>(root, "outbox.retryBaseDelayMs", o.retry_base_delay_ms);
  o.max_attempts = Get<int>(root, "outbox.maxAttempts", o.max_attempts);
  o.claim_timeout_ms = Get<int64_t>(root, "outbox.claimTimeoutMs", o.claim_timeout_ms);
  o.pending_gauge_interval_ms =
      Get<int64_t>(root, "outbox.pendingGaugeIntervalMs", o.pending_gauge_interval_ms);
  o.shutdown_timeout_ms = Get<int64_t>(root, "outbox.shutdownTimeoutMs", o.shutdown_timeout_ms);
  o.notify = Get<bool>(root, "outbox.notify.enabled", o.notify);
  o.key_affinity = Get<bool>(root, "outbox.keyAffinity.enabled", o.key_affinity);

  c.http.max_error_body_bytes =
      Get<int>(root, "http.maxErrorBodyBytes", c.http.max_error_body_bytes);

  c.admin.enabled = Get<bool>(root, "admin.enabled", false);
  c.admin.insecure = Get<bool>(root, "admin.insecure", false);
  c.admin.max_payload_bytes = Get<int64_t>(root, "admin.maxPayloadBytes", 65536);

  RetentionConfig& r = c.retention;
  r.enabled = Get<bool>(root, "retention.enabled", false);
  r.outbox.policy = Get<std::string>(root, "retention.outbox.policy", r.outbox.policy);
  r.outbox.max_age_ms = GetOptional(root, "retention.outbox.maxAge");
  r.outbox.max_count = GetOptional(root, "retention.outbox.maxCount");
  r.outbox.cleanup_interval_ms =
      Get<int64_t>(root, "retention.outbox.cleanupInterval", r.outbox.cleanup_interval_ms);
  r.outbox.batch_size = Get<int>(root, "retention.outbox.batchSize", r.outbox.batch_size);

  c.logging.format = Get<std::string>(root, "logging.format", c.logging.format);
  c.logging.level = Get<std::string>(root, "logging.level", c.logging.level);
}

// The root member `key` when it is a block (`want_list` false) or a list; nullptr when it is
// absent or null (nothing to fill) or of the other shape (then `problem` is added).
const json* RootMember(const json& tree, const char* key, bool want_list, const char* problem,
                       Diagnostics& d) {
  if (!tree.contains(key) || tree[key].is_null()) return nullptr;
  const json& member = tree[key];
  if (want_list ? member.is_array() : member.is_object()) return &member;
  d.Add(key, problem);
  return nullptr;
}

void FillDestinations(const json& tree, Config& c, Diagnostics& d) {
  const json* block =
      RootMember(tree, "destinations", false, "must be a map of destination names to blocks", d);
  if (block == nullptr) return;
  for (auto it = block->begin(); it != block->end(); ++it) {
    std::optional<cfg::VariantResult> v = cfg::ValidateVariant(
        it.value(), cfg::DestinationVariants(), cfg::DestinationCommonOptions(),
        KnownDestinationTypes(), cfg::JoinPath("destinations", it.key()), d);
    if (!v) continue;
    DestinationConfig dc;
    dc.name = it.key();
    dc.type = v->type;
    dc.headers = v->block["headers"].get<std::map<std::string, std::string>>();
    v->block.erase("headers");
    dc.options = std::move(v->block);
    c.destinations[dc.name] = std::move(dc);
  }
}

void FillRoutes(const json& tree, Config& c, Diagnostics& d) {
  const json* routes = RootMember(
      tree, "routes", true, "must be a list of routes (- topicPattern: ..., destination: ...)", d);
  if (routes == nullptr) return;
  const json& list = *routes;
  std::vector<std::string> names;
  if (tree.contains("destinations") && tree["destinations"].is_object()) {
    for (auto it = tree["destinations"].begin(); it != tree["destinations"].end(); ++it) {
      names.push_back(it.key());
    }
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string path = cfg::IndexPath("routes", i);
    if (list[i].is_null()) {
      d.Add(path,
            "missing route; list items set by QUEUEBOX_ROUTES_<n>_* are numbered from 0 "
            "without gaps");
      continue;
    }
    json r = cfg::ValidateTable(list[i], cfg::RouteOptions(), {}, path, d);
    RouteConfig rc;
    rc.topic_pattern = r.value("topicPattern", "");
    rc.destination = r.value("destination", "");
    if (r.contains("routingKeyTemplate")) rc.routing_key_template = r["routingKeyTemplate"];
    rc.routing_key_missing_field_default = r.value("routingKeyMissingFieldDefault", "");
    if (r.contains("topicPattern")) {
      Result<TopicPattern> p = TopicPattern::Compile(rc.topic_pattern);
      if (!p.ok()) d.Add(path + ".topicPattern", p.status().message());
    }
    if (r.contains("destination") &&
        std::find(names.begin(), names.end(), rc.destination) == names.end()) {
      std::optional<std::string> guess = cfg::DidYouMean(rc.destination, names);
      d.Add(path + ".destination",
            "no destination is named '" + rc.destination + "'" +
                (guess           ? "; did you mean " + *guess + "?"
                 : names.empty() ? "; define it under destinations"
                                 : "; destinations are " + cfg::JoinNames(names)));
    }
    c.routes.push_back(std::move(rc));
  }
}

// Returns whether admin.auth was given (valid or not).
bool FillAdminAuth(const json& tree, Config& c, Diagnostics& d) {
  if (!tree.contains("admin") || !tree["admin"].is_object()) return false;
  const json& admin = tree["admin"];
  if (!admin.contains("auth") || admin["auth"].is_null()) return false;
  std::optional<cfg::VariantResult> v = cfg::ValidateVariant(
      admin["auth"], cfg::AdminAuthVariants(), {}, cfg::KnownAuthTypes(), "admin.auth", d);
  if (!v) return true;
  if (v->type == "hmac") {
    // One spelling for consumers: BODY or TIMESTAMP_DOT_BODY (QueueBox accepts both cases).
    std::string format = v->block.value("signaturePayloadFormat", std::string());
    if (format.empty()) {
      format = v->block.contains("timestampHeader") ? "TIMESTAMP_DOT_BODY" : "BODY";
    }
    v->block["signaturePayloadFormat"] = format == "body"                 ? "BODY"
                                         : format == "timestamp-dot-body" ? "TIMESTAMP_DOT_BODY"
                                                                          : format;
  }
  c.admin.auth = AdminAuthConfig{v->type, std::move(v->block)};
  return true;
}

std::string NoSourceMessage() {
  return std::string(
             "No configuration found: no file was given with --config, QUEUEBOX_CONFIG_FILE is "
             "not set, and no QUEUEBOX_* environment variable is set. Give a YAML file (") +
         "--config or " + cfg::kConfigFileVar +
         ") or set QUEUEBOX_* variables (at least QUEUEBOX_DATABASE_URL).";
}

Result<Config> Load(const ConfigSource& source) {
  std::string file = source.file;
  if (file.empty()) {
    auto it = source.env.find(cfg::kConfigFileVar);
    if (it != source.env.end()) file = it->second;
  }
  json tree = json::object();
  if (!file.empty()) {
    QB_ASSIGN_OR_RETURN(tree, cfg::LoadYamlFile(file));
  }
  Diagnostics d;
  int bound = cfg::ApplyEnvironment(source.env, tree, d);
  if (file.empty() && bound == 0 && d.empty()) return InvalidArgument(NoSourceMessage());
  cfg::ExpandPlaceholders(tree, source.env, "", d);

  cfg::TableRules rules;
  rules.reserved = cfg::ReservedRootKeys();
  json root = cfg::ValidateTable(tree, cfg::RootTable(), rules, "", d);
  Config c;
  FillSections(root, c);
  FillDestinations(tree, c, d);
  FillRoutes(tree, c, d);
  bool auth_given = FillAdminAuth(tree, c, d);
  CheckCrossKeys(root, auth_given, d);
  if (!d.empty()) return d.ToStatus();
  return c;
}

}  // namespace

Result<Config> LoadConfig(const ConfigSource& source) {
  try {
    return Load(source);
  } catch (const std::exception& e) {
    // A broken invariant of the checks above (a value of the wrong JSON type after validation).
    return Internal(std::string("loading the configuration failed unexpectedly: ") + e.what());
  }
}

std::map<std::string, std::string> ProcessEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

}  // namespace queuebox
