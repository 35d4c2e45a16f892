#include "core/json_path.h"

#include <cctype>
#include <charconv>

namespace queuebox {
namespace {

Status NotDefinite(std::string_view path, std::string_view why) {
  return InvalidArgument(std::string(path) + " is not a definite JSONPath: " + std::string(why));
}

Status Malformed(std::string_view path, std::string_view why) {
  return InvalidArgument(std::string(path) + " is not a JSONPath: " + std::string(why));
}

std::string TrimToString(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

Result<JsonPath> JsonPath::Compile(std::string_view raw) {
  const std::string text = TrimToString(raw);
  if (text.empty()) return Malformed(raw, "it is blank");
  JsonPath p;
  p.text_ = text;
  std::string_view s = text;
  size_t i = 0;
  if (s[0] == '$') {
    i = 1;
  } else if (s[0] == '@') {
    return NotDefinite(text, "it starts with @ (a filter's current node)");
  }
  bool first = true;
  while (i < s.size()) {
    char c = s[i];
    if (c == '.' || (first && i == 0)) {
      if (c == '.') {
        ++i;
        if (i < s.size() && s[i] == '.') return NotDefinite(text, "`..` searches the whole tree");
      }
      size_t start = i;
      while (i < s.size() && s[i] != '.' && s[i] != '[') ++i;
      std::string name(s.substr(start, i - start));
      if (name.empty()) return Malformed(text, "a member name is empty");
      if (name == "*") return NotDefinite(text, "`*` names every member");
      if (name.find('(') != std::string::npos) return NotDefinite(text, "functions are not keys");
      p.steps_.emplace_back(std::move(name));
    } else if (c == '[') {
      size_t close = std::string_view::npos;
      if (i + 1 < s.size() && (s[i + 1] == '\'' || s[i + 1] == '"')) {
        char q = s[i + 1];
        size_t end = s.find(q, i + 2);
        if (end == std::string_view::npos) return Malformed(text, "a quoted name is not closed");
        std::string name(s.substr(i + 2, end - i - 2));
        size_t after = end + 1;
        while (after < s.size() && s[after] == ' ') ++after;
        if (after < s.size() && s[after] == ',') {
          return NotDefinite(text, "`['a','b']` names several members");
        }
        if (after >= s.size() || s[after] != ']') return Malformed(text, "`]` is missing");
        p.steps_.emplace_back(std::move(name));
        i = after + 1;
      } else {
        close = s.find(']', i);
        if (close == std::string_view::npos) return Malformed(text, "`]` is missing");
        std::string inner = TrimToString(s.substr(i + 1, close - i - 1));
        if (inner == "*") return NotDefinite(text, "`[*]` names every element");
        if (!inner.empty() && inner[0] == '?') return NotDefinite(text, "a filter names many");
        if (inner.find(':') != std::string::npos) return NotDefinite(text, "a slice names many");
        if (inner.find(',') != std::string::npos) return NotDefinite(text, "a union names many");
        long long index = 0;
        auto [ptr, ec] = std::from_chars(inner.data(), inner.data() + inner.size(), index);
        if (inner.empty() || ec != std::errc() || ptr != inner.data() + inner.size()) {
          return Malformed(text, "`[" + inner + "]` is neither an index nor a quoted name");
        }
        p.steps_.emplace_back(index);
        i = close + 1;
      }
    } else {
      return Malformed(text, std::string("unexpected `") + c + "`");
    }
    first = false;
  }
  return p;
}

const nlohmann::json* JsonPath::Find(const nlohmann::json& document) const {
  const nlohmann::json* node = &document;
  for (const Step& step : steps_) {
    if (const std::string* name = std::get_if<std::string>(&step)) {
      if (!node->is_object()) return nullptr;
      auto it = node->find(*name);
      if (it == node->end()) return nullptr;
      node = &*it;
    } else {
      long long index = std::get<long long>(step);
      if (!node->is_array()) return nullptr;
      long long size = static_cast<long long>(node->size());
      if (index < 0) index += size;
      if (index < 0 || index >= size) return nullptr;
      node = &(*node)[static_cast<size_t>(index)];
    }
  }
  return node;
}

std::optional<std::string> JsonPath::Text(const nlohmann::json& document) const {
  const nlohmann::json* v = Find(document);
  if (v == nullptr) return std::nullopt;
  std::string out;
  if (v->is_string()) {
    out = TrimToString(v->get_ref<const std::string&>());
  } else if (v->is_number() || v->is_boolean()) {
    out = v->dump();
  } else {
    return std::nullopt;  // null, object, array: not a key
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::optional<std::string> FirstText(const std::vector<JsonPath>& paths,
                                     const nlohmann::json& document) {
  for (const JsonPath& p : paths) {
    if (std::optional<std::string> v = p.Text(document)) return v;
  }
  return std::nullopt;
}

}  // namespace queuebox
