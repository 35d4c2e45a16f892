// validate.cc: generic option-table checks (QueueBox reference §12.1, §12.2).
#include "config/validate.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

namespace queuebox::cfg {

using nlohmann::json;

const std::string* Diagnostics::SourceOf(const std::string& path) const {
  auto it = sources_.find(path);
  return it == sources_.end() ? nullptr : &it->second;
}

void Diagnostics::Add(const std::string& path, const std::string& reason) {
  std::string line = path;
  if (const std::string* var = SourceOf(path)) line += " (from " + *var + ")";
  errors_.push_back(line + ": " + reason);
}

Status Diagnostics::ToStatus() const {
  if (errors_.empty()) return Status::Ok();
  std::string msg = "The configuration has " + std::to_string(errors_.size()) +
                    (errors_.size() == 1 ? " error" : " errors") +
                    ". Fix each one and start QueueBox again.";
  for (const std::string& e : errors_) msg += "\n  - " + e;
  return InvalidArgument(std::move(msg));
}

std::string JoinPath(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}

std::string IndexPath(const std::string& base, size_t index) {
  return base + "[" + std::to_string(index) + "]";
}

std::string NormalizeKey(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '-' || c == '_') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

namespace {

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

// Levenshtein with the caller's rows (Suggester reuses them across candidates).
size_t BandedDistance(std::string_view a, std::string_view b, size_t limit,
                      std::vector<size_t>& prev, std::vector<size_t>& cur) {
  const size_t over = limit + 1;
  // A shared prefix or suffix costs no edit.
  while (!a.empty() && !b.empty() && a.front() == b.front()) a.remove_prefix(1), b.remove_prefix(1);
  while (!a.empty() && !b.empty() && a.back() == b.back()) a.remove_suffix(1), b.remove_suffix(1);
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > limit) return over;
  // Each edit changes at most two letter counts, so half the counts' difference is a lower bound.
  // (Summed over the letters present only, each once: their counts are cleared as they are read.)
  std::array<int, 256> counts{};
  for (unsigned char c : a) ++counts[c];
  for (unsigned char c : b) --counts[c];
  size_t differ = 0;
  for (std::string_view s : {a, b}) {
    for (unsigned char c : s) {
      differ += static_cast<size_t>(counts[c] < 0 ? -counts[c] : counts[c]);
      counts[c] = 0;
    }
  }
  if ((differ + 1) / 2 > limit) return over;
  // Ukkonen's band: only cells within `limit` of the diagonal can stay within `limit`, so the
  // cost is O(length * limit), not O(length * length). Cells outside the band read as `over`.
  prev.assign(b.size() + 1, over);
  cur.assign(b.size() + 1, over);
  for (size_t j = 0; j <= std::min(b.size(), limit); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    const size_t lo = i > limit ? i - limit : 1;
    const size_t hi = std::min(b.size(), i + limit);
    cur[0] = i <= limit ? i : over;
    cur[lo - 1] = lo == 1 ? cur[0] : over;  // left of the band (stale from two rows up)
    if (hi < b.size()) cur[hi + 1] = over;  // right of the band, read by the next row
    size_t row_min = cur[0];
    for (size_t j = lo; j <= hi; ++j) {
      const size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      const size_t cell = std::min(std::min(prev[j], cur[j - 1]) + 1, std::min(sub, over));
      cur[j] = cell;
      row_min = std::min(row_min, cell);
    }
    if (row_min > limit) return over;
    std::swap(prev, cur);
  }
  return std::min(prev[b.size()], over);
}

// NormalizeKey(candidate) == normal, without building it.
bool NormalizesTo(std::string_view candidate, std::string_view normal) {
  size_t k = 0;
  for (char c : candidate) {
    if (c == '-' || c == '_') continue;
    if (k == normal.size() || Lower(c) != normal[k]) return false;
    ++k;
  }
  return k == normal.size();
}

}  // namespace

size_t Levenshtein(std::string_view a, std::string_view b, size_t limit) {
  std::vector<size_t> prev, cur;
  return BandedDistance(a, b, limit, prev, cur);
}

