// yaml.cc: yaml-cpp (the only C++ YAML library in Debian, dependencies.md) behind a JSON tree.
#include "config/yaml.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

namespace queuebox::cfg {
namespace {

using nlohmann::json;

json PlainScalar(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kBool("^(true|True|TRUE|false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kBool)) return s[0] == 't' || s[0] == 'T';
  if (std::regex_match(s, kInt)) {
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used == s.size()) return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      return s;  // out of range: kept as text, the option check reports it
    }
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  return s;
}

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
