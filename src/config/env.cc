// env.cc: QUEUEBOX_* variables onto the configuration tree, and ${NAME} placeholders.
#include "config/env.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>
#include <vector>

#include "config/load.h"
#include "config/schema.h"
#include "config/yaml.h"
#include "json/utf8.h"
#include "queuebox/config.h"
#include "sources/registry.h"

namespace queuebox::cfg {
namespace {

using nlohmann::json;
// One step of a key path: a map key or a list index. (Not std::variant: g++ 12 warns
// maybe-uninitialized on copies of it at -O2.)
struct PathElem {
  PathElem(std::string k) : key(std::move(k)) {}    // NOLINT: implicit by design
  PathElem(const char* k) : key(k) {}               // NOLINT: implicit by design
  PathElem(size_t i) : index(i), is_index(true) {}  // NOLINT: implicit by design
  std::string key;
  size_t index = 0;
  bool is_index = false;
};
using Path = std::vector<PathElem>;

constexpr char kPrefix[] = "QUEUEBOX_";

std::string PathText(const Path& p) {
  std::string out;
  for (const PathElem& e : p) {
    out = e.is_index ? IndexPath(out, e.index) : JoinPath(out, e.key);
  }
  return out;
}

std::string LowerName(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "OUTBOX_POLL__INTERVAL_MS" -> {"OUTBOX", "POLL_INTERVAL", "MS"}; nullopt for an empty level.
std::optional<std::vector<std::string>> SplitName(const std::string& rest) {
  std::vector<std::string> segs;
  std::string cur;
  for (size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] != '_') {
      cur += rest[i];
    } else if (i + 1 < rest.size() && rest[i + 1] == '_') {
      cur += '_';
      ++i;
    } else {
      if (cur.empty()) return std::nullopt;
      segs.push_back(cur);
      cur.clear();
    }
  }
  if (cur.empty()) return std::nullopt;
  segs.push_back(cur);
  return segs;
}

std::vector<std::string> SplitDots(const std::string& key) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t dot = key.find('.', start);
    out.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

const json* Lookup(const json& tree, const Path& path) {
  const json* node = &tree;
  for (const PathElem& e : path) {
    if (!e.is_index) {
      if (!node->is_object() || !node->contains(e.key)) return nullptr;
      node = &(*node)[e.key];
    } else {
      if (!node->is_array() || e.index >= node->size()) return nullptr;
      node = &(*node)[e.index];
    }
  }
  return node;
}

// The existing map key `seg` names (case-insensitive, ignoring - and _), else `seg` lower case.
std::string MapKey(const std::string& seg, const json* node) {
  if (node != nullptr && node->is_object()) {
    const std::string normal = NormalizeKey(seg);
    for (auto it = node->begin(); it != node->end(); ++it) {
      if (NormalizeKey(it.key()) == normal) return it.key();
    }
  }
  return LowerName(seg);
}

std::optional<size_t> Index(const std::string& seg) {
  if (seg.empty() || seg.size() > 6) return std::nullopt;
  for (char c : seg) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  return static_cast<size_t>(std::stoul(seg));
}

std::string EnvName(const std::string& prefix, const std::string& dotted_key) {
  std::string out = prefix;
  for (char c : dotted_key) out += c == '.' ? '_' : static_cast<char>(std::toupper(c));
  return out;
}

// The keys of one block as variable names see them, built once per block (EnvTables): the
// tables are immutable, and a variable is resolved by comparing precomputed normal forms instead
// of copying the table and normalising every key again.
struct EnvTable;
struct EnvKey {
  std::string key;                   // dotted, as in the table
  std::vector<std::string> comps;    // its dotted components
  std::vector<std::string> normals;  // NormalizeKey of each component
  std::string env_suffix;            // EnvName("", key): upper case, '.' -> '_'
  OptionType type;
  const EnvTable* block = nullptr;  // kBlock: the block's keys
};
struct EnvTable {
  std::vector<EnvKey> keys;
};

class EnvTables {
 public:
  EnvTables() {
    root_ = Build(RootTable());
    route_ = Build(RouteOptions().specs());
    destination_ = Build(Union(DestinationVariants(), DestinationCommonOptions().specs()));
    source_ = Build(Union(SourceVariants(), {}));
  }
  const EnvTable& root() const { return *root_; }
  const EnvTable& route() const { return *route_; }
  const EnvTable& destination() const { return *destination_; }
  const EnvTable& source() const { return *source_; }

