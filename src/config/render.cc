// render.cc: RenderMasked, the effective configuration with every secret as *** (QueueBox
// reference §10: Secret prints masked; URL passwords and credential-like static headers masked).
#include "config/render.h"

#include <algorithm>
#include <regex>

#include "config/load.h"
#include "config/schema.h"
#include "config/validate.h"
#include "core/redaction.h"
#include "core/transform_options.h"
#include "destinations/registry.h"
#include "queuebox/config.h"
#include "sources/registry.h"

namespace queuebox {
namespace cfg {
namespace {

using nlohmann::ordered_json;

constexpr char kMask[] = "***";

std::string LowerKey(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool ContainsAny(const std::string& s, std::initializer_list<const char*> parts) {
  return std::any_of(parts.begin(), parts.end(),
                     [&](const char* p) { return s.find(p) != std::string::npos; });
}

std::string Scalar(const ordered_json& v) {
  if (v.is_object()) return "{}";
  if (v.is_array()) return "[]";
  // Strings JSON-quoted: valid YAML double-quoted scalars. Bytes that are not UTF-8 print as
  // U+FFFD: a printout never throws.
  return v.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

std::string Key(const std::string& k) {
  static const std::regex kPlain("^[A-Za-z0-9_][A-Za-z0-9_.-]*$");
  return std::regex_match(k, kPlain)
             ? k
             : ordered_json(k).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
}

bool IsBlock(const ordered_json& v) { return (v.is_object() || v.is_array()) && !v.empty(); }

void Emit(const ordered_json& v, size_t indent, std::string& out) {
  const std::string pad(indent, ' ');
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += pad + Key(it.key()) + ":";
      if (IsBlock(it.value())) {
        out += "\n";
        Emit(it.value(), indent + 2, out);
      } else {
        out += " " + Scalar(it.value()) + "\n";
      }
    }
  } else if (v.is_array()) {
    for (const ordered_json& item : v) {
      if (!IsBlock(item)) {
        out += pad + "- " + Scalar(item) + "\n";
        continue;
      }
      std::string inner;
      Emit(item, indent + 2, inner);
      out += pad + "- " + inner.substr(indent + 2);  // first line joins the dash
    }
  }
}

std::string DurationText(int64_t ms) {
  const std::pair<int64_t, const char*> units[] = {
      {86400000, "d"}, {3600000, "h"}, {60000, "m"}, {1000, "s"}};
  for (const auto& [size, suffix] : units) {
    if (ms != 0 && ms % size == 0) return std::to_string(ms / size) + suffix;
  }
  return ms == 0 ? "0s" : std::to_string(ms) + "ms";
}

ordered_json MaskSecret(const std::string& value) {
  return value.empty() ? ordered_json("") : ordered_json(kMask);
}

// A block's options with secrets masked: keys the table declares kSecret, keys named like
// credentials, and URL credentials in every text.
ordered_json MaskOptions(const nlohmann::json& value, const std::string& key,
                         const std::vector<OptionSpec>& table) {
  auto spec =
      std::find_if(table.begin(), table.end(), [&](const OptionSpec& s) { return s.key == key; });
  std::string last = key.substr(key.rfind('.') == std::string::npos ? 0 : key.rfind('.') + 1);
  bool secret = (spec != table.end() && spec->type == OptionType::kSecret) ||
                (!last.empty() && IsSecretKeyName(last));
  if (secret && !value.is_null()) {
    return value.is_string() ? MaskSecret(value.get<std::string>()) : ordered_json(kMask);
  }
  if (value.is_string()) return MaskUrlCredentials(value.get<std::string>());
  if (value.is_object()) {
    ordered_json out = ordered_json::object();
    for (auto it = value.begin(); it != value.end(); ++it) {
      out[it.key()] = MaskOptions(it.value(), JoinPath(key, it.key()), table);
    }
    return out;
  }
  if (value.is_array()) {
    ordered_json out = ordered_json::array();
    for (const nlohmann::json& item : value) out.push_back(MaskOptions(item, key, table));
    return out;
  }
  return ordered_json::parse(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

ordered_json MaskHeaders(const std::map<std::string, std::string>& headers) {
  ordered_json out = ordered_json::object();
  for (const auto& [name, value] : headers) {
    out[name] = IsSecretHeaderName(name) ? MaskSecret(value) : ordered_json(value);
  }
  return out;
}

// A block-valued option's value with its secrets masked; a typed block shows `type` first.
ordered_json MaskBlock(const BlockSchema& schema, const nlohmann::json& value) {
  if (schema.variants.empty()) return MaskOptions(value, "", schema.options);
  const std::string type = value.value("type", std::string());
  std::vector<OptionSpec> keys = schema.options;
  for (const BlockVariant& v : schema.variants) {
    if (v.type == type) keys.insert(keys.end(), v.options.begin(), v.options.end());
  }
  nlohmann::json rest = value;
  rest.erase("type");
  ordered_json out;
  out["type"] = type;
  ordered_json masked = MaskOptions(rest, "", keys);
  for (auto it = masked.begin(); it != masked.end(); ++it) out[it.key()] = it.value();
  return out;
}

void SetDotted(ordered_json& out, const std::string& dotted, ordered_json value) {
  ordered_json* node = &out;
  size_t start = 0;
  for (size_t dot = dotted.find('.'); dot != std::string::npos; dot = dotted.find('.', start)) {
    node = &(*node)[dotted.substr(start, dot - start)];
    start = dot + 1;
  }
  (*node)[dotted.substr(start)] = std::move(value);
}

// A bound value as printed: secrets masked, durations as text, URL passwords masked.
ordered_json Shown(const OptionSpec& spec, const nlohmann::json& v) {
  switch (spec.type) {
    case OptionType::kSecret:
      return MaskSecret(v.get<std::string>());
    case OptionType::kDuration:
      return DurationText(v.get<int64_t>());
    case OptionType::kString:
      return MaskUrlCredentials(v.get<std::string>());
    case OptionType::kBlock:
      return MaskBlock(*spec.block, v);
    default:
      return ordered_json::parse(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

// The values of `s` in table order, nested by the dotted keys. An unset optional, and an empty
// text of an option without a default, are left out.
template <typename S>
ordered_json RenderRows(const OptionTable<S>& table, const S& s) {
  ordered_json out = ordered_json::object();
  for (const Option<S>& row : table.rows()) {
    nlohmann::json v = row.get(s);
    if (v.is_null()) continue;
    if (row.spec.default_value.is_null() && v.is_string() && v.get<std::string>().empty()) {
      continue;
    }
    SetDotted(out, row.spec.key, Shown(row.spec, v));
  }
  return out;
}

}  // namespace

bool IsSecretHeaderName(std::string_view name) {
  const std::string n = LowerKey(name);
  return n == "authorization" || n == "proxy-authorization" || n == "cookie" || n == "set-cookie" ||
         ContainsAny(n, {"api-key", "apikey", "token", "secret", "password"});
}

bool IsSecretKeyName(std::string_view key) {
  const std::string n = NormalizeKey(key);
  return n == "key" || n == "pwd" || n == "passwd" || n == "authorization" || n == "headervalue" ||
         ContainsAny(n, {"password", "secret", "token", "apikey", "credential", "passphrase",
                         "privatekey"});
}

std::string EmitYaml(const ordered_json& value) {
  std::string out;
  Emit(value, 0, out);
  return out;
}

}  // namespace cfg

std::string RenderMasked(const Config& config) {
  using nlohmann::ordered_json;
  ordered_json root = cfg::RenderRows(cfg::RootOptions(), config);

  ordered_json routes = ordered_json::array();
  for (const RouteConfig& r : config.routes) {
    routes.push_back(cfg::RenderRows(cfg::RouteOptions(), r));
  }
  root["routes"] = std::move(routes);

  ordered_json destinations = ordered_json::object();
  for (const auto& [name, d] : config.destinations) {
    const DestinationType* type = FindDestinationType(d.type);
    static const std::vector<OptionSpec> kNoOptions;
    ordered_json block = cfg::MaskOptions(d.options, "", type ? type->options : kNoOptions);
    ordered_json item;
    item["type"] = d.type;
    for (auto it = block.begin(); it != block.end(); ++it) item[it.key()] = it.value();
    item["headers"] = cfg::MaskHeaders(d.headers);
    if (d.transform) item["transform"] = cfg::RenderRows(TransformOptions(), *d.transform);
    if (d.rate_limit) item["rateLimit"] = cfg::RenderRows(cfg::RateLimitOptions(), *d.rate_limit);
    destinations[name] = std::move(item);
  }
  root["destinations"] = std::move(destinations);

  ordered_json sources = ordered_json::object();
  for (const auto& [name, src] : config.sources) {
    const std::vector<OptionSpec>* options = nullptr;
    for (const cfg::Variant& v : cfg::SourceVariants()) {
      if (v.type == src.type) options = &v.options;
    }
    static const std::vector<OptionSpec> kNoOptions;
    const std::vector<OptionSpec>& table = options ? *options : kNoOptions;
    ordered_json block = cfg::MaskOptions(src.options, "", table);
    ordered_json item;
    item["type"] = src.type;
    for (auto it = block.begin(); it != block.end(); ++it) item[it.key()] = it.value();
    sources[name] = std::move(item);
  }
  if (!sources.empty()) root["sources"] = std::move(sources);

  return cfg::EmitYaml(root);
}

}  // namespace queuebox
