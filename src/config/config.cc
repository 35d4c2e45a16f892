// config.cc: LoadConfig (QueueBox reference §12): YAML file, then QUEUEBOX_* variables, then
// ${NAME} placeholders, then the option tables; every problem collected into one message.
#include <sys/stat.h>

#include "config/env.h"
#include "config/load.h"
#include "config/schema.h"
#include "config/validate.h"
#include "config/yaml.h"
#include "core/router.h"
#include "destinations/registry.h"
#include "sources/registry.h"
#include "store/change_capture.h"
#include "store/open_store.h"

extern char** environ;

namespace queuebox {
namespace {

using cfg::Diagnostics;
using nlohmann::json;

bool Has(const json& root, const char* pointer) {
  return root.contains(json::json_pointer(pointer));
}

std::string KindName(const std::string& kind) {
  if (kind == "postgresql") return "a PostgreSQL URL";
  if (kind == "sqlserver") return "a SQL Server URL (jdbc:sqlserver://)";
  return "a SQLite file path";
}

// database.type from database.url when unset (issue 13 item 1); an explicit type must agree.
// The URL is never shown: it may hold a password.
void ResolveDatabaseType(const json& root, DatabaseConfig& db, Diagnostics& d) {
  const bool type_given = !db.type.empty();
  if (!Has(root, "/database/url")) {  // reported as missing
    if (db.type == "sqlserver") d.Add("database.type", store::kSqlServerUnsupported);
    if (!type_given) db.type = "sqlite";  // the embedded default
    return;
  }
  Result<std::string> kind = store::DatabaseKindOfUrl(db.url);
  if (!kind.ok()) {
    d.Add("database.url", kind.status().message());
    return;
  }
  if (type_given && db.type != *kind) {
    d.Add("database.type", "is " + db.type + " but database.url is " + KindName(*kind) +
                               "; remove database.type (the URL decides the kind) or make the two "
                               "agree");
    return;
  }
  if (*kind == "sqlserver") {
    d.Add(type_given ? "database.type" : "database.url", store::kSqlServerUnsupported);
    return;
  }
  db.type = *kind;
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
void CheckCrossKeys(const json& root, Config& c, bool admin_auth_given, Diagnostics& d) {
  if (c.server.management_port && *c.server.management_port == c.server.http_port) {
    d.Add("server.managementPort",
          "must differ from server.httpPort (both are " + std::to_string(c.server.http_port) + ")");
  }
  ResolveDatabaseType(root, c.database, d);
  CheckCapture(c, d);
  auto check_retention = [&d](const std::string& table, const RetentionPolicy& p) {
    const std::string prefix = "retention." + table;
    if (p.policy == "AGE" && !p.max_age_ms) {
      d.Add(prefix + ".maxAge", "required when " + prefix + ".policy is AGE (e.g. 7d)");
    }
    if (p.policy == "COUNT" && !p.max_count) {
      d.Add(prefix + ".maxCount", "required when " + prefix + ".policy is COUNT");
    }
  };
  check_retention("outbox", c.retention.outbox);
  check_retention("inbox", c.retention.inbox);
  if (!c.inbox.base_path.empty() &&
      (c.inbox.base_path[0] != '/' || c.inbox.base_path.back() == '/')) {
    d.Add("inbox.basePath",
          "must start with / and not end with / (e.g. /inbox), got '" + c.inbox.base_path + "'");
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

// sources.<name>: a typed block whose `type` defaults to http (QueueBox reference §12.1).
void FillSources(const json& tree, Config& c, Diagnostics& d) {
  const json* block =
      RootMember(tree, "sources", false, "must be a map of source names to blocks", d);
  if (block == nullptr) return;
  std::map<std::string, std::string> routes;  // full route -> source
  for (auto it = block->begin(); it != block->end(); ++it) {
    const std::string path = cfg::JoinPath("sources", it.key());
    json value = it.value();
    if (value.is_object() && (!value.contains("type") || value["type"].is_null())) {
      value["type"] = "http";
    }
    std::optional<cfg::VariantResult> v = cfg::ValidateVariant(
        value, cfg::SourceVariants(), {}, sources::KnownSourceTypes(), path, d);
    if (!v) continue;
    SourceConfig sc;
    sc.name = it.key();
    sc.type = v->type;
    sc.options = std::move(v->block);
    Result<sources::SourceCommon> common = sources::BindSourceCommon(sc);
    if (common.ok() && common->path) {
      const std::string route = c.inbox.base_path + *common->path;
      auto [at, inserted] = routes.emplace(route, sc.name);
      if (!inserted) {
        d.Add(path + ".path", "POST " + route + " is already the route of source " + at->second +
                                  "; give each source its own path");
      }
    }
    c.sources[sc.name] = std::move(sc);
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

// QueueBox's "no source at all" message (ConfigLoader.noSourceException), with our sources.
std::string NoSourceMessage(const std::string& file, bool named_by_variable) {
  return "No configuration was found. QueueBox C++ read two sources and each was empty. "
         "1. The QUEUEBOX_* environment variables, for example QUEUEBOX_DATABASE_URL, "
         "QUEUEBOX_DATABASE_USERNAME and QUEUEBOX_DATABASE_PASSWORD. 2. The file " +
         file + (named_by_variable ? ", which QUEUEBOX_CONFIG_FILE names" : "") + " (--config or " +
         cfg::kConfigFileVar +
         " can name another). This build has no packaged configuration (QueueBox's third "
         "source); the Debian package installs " +
         kDefaultConfigFile + ". Set the environment variables, or write the file.";
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Result<Config> Load(const ConfigSource& source) {
  std::string file = source.file;
  bool named_by_variable = false;
  if (file.empty()) {
    auto it = source.env.find(cfg::kConfigFileVar);
    named_by_variable = it != source.env.end() && !it->second.empty();
    file = named_by_variable ? it->second : source.default_file;
  }
  ConfigOrigin origin;
  json tree = json::object();
  // --config must exist; QueueBox's external file (named or default) is optional.
  if (!source.file.empty() || FileExists(file)) {
    QB_ASSIGN_OR_RETURN(tree, cfg::LoadYamlFile(file));
    if (!tree.empty()) origin.file = file;
  } else if (named_by_variable) {
    origin.skipped = file;
  }
  Diagnostics d;
  origin.variables = cfg::ApplyEnvironment(source.env, tree, d);
  if (origin.file.empty() && origin.variables == 0 && d.empty()) {
    return InvalidArgument(NoSourceMessage(file, named_by_variable));
  }
  cfg::ExpandPlaceholders(tree, source.env, "", d);

  cfg::TableRules rules;
  rules.reserved = cfg::ReservedRootKeys();
  json root = cfg::ValidateTable(tree, cfg::RootTable(), rules, "", d);
  Config c;
  Bound(cfg::RootOptions().BindPresent(root, c), d);
  FillDestinations(tree, c, d);
  FillRoutes(tree, c, d);
  FillSources(tree, c, d);
  // Given, valid or not: an invalid auth block has its own errors, not the guard's.
  json::json_pointer auth("/admin/auth");
  bool auth_given = tree.contains(auth) && !tree.at(auth).is_null();
  CheckCrossKeys(root, c, auth_given, d);
  if (!d.empty()) return d.ToStatus();
  c.origin = std::move(origin);
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

ConfigSource ProcessConfigSource(std::string file) {
  ConfigSource source;
  source.file = std::move(file);
  source.env = ProcessEnvironment();
  auto it = source.env.find(kDefaultConfigFileVar);
  if (it != source.env.end() && !it->second.empty()) source.default_file = it->second;
  return source;
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