 private:
  static std::vector<OptionSpec> Union(const std::vector<Variant>& variants,
                                       const std::vector<OptionSpec>& common) {
    OptionSpec type;
    type.key = "type";
    std::vector<OptionSpec> out = {type};
    out.insert(out.end(), common.begin(), common.end());
    for (const Variant& v : variants) out.insert(out.end(), v.options.begin(), v.options.end());
    return out;
  }

  const EnvTable* Build(const std::vector<OptionSpec>& specs) {
    auto table = std::make_unique<EnvTable>();
    for (const OptionSpec& spec : specs) {
      EnvKey k;
      k.key = spec.key;
      k.comps = SplitDots(spec.key);
      for (const std::string& c : k.comps) k.normals.push_back(NormalizeKey(c));
      k.env_suffix = EnvName("", spec.key);
      k.type = spec.type;
      if (spec.type == OptionType::kBlock) k.block = BlockOf(*spec.block);
      table->keys.push_back(std::move(k));
    }
    owned_.push_back(std::move(table));
    return owned_.back().get();
  }

  // Every key a block of `schema` may hold (any type's keys for a typed block).
  const EnvTable* BlockOf(const BlockSchema& schema) {
    auto it = blocks_.find(&schema);
    if (it != blocks_.end()) return it->second;
    const EnvTable* t =
        Build(schema.variants.empty() ? schema.options : Union(schema.variants, schema.options));
    blocks_[&schema] = t;
    return t;
  }

