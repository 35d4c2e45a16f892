// yaml.cc: yaml-cpp (the only C++ YAML library in Debian, dependencies.md) behind a JSON tree.
#include "config/yaml.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "json/utf8.h"

namespace queuebox::cfg {

using nlohmann::json;

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Digits from `at` on; returns where they end.
size_t Digits(const std::string& s, size_t at) {
  while (at < s.size() && IsDigit(s[at])) ++at;
  return at;
}

// ^[-+]?[0-9]+$
bool IsPlainInt(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  const size_t end = Digits(s, start);
  return end > start && end == s.size();
}

// ^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$
bool IsPlainFloat(const std::string& s) {
  size_t i = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  if (i < s.size() && s[i] == '.') {
    const size_t end = Digits(s, i + 1);
    if (end == i + 1) return false;
    i = end;
  } else {
    const size_t end = Digits(s, i);
    if (end == i) return false;
    i = end;
    if (i < s.size() && s[i] == '.') i = Digits(s, i + 1);
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '-' || s[j] == '+')) ++j;
    const size_t end = Digits(s, j);
    if (end == j) return false;
    i = end;
  }
  return i == s.size();
}

}  // namespace

// YAML 1.2 core schema for a plain scalar: null, boolean, integer, float, else text. Written out
// rather than std::regex (PlainScalarTest compares the two).
json PlainScalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE" || s == "false" || s == "False" || s == "FALSE") {
    return s[0] == 't' || s[0] == 'T';
  }
  if (IsPlainInt(s)) {
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used == s.size()) return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      return s;  // out of range: kept as text, the option check reports it
    }
  }
  if (IsPlainFloat(s)) {
    try {
      return std::stod(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  return s;
}

namespace {

json ToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      if (node.Tag() == "?") return PlainScalar(node.Scalar());
      return node.Scalar();
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const YAML::Node& item : node) out.push_back(ToJson(item));
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = ToJson(kv.second);
      return out;
    }
  }
  return nullptr;
}

}  // namespace

Result<json> ParseYaml(const std::string& text, const std::string& name) {
  // YAML is UTF-8 text here; yaml-cpp would pass other bytes through into values that no JSON
  // dump (check-config, the logs) can print.
  auto where = [&text](size_t at) {
    const size_t newline = at == 0 ? std::string::npos : text.rfind('\n', at - 1);
    const size_t column = newline == std::string::npos ? at + 1 : at - newline;
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  };
  if (std::optional<size_t> bad = queuebox::json::FirstInvalidUtf8(text)) {
    return InvalidArgument("The configuration file " + name +
                           " is not valid UTF-8: " + where(*bad));
  }
  // Control characters other than tab and line breaks are not YAML text either, and yaml-cpp
  // turns some (a NUL) into bytes that are not UTF-8.
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof(code), "U+%04X", c);
      return InvalidArgument("The configuration file " + name + " contains the control character " +
                             code + ", which YAML does not allow: " + where(i));
    }
  }
  json root;
  try {
    root = ToJson(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("The configuration file " + name + " is not valid YAML: line " +
                           std::to_string(e.mark.line + 1) + ", column " +
                           std::to_string(e.mark.column + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return InvalidArgument("The configuration file " + name + " could not be read: " + e.what());
  }
  if (root.is_null()) return json::object();
  if (!root.is_object()) {
    return InvalidArgument("The configuration file " + name +
                           " must hold a map of sections (server, database, routes, ...)");
  }
  return root;
}

Result<json> LoadYamlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("Cannot read the configuration file " + path + ": " +
                           std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return ParseYaml(text.str(), path);
}

}  // namespace queuebox::cfg