Suggester::Suggester(std::string_view key) : lower_key_(key), normal_key_(NormalizeKey(key)) {
  for (char& c : lower_key_) c = Lower(c);
  // A suggestion more than kMaxEdits away helps nobody, and the bound keeps a long unknown name
  // cheap.
  constexpr size_t kMaxEdits = 8;
  best_distance_ = std::min(std::max<size_t>(1, key.size() / 3), kMaxEdits) + 1;
}

void Suggester::Offer(std::string_view candidate) {
  if (best_distance_ == 0) return;  // nothing comes closer than an exact match
  size_t d;
  if (NormalizesTo(candidate, normal_key_)) {
    d = 0;
  } else {
    const size_t limit = best_distance_ - 1;
    const size_t n = lower_key_.size(), m = candidate.size();
    if ((n > m ? n - m : m - n) > limit) return;  // the distance is at least the length gap
    lower_candidate_.assign(candidate);
    for (char& c : lower_candidate_) c = Lower(c);
    d = BandedDistance(lower_key_, lower_candidate_, limit, prev_, cur_);
  }
  if (d < best_distance_) {
    best_distance_ = d;
    best_ = std::string(candidate);
  }
}

std::optional<std::string> DidYouMean(const std::string& key,
                                      const std::vector<std::string>& candidates) {
  Suggester s(key);
  for (const std::string& c : candidates) s.Offer(c);
  return s.best();
}

bool IsSqlIdentifier(std::string_view s) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !letter(s[0])) return false;
  return std::all_of(s.begin() + 1, s.end(),
                     [&](char c) { return letter(c) || (c >= '0' && c <= '9'); });
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

namespace {

// A value in a message: short, and never a secret (callers do not show secrets).
std::string Show(const json& v) {
  std::string s = v.is_string() ? "'" + v.get<std::string>() + "'" : v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<int64_t> ParseInt(std::string_view s) {
  int64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A scalar as text (strings as they are, numbers and booleans as written in JSON).
std::optional<std::string> ScalarText(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  return std::nullopt;
}

std::string RangeText(const OptionSpec& spec) {
  if (spec.min != INT64_MIN && spec.max != INT64_MAX) {
    return "between " + std::to_string(spec.min) + " and " + std::to_string(spec.max);
  }
  if (spec.min != INT64_MIN) return "at least " + std::to_string(spec.min);
  return "at most " + std::to_string(spec.max);
}

std::optional<json> CheckInt(const json& v, const OptionSpec& spec, const std::string& path,
                             Diagnostics& d) {
  std::optional<int64_t> n;
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      d.Add(path, "must be " + RangeText(spec) + ", got " + Show(v));
      return std::nullopt;
    }
    n = v.get<int64_t>();
  } else if (v.is_string()) {
    n = ParseInt(Trim(v.get<std::string>()));
  }
  if (!n) {
    std::string unit = spec.type == OptionType::kMillis ? " (milliseconds)" : "";
    d.Add(path, "must be a whole number" + unit + ", got " + Show(v));
    return std::nullopt;
  }
  if (*n < spec.min || *n > spec.max) {
    d.Add(path, "must be " + RangeText(spec) + ", got " + std::to_string(*n));
    return std::nullopt;
  }
  return json(*n);
}

std::optional<json> CheckBool(const json& v, const std::string& path, Diagnostics& d) {
  if (v.is_boolean()) return v;
  if (v.is_string()) {
    std::string s = Trim(v.get<std::string>());
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s == "true") return json(true);
    if (s == "false") return json(false);
  }
  d.Add(path, "must be true or false, got " + Show(v));
  return std::nullopt;
}

std::optional<json> CheckEnum(const json& v, const OptionSpec& spec, const std::string& path,
                              Diagnostics& d) {
  std::optional<std::string> s = ScalarText(v);
  if (s) {
    for (const std::string& e : spec.enum_values) {
      if (e == *s) return json(*s);
    }
    for (const std::string& e : spec.enum_values) {
      if (NormalizeKey(e) == NormalizeKey(*s)) {
        d.Add(path, "must be one of " + JoinNames(spec.enum_values) +
                        " (exact case); did you mean " + e + "?");
        return std::nullopt;
      }
    }
  }
  d.Add(path, "must be one of " + JoinNames(spec.enum_values) + ", got " + Show(v));
  return std::nullopt;
}