  std::vector<std::unique_ptr<EnvTable>> owned_;
  std::map<const BlockSchema*, const EnvTable*> blocks_;
  const EnvTable* root_;
  const EnvTable* route_;
  const EnvTable* destination_;
  const EnvTable* source_;
};

const EnvTables& Tables() {
  static const EnvTables* const tables = new EnvTables();
  return *tables;
}

// The block a name is resolved in: its keys, where they start in the name, the path so far.
struct Scope {
  const EnvTable* table;
  size_t first;
  Path path;
  std::string env_prefix;  // for suggestions: "QUEUEBOX_ROUTES_0_"
};

// Resolves segs[scope.first..] (`normals`: their NormalizeKey) against scope.table, appending the
// key path to scope.path. A block-valued key continues in its block: `scope` then describes the
// deepest block reached (its keys are the suggestions when the rest does not resolve).
bool Resolve(const std::vector<std::string>& segs, const std::vector<std::string>& normals,
             const json& tree, Scope& scope) {
  const EnvKey* best = nullptr;
  size_t best_len = 0;
  const size_t i = scope.first;
  for (const EnvKey& k : scope.table->keys) {
    const size_t len = k.normals.size();
    if (len > segs.size() - i || len <= best_len) continue;
    bool match = true;
    for (size_t j = 0; j < len && match; ++j) match = k.normals[j] == normals[i + j];
    if (match) {
      best = &k;
      best_len = len;
    }
  }
  if (best == nullptr) return false;
  Path& out = scope.path;
  for (const std::string& c : best->comps) out.push_back(c);
  size_t j = i + best_len;
  switch (best->type) {
    case OptionType::kStringMap:
      if (j + 1 != segs.size()) return false;
      out.push_back(MapKey(segs[j], Lookup(tree, out)));
      return true;
    case OptionType::kStringList:
      if (j == segs.size()) return true;
      if (j + 1 != segs.size() || !Index(segs[j])) return false;
      out.push_back(*Index(segs[j]));
      return true;
    case OptionType::kAny:
      // A number is a list index (QueueBox's FILTER_REQUIRE_0_HEADER), unless the file already
      // has a map there.
      for (; j < segs.size(); ++j) {
        const json* at = Lookup(tree, out);
        if (Index(segs[j]) && (at == nullptr || !at->is_object())) {
          out.push_back(*Index(segs[j]));
        } else {
          out.push_back(MapKey(segs[j], at));
        }
      }
      return true;
    case OptionType::kBlock: {
      if (j == segs.size()) return false;  // a block is set key by key
      scope.env_prefix += best->env_suffix;
      scope.env_prefix += '_';
      scope.table = best->block;
      scope.first = j;
      return Resolve(segs, normals, tree, scope);
    }
    default:
      return j == segs.size();
  }
}

std::optional<Scope> ScopeOf(const std::vector<std::string>& segs, const std::string& n0,
                             const json& tree) {
  if (n0 == "routes") {
    if (segs.size() < 3 || !Index(segs[1])) return std::nullopt;
    return Scope{
        &Tables().route(), 2, {"routes", *Index(segs[1])}, "QUEUEBOX_ROUTES_" + segs[1] + "_"};
  }
  if (n0 == "destinations") {
    if (segs.size() < 3) return std::nullopt;
    Path p = {"destinations"};
    p.push_back(MapKey(segs[1], Lookup(tree, p)));
    return Scope{&Tables().destination(), 2, p, "QUEUEBOX_DESTINATIONS_" + segs[1] + "_"};
  }
  if (n0 == "sources") {
    if (segs.size() < 3) return std::nullopt;
    Path p = {"sources"};
    p.push_back(MapKey(segs[1], Lookup(tree, p)));
    return Scope{&Tables().source(), 2, p, "QUEUEBOX_SOURCES_" + segs[1] + "_"};
  }
  return Scope{&Tables().root(), 0, {}, kPrefix};
}

void Set(json& root, const Path& path, std::string value) {
  json* node = &root;
  for (const PathElem& e : path) {
    if (!e.is_index) {
      if (!node->is_object()) *node = json::object();
      node = &(*node)[e.key];
    } else {
      if (!node->is_array()) *node = json::array();
      while (node->size() <= e.index) node->push_back(nullptr);
      node = &(*node)[e.index];
    }
  }
  *node = std::move(value);
}

// Blocks merge key by key; anything else (lists included) replaces.
void Merge(json& base, const json& overlay) {
  if (base.is_object() && overlay.is_object()) {
    for (auto it = overlay.begin(); it != overlay.end(); ++it) Merge(base[it.key()], it.value());
  } else {
    base = overlay;
  }
}

std::optional<std::string> ExpandText(const std::string& s,
                                      const std::map<std::string, std::string>& env,
                                      const std::string& path, Diagnostics& d) {
  // ^[A-Za-z_][A-Za-z0-9_.]*$
  auto is_name = [](const std::string& n) {
    auto letter = [](char c) {
      return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    };
    if (n.empty() || !letter(n[0])) return false;
    return std::all_of(n.begin() + 1, n.end(),
                       [&](char c) { return letter(c) || (c >= '0' && c <= '9') || c == '.'; });
  };
  std::string out;
  size_t i = 0;
  while (true) {
    size_t open = s.find("${", i);
    if (open == std::string::npos) break;
    out += s.substr(i, open - i);
    size_t close = s.find('}', open + 2);
    if (close == std::string::npos) {
      d.Add(path, "a placeholder starts with ${ but has no closing }");
      return std::nullopt;
    }
    std::string inner = s.substr(open + 2, close - open - 2);
    size_t sep = inner.find(":-");
    std::string name = inner.substr(0, sep);
    if (!is_name(name)) {
      d.Add(path, "placeholder ${" + name + "} is not a variable name");
      return std::nullopt;
    }
    auto var = env.find(name);
    if (var != env.end() && (sep == std::string::npos || !var->second.empty())) {
      out += var->second;
    } else if (sep != std::string::npos) {
      out += inner.substr(sep + 2);
    } else {
      d.Add(path, "placeholder ${" + name + "} names an unset environment variable; set " + name +
                      " or write ${" + name + ":-<default>}");
      return std::nullopt;
    }
    i = close + 1;
  }
  out += s.substr(i);
  return out;
}

}  // namespace

