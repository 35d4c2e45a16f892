// config.cc: LoadConfig (QueueBox reference §12): YAML file, then QUEUEBOX_* variables, then
// ${NAME} placeholders, then the option tables; every problem collected into one message.
#include "config/env.h"
#include "config/load.h"
#include "config/schema.h"
#include "config/validate.h"
#include "config/yaml.h"
#include "core/router.h"
#include "destinations/registry.h"
#include "store/change_capture.h"

extern char** environ;

namespace queuebox {
namespace {

using cfg::Diagnostics;
using nlohmann::json;

bool StartsWith(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

bool Has(const json& root, const char* pointer) {
  return root.contains(json::json_pointer(pointer));
}

void CheckDatabase(const json& root, const DatabaseConfig& db, Diagnostics& d) {
  if (!Has(root, "/database/url")) return;  // reported as missing
  const std::string& url = db.url;
  const bool pg_uri = StartsWith(url, "postgresql://") || StartsWith(url, "postgres://") ||
                      StartsWith(url, "jdbc:postgresql://");
  // The URL is never shown: it may hold a password.
  if (db.type == "postgresql" && !pg_uri) {
    d.Add("database.url",
          "must be a PostgreSQL URI (postgresql://host/db, postgres://host/db or "
          "jdbc:postgresql://host/db) because database.type is postgresql");
  } else if (db.type == "sqlite" && (pg_uri || StartsWith(url, "jdbc:"))) {
    d.Add("database.url",
          "is a server URL but database.type is sqlite; set database.type: postgresql, or give "
          "the path of a SQLite file");
  } else if (db.type == "sqlite" && url.empty()) {
    d.Add("database.url", "must be the path of a SQLite file");
  }
}

// outbox.capture.* (QueueBox reference §12.2, Appendix A).
void CheckCapture(const Config& c, Diagnostics& d) {
  const CaptureConfig& cap = c.outbox.capture;
  for (const auto& [key, value] :
       {std::pair<const char*, const std::string*>{"outbox.capture.identity", &cap.identity},
        {"outbox.capture.publication", &cap.publication},
        {"outbox.capture.slot", &cap.slot}}) {
    if (!IsCaptureName(*value)) {
      d.Add(key, "must match ^[a-z][a-z0-9_]{0,62}$ (got '" + *value + "')");
    }
  }
  if (cap.mode == "sqlserver-cdc") {
    d.Add("outbox.capture.mode",
          "sqlserver-cdc is not supported by this build of QueueBox C++ (it has no SQL Server "
          "store); use postgres-logical with PostgreSQL, or polling");
  } else if (cap.mode == "postgres-logical" && c.database.type != "postgresql") {
    d.Add("outbox.capture.mode",
          "postgres-logical needs database.type postgresql (the capture mode must match the "
          "database)");
  }
  if (cap.enabled && cap.mode == "polling") {
    d.Add("outbox.capture.enabled",
          "true needs outbox.capture.mode postgres-logical (polling captures nothing)");
  }
  if (cap.enabled && cap.state_directory.empty()) {
    d.Add("outbox.capture.stateDirectory", "required when outbox.capture.enabled is true");
  }
  if (cap.enabled) {
    Status target = CheckCaptureConnection(c.database, cap);
    if (!target.ok()) d.Add("outbox.capture.connection.hostname", target.message());
  }
}

// Rules across keys, checked on the bound values (`root`: the validated tree, for presence).
void CheckCrossKeys(const json& root, const Config& c, bool admin_auth_given, Diagnostics& d) {
  if (c.server.management_port && *c.server.management_port == c.server.http_port) {
    d.Add("server.managementPort",
          "must differ from server.httpPort (both are " + std::to_string(c.server.http_port) + ")");
  }
  CheckDatabase(root, c.database, d);
  CheckCapture(c, d);
  const RetentionPolicy& p = c.retention.outbox;
  if (p.policy == "AGE" && !p.max_age_ms) {
    d.Add("retention.outbox.maxAge", "required when retention.outbox.policy is AGE (e.g. 7d)");
  }
  if (p.policy == "COUNT" && !p.max_count) {
    d.Add("retention.outbox.maxCount", "required when retention.outbox.policy is COUNT");
  }
  if (c.admin.enabled && !admin_auth_given && !c.admin.insecure) {
    d.Add("admin.auth", cfg::kAdminGuardMessage);
  }
}

// A validated value that does not bind means a row's type and member disagree (a bug in a
// table); reported like any problem, at the key Bind names ("key: reason").
void Bound(const Status& s, Diagnostics& d) {
  if (s.ok()) return;
  const std::string& m = s.message();
  size_t colon = m.find(": ");
  if (colon == std::string::npos) {
    d.Add("configuration", m);
  } else {
    d.Add(m.substr(0, colon), m.substr(colon + 2));
  }
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
        it.value(), cfg::DestinationVariants(), cfg::DestinationCommonOptions().specs(),
        KnownDestinationTypes(), cfg::JoinPath("destinations", it.key()), d);
    if (!v) continue;
    DestinationConfig dc;
    dc.name = it.key();
    dc.type = v->type;
    Bound(cfg::DestinationCommonOptions().BindPresent(v->block, dc), d);
    for (const OptionSpec& common : cfg::DestinationCommonOptions().specs()) {
      v->block.erase(common.key);
    }
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
    json r = cfg::ValidateTable(list[i], cfg::RouteOptions().specs(), {}, path, d);
    RouteConfig rc;
    Bound(cfg::RouteOptions().BindPresent(r, rc, path), d);
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
  Bound(cfg::RootOptions().BindPresent(root, c), d);
  FillDestinations(tree, c, d);
  FillRoutes(tree, c, d);
  // Given, valid or not: an invalid auth block has its own errors, not the guard's.
  json::json_pointer auth("/admin/auth");
  bool auth_given = tree.contains(auth) && !tree.at(auth).is_null();
  CheckCrossKeys(root, c, auth_given, d);
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
