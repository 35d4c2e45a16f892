// config_env_fuzz: QUEUEBOX_* environment variables (config/env.h, config/load.h). Each input line
// NAME=VALUE is one variable (later lines win); there is no file, as in an env-only deployment.
// Properties: LoadConfig never throws and never reports kInternal; every error names a path.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "config/load.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  queuebox::ConfigSource source;
  source.default_file = "/nonexistent/queuebox.yml";
  while (!input.empty()) {
    size_t end = input.find('\n');
    std::string_view line = input.substr(0, end);
    input = end == std::string_view::npos ? "" : input.substr(end + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string name(line.substr(0, eq));
    // A file named by the environment is read when it exists: keep the fuzzer off the disk.
    if (name == "QUEUEBOX_CONFIG_FILE" || name == "QUEUEBOX_CPP_DEFAULT_CONFIG_FILE") continue;
    source.env[name] = std::string(line.substr(eq + 1));
  }
  queuebox::Result<queuebox::Config> config = queuebox::LoadConfig(source);
  if (!config.ok()) {
    Require(config.status().code() != queuebox::StatusCode::kInternal,
            "LoadConfig reports no broken invariant");
    Require(!config.status().message().empty(), "a refusal says why");
    return 0;
  }
  (void)queuebox::RenderMasked(*config);
  return 0;
}
