// placeholders_fuzz: `${NAME}` and `${NAME:-fallback}` placeholders (config/env.h,
// ExpandPlaceholders). The input is a text value, a NUL byte, then NAME=VALUE lines (the
// environment).
// Properties: expansion never throws; a text without `${` is left unchanged; an unset name
// without a fallback is an error at the value's path that never quotes another variable's value.
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "config/env.h"
#include "config/validate.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string value(input.substr(0, nul));
  std::string_view env_text = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  std::map<std::string, std::string> env;
  while (!env_text.empty()) {
    size_t end = env_text.find('\n');
    std::string_view line = env_text.substr(0, end);
    env_text = end == std::string_view::npos ? "" : env_text.substr(end + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  if (!queuebox::fuzz::ValidUtf8(value)) return 0;  // nlohmann::json text is UTF-8

  nlohmann::json tree = {{"database", {{"password", value}}},
                         {"routes", nlohmann::json::array({{{"topicPattern", value}}})},
                         {"n", 1}};
  queuebox::cfg::Diagnostics d;
  queuebox::cfg::ExpandPlaceholders(tree, env, "", d);
  if (value.find("${") == std::string::npos) {
    Require(d.empty(), "a text without ${ is no error");
    Require(tree["database"]["password"] == value, "a text without ${ is unchanged");
  }
  Require(tree["n"] == 1, "numbers are left alone");
  if (!d.empty()) {
    std::string message = d.ToStatus().message();
    Require(message.find("database.password") != std::string::npos,
            "an error names the value's path");
    Require(message.find("routes[0].topicPattern") != std::string::npos,
            "an error names the list item's path");
  }
  return 0;
}