// The whole of `name` matches
// ^.*_(SERVICE_HOST|SERVICE_PORT(_.*)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_.*)?)$ (ECMAScript: `.` is
// any character but \n and \r). Written out: std::regex backtracks through the leading .* and its
// recursion grows with the name (env_test compares the two).
bool IsServiceLinkVariable(const std::string& name) {
  if (name.find_first_of("\n\r") != std::string::npos) return false;
  auto form = [](std::string_view t) {
    auto starts = [&t](std::string_view p) { return t.substr(0, p.size()) == p; };
    if (t == "SERVICE_HOST" || t == "PORT") return true;
    if (starts("SERVICE_PORT")) return t.size() == 12 || t[12] == '_';
    if (!starts("PORT_")) return false;
    size_t i = 5;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    if (i == 5 || i == t.size() || t[i] != '_') return false;
    t.remove_prefix(i + 1);
    for (std::string_view proto : {"TCP", "UDP", "SCTP"}) {
      if (starts(proto)) return t.size() == proto.size() || t[proto.size()] == '_';
    }
    return false;
  };
  for (size_t at = name.find('_'); at != std::string::npos; at = name.find('_', at + 1)) {
    if (form(std::string_view(name).substr(at + 1))) return true;
  }
  return false;
}

int ApplyEnvironment(const std::map<std::string, std::string>& env, json& tree, Diagnostics& d) {
  json overlay = json::object();
  int bound = 0;
  for (const auto& [name, value] : env) {
    if (name.rfind(kPrefix, 0) != 0 || name == kConfigFileVar || name == kDefaultConfigFileVar ||
        name == kLogStreamVar) {
      continue;
    }
    if (queuebox::json::FirstInvalidUtf8(
            value)) {  // nothing could print it (check-config, the logs)
      d.Add(name, "the value is not valid UTF-8");
      continue;
    }
    std::optional<std::vector<std::string>> segs = SplitName(name.substr(sizeof(kPrefix) - 1));
    std::optional<Scope> scope;
    std::vector<std::string> normals;
    if (segs) {
      for (const std::string& seg : *segs) normals.push_back(NormalizeKey(seg));
      scope = ScopeOf(*segs, normals[0], tree);
    }
    bool ok = scope && Resolve(*segs, normals, tree, *scope);
    if (!ok) {
      if (IsServiceLinkVariable(name)) continue;
      Suggester suggest(name);
      if (scope) {
        std::string candidate;  // EnvName(scope->env_prefix, key), one buffer for all keys
        for (const EnvKey& k : scope->table->keys) {
          candidate.assign(scope->env_prefix);
          candidate += k.env_suffix;
          suggest.Offer(candidate);
        }
      }
      const std::optional<std::string>& guess = suggest.best();
      d.Add(name, "this QUEUEBOX_ variable names no configuration key" +
                      (guess ? "; did you mean " + *guess + "?" : std::string()));
      continue;
    }
    const Path& path = scope->path;
    const std::string text = PathText(path);
    if (const std::string* other = d.SourceOf(text)) {
      d.Add(name, "sets " + text + ", which " + *other + " sets too; keep one of them");
      continue;
    }
    d.SetSource(text, name);
    Set(overlay, path, value);
    ++bound;
  }
  if (!tree.is_object()) tree = json::object();
  Merge(tree, overlay);
  return bound;
}

void ExpandPlaceholders(json& tree, const std::map<std::string, std::string>& env,
                        const std::string& path, Diagnostics& d) {
  if (tree.is_string()) {
    const std::string& s = tree.get_ref<const std::string&>();
    if (s.find("${") == std::string::npos) return;
    std::optional<std::string> expanded = ExpandText(s, env, path, d);
    if (expanded && queuebox::json::FirstInvalidUtf8(*expanded)) {
      d.Add(path, "a placeholder's value is not valid UTF-8");
    } else if (expanded) {
      tree = std::move(*expanded);
    }
  } else if (tree.is_object()) {
    for (auto it = tree.begin(); it != tree.end(); ++it) {
      ExpandPlaceholders(it.value(), env, JoinPath(path, it.key()), d);
    }
  } else if (tree.is_array()) {
    for (size_t i = 0; i < tree.size(); ++i) {
      ExpandPlaceholders(tree[i], env, IndexPath(path, i), d);
    }
  }
}

}  // namespace queuebox::cfg