std::optional<json> CheckSecret(const json& v, const std::string& path, Diagnostics& d) {
  std::optional<std::string> s = ScalarText(v);
  if (!s) {
    d.Add(path, "must be a text value or file:<path>");
    return std::nullopt;
  }
  if (s->rfind("file:", 0) != 0) return json(*s);
  std::string file = s->substr(5);
  if (file.empty()) {
    d.Add(path, "file: needs a path (file:/run/secrets/name)");
    return std::nullopt;
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    d.Add(path, "cannot read the secret file '" + file + "': " + std::strerror(errno));
    return std::nullopt;
  }
  std::ostringstream content;
  content << in.rdbuf();
  std::string secret = content.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  return json(std::move(secret));
}

std::optional<json> CheckDuration(const json& v, const std::string& path, Diagnostics& d) {
  const std::string kHint =
      "must be a duration <whole number><s|m|h|d> such as 30s, 15m, 24h or 7d";
  std::optional<std::string> s = ScalarText(v);
  if (!s || s->size() < 2 || s->size() > 14) {
    d.Add(path, kHint + ", got " + Show(v));
    return std::nullopt;
  }
  std::optional<int64_t> n = ParseInt(std::string_view(*s).substr(0, s->size() - 1));
  int64_t unit_ms = 0;
  switch (s->back()) {
    case 's':
      unit_ms = 1000;
      break;
    case 'm':
      unit_ms = 60 * 1000;
      break;
    case 'h':
      unit_ms = 3600 * 1000;
      break;
    case 'd':
      unit_ms = 86400 * 1000;
      break;
    default:
      break;
  }
  if (!n || *n < 0 || unit_ms == 0 || !std::isdigit(static_cast<unsigned char>((*s)[0]))) {
    d.Add(path, kHint + ", got " + Show(v));
    return std::nullopt;
  }
  return json(*n * unit_ms);
}

std::optional<json> CheckStringMap(const json& v, const std::string& path, Diagnostics& d) {
  if (!v.is_object()) {
    d.Add(path, "must be a map of names to text values");
    return std::nullopt;
  }
  json out = json::object();
  bool ok = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::optional<std::string> s = ScalarText(it.value());
    if (!s) {
      d.Add(JoinPath(path, it.key()), "must be a text value");
      ok = false;
      continue;
    }
    out[it.key()] = *s;
  }
  if (!ok) return std::nullopt;
  return out;
}

std::optional<json> CheckStringList(const json& v, const std::string& path, Diagnostics& d) {
  json out = json::array();
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      if (comma == std::string::npos) comma = s.size();
      std::string item = Trim(std::string_view(s).substr(start, comma - start));
      if (!item.empty()) out.push_back(item);
      start = comma + 1;
    }
    return out;
  }
  if (!v.is_array()) {
    d.Add(path, "must be a list of text values or a comma-separated text");
    return std::nullopt;
  }
  bool ok = true;
  for (size_t i = 0; i < v.size(); ++i) {
    std::optional<std::string> s = ScalarText(v[i]);
    if (!s) {
      d.Add(IndexPath(path, i), "must be a text value");
      ok = false;
      continue;
    }
    out.push_back(*s);
  }
  if (!ok) return std::nullopt;
  return out;
}

// True when `key` is `prefix` followed by a dot and more ("a.b" under "a").
bool Under(std::string_view key, std::string_view prefix) {
  return key.size() > prefix.size() && key[prefix.size()] == '.' &&
         key.substr(0, prefix.size()) == prefix;
}

// The keys of a table and the reserved keys, in that order, without copying them.
class TableKeys {
 public:
  TableKeys(const std::vector<OptionSpec>& table, const std::vector<std::string>& reserved)
      : table_(table), reserved_(reserved) {}
  template <typename F>
  void ForEach(F&& f) const {
    for (const OptionSpec& s : table_) f(std::string_view(s.key));
    for (const std::string& k : reserved_) f(std::string_view(k));
  }

 private:
  const std::vector<OptionSpec>& table_;
  const std::vector<std::string>& reserved_;
};

// The key components that may follow `prefix` (dotted) in `keys`.
std::vector<std::string> NextComponents(const TableKeys& keys, const std::string& prefix) {
  std::vector<std::string> out;
  keys.ForEach([&](std::string_view k) {
    if (!prefix.empty() && !Under(k, prefix)) return;
    std::string_view rest = prefix.empty() ? k : k.substr(prefix.size() + 1);
    std::string_view first = rest.substr(0, rest.find('.'));
    if (std::find(out.begin(), out.end(), first) == out.end()) out.emplace_back(first);
  });
  return out;
}

bool HasPrefixKey(const TableKeys& keys, const std::string& prefix) {
  bool found = false;
  keys.ForEach([&](std::string_view k) { found = found || Under(k, prefix); });
  return found;
}

void SetDotted(json& out, const std::string& dotted, json value) {
  json* node = &out;
  size_t start = 0;
  while (true) {
    size_t dot = dotted.find('.', start);
    std::string part =
        dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      (*node)[part] = std::move(value);
      return;
    }
    node = &(*node)[part];
    start = dot + 1;
  }
}

}  // namespace

namespace {
std::optional<json> CheckBlock(const json& value, const OptionSpec& spec, const std::string& path,
                               Diagnostics& d);
void RunBlockValidator(const BlockValidator& validate, const json& block, const std::string& path,
                       Diagnostics& d);
}  // namespace

std::optional<json> ValidateValue(const json& value, const OptionSpec& spec,
                                  const std::string& path, Diagnostics& d) {
  switch (spec.type) {
    case OptionType::kString: {
      std::optional<std::string> s = ScalarText(value);
      if (!s) {
        d.Add(path,
              "must be a text value, not a " + std::string(value.is_array() ? "list" : "block"));
        return std::nullopt;
      }
      if (spec.identifier && !IsSqlIdentifier(*s)) {
        d.Add(path, "must be a SQL identifier (a letter or _, then letters, digits or _), got '" +
                        *s + "'");
        return std::nullopt;
      }
      return json(*s);
    }
    case OptionType::kInt:
    case OptionType::kMillis:
      return CheckInt(value, spec, path, d);
    case OptionType::kBool:
      return CheckBool(value, path, d);
    case OptionType::kEnum:
      return CheckEnum(value, spec, path, d);
    case OptionType::kSecret:
      return CheckSecret(value, path, d);
    case OptionType::kDuration:
      return CheckDuration(value, path, d);
    case OptionType::kStringMap:
      return CheckStringMap(value, path, d);
    case OptionType::kStringList:
      return CheckStringList(value, path, d);
    case OptionType::kAny:
      return value;
    case OptionType::kBlock:
      return CheckBlock(value, spec, path, d);
  }
  return value;
}

json ValidateTable(const json& block, const std::vector<OptionSpec>& table, const TableRules& rules,
                   const std::string& path, Diagnostics& d) {
  json out = json::object();
  if (!block.is_null() && !block.is_object()) {
    d.Add(path, "must be a block of keys, got " + Show(block));
    return out;
  }
  const TableKeys all_keys(table, rules.reserved);
  std::set<std::string> given;  // present, non-null (checked, even if invalid)

  std::function<void(const json&, const std::string&)> walk = [&](const json& obj,
                                                                  const std::string& prefix) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const std::string full = prefix.empty() ? it.key() : prefix + "." + it.key();
      const std::string full_path = JoinPath(path, full);
      if (std::find(rules.reserved.begin(), rules.reserved.end(), full) != rules.reserved.end()) {
        continue;
      }
      auto spec = std::find_if(table.begin(), table.end(),
                               [&](const OptionSpec& s) { return s.key == full; });
      if (spec != table.end()) {
        if (it.value().is_null()) continue;  // `key:` with no value means "unset"
        given.insert(full);
        std::optional<json> v = ValidateValue(it.value(), *spec, full_path, d);
        if (v) SetDotted(out, full, std::move(*v));
      } else if (HasPrefixKey(all_keys, full)) {
        if (it.value().is_object()) {
          walk(it.value(), full);
        } else if (!it.value().is_null()) {
          d.Add(full_path,
                "must be a block with the keys " + JoinNames(NextComponents(all_keys, full)));
        }
      } else {
        std::optional<std::string> reason;
        if (rules.unknown_reason) reason = rules.unknown_reason(full);
        if (!reason) {
          std::vector<std::string> candidates = NextComponents(all_keys, prefix);
          std::optional<std::string> guess = DidYouMean(it.key(), candidates);
          reason = guess ? "unknown key; did you mean " + *guess + "?"
                         : "unknown key; this block takes " + JoinNames(candidates);
        }
        d.Add(full_path, *reason);
      }
    }
  };
  if (block.is_object()) walk(block, "");

  for (const OptionSpec& s : table) {
    if (given.count(s.key)) continue;
    if (!s.default_value.is_null()) {
      std::optional<json> v = ValidateValue(s.default_value, s, JoinPath(path, s.key), d);
      if (v) SetDotted(out, s.key, std::move(*v));
    } else if (s.required) {
      d.Add(JoinPath(path, s.key), "required key is missing");
    }
  }
  return out;
}

std::optional<VariantResult> ValidateVariant(const json& block,
                                             const std::vector<Variant>& variants,
                                             const std::vector<OptionSpec>& common,
                                             const std::string& known_types,
                                             const std::string& path, Diagnostics& d) {
  if (!block.is_null() && !block.is_object()) {
    d.Add(path, "must be a block with a type, got " + Show(block));
    return std::nullopt;
  }
  if (block.is_null() || !block.contains("type") || block["type"].is_null()) {
    d.Add(path, "missing type; set one of " + known_types);
    return std::nullopt;
  }
  const json& type_value = block["type"];
  std::string type = type_value.is_string() ? type_value.get<std::string>() : type_value.dump();
  auto variant = std::find_if(variants.begin(), variants.end(),
                              [&](const Variant& v) { return v.type == type; });
  if (variant == variants.end()) {
    std::vector<std::string> names;
    for (const Variant& v : variants) names.push_back(v.type);
    std::optional<std::string> guess = DidYouMean(type, names);
    d.Add(JoinPath(path, "type"), "unknown type " + Show(type_value) + "; " +
                                      (guess ? "did you mean " + *guess + "? " : "") +
                                      "set one of " + known_types);
    return std::nullopt;
  }
  std::vector<OptionSpec> table = variant->options;
  table.insert(table.end(), common.begin(), common.end());
  TableRules rules;
  rules.reserved = {"type"};
  rules.unknown_reason = [&](const std::string& key) -> std::optional<std::string> {
    std::vector<std::string> takers;
    for (const Variant& other : variants) {
      for (const OptionSpec& o : other.options) {
        if (o.key == key || o.key.rfind(key + ".", 0) == 0) {
          takers.push_back(other.type);
          break;
        }
      }
    }
    if (takers.empty()) return std::nullopt;
    std::sort(takers.begin(), takers.end());
    return "unknown key for type " + type + "; " +
           (takers.size() == 1 ? "type " + takers[0] + " takes it"
                               : "types " + JoinNames(takers) + " take it");
  };
  const size_t before = d.size();
  json out = ValidateTable(block, table, rules, path, d);
  if (d.size() == before && variant->validate) RunBlockValidator(variant->validate, out, path, d);
  if (d.size() == before && variant->complete) variant->complete(out);
  if (d.size() != before) return std::nullopt;
  return VariantResult{type, std::move(out)};
}

namespace {

// Runs `validate` on a block that had no other problem; its "key: reason" problems are added
// under `path`.
void RunBlockValidator(const BlockValidator& validate, const json& block, const std::string& path,
                       Diagnostics& d) {
  std::vector<std::string> problems;
  try {
    problems = validate(block);
  } catch (const std::exception&) {
    problems = {"the block could not be checked"};
  }
  for (const std::string& p : problems) {
    size_t colon = p.find(": ");
    if (colon == std::string::npos) {
      d.Add(path, p);
    } else {
      d.Add(JoinPath(path, p.substr(0, colon)), p.substr(colon + 2));
    }
  }
}

std::optional<json> CheckBlock(const json& value, const OptionSpec& spec, const std::string& path,
                               Diagnostics& d) {
  const BlockSchema& schema = *spec.block;
  if (!schema.variants.empty()) {
    std::optional<VariantResult> v = ValidateVariant(value, schema.variants, schema.options,
                                                     KnownTypes(schema.variants), path, d);
    if (!v) return std::nullopt;
    v->block["type"] = v->type;
    return std::move(v->block);
  }
  const size_t before = d.size();
  json out = ValidateTable(value, schema.options, {}, path, d);
  if (d.size() == before && schema.validate) RunBlockValidator(schema.validate, out, path, d);
  if (d.size() != before) return std::nullopt;
  return out;
}

}  // namespace

}  // namespace queuebox::cfg
