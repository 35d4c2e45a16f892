// load.h: loading the configuration (include/queuebox/config.h) from YAML and QUEUEBOX_*
// environment variables (QueueBox reference §12). Loading is strict: every problem is collected
// and reported in one message, each with its YAML path (and env var name) and a did-you-mean
// where one fits. This is qb_config's public header.
//
// Thread-safety: the functions may be called from any thread; they read the files and the
// environment they are given.
#pragma once

#include <map>
#include <string>

#include "queuebox/config.h"
#include "queuebox/status.h"

namespace queuebox {

// Where configuration comes from. `file` empty: QUEUEBOX_CONFIG_FILE, else none.
struct ConfigSource {
  std::string file;
  std::map<std::string, std::string> env;  // the process environment (injectable for tests)
};

// Loads and validates. kInvalidArgument with one message listing every problem:
//   "The configuration has N errors. Fix each one and start QueueBox again.\n  - path: reason"
Result<Config> LoadConfig(const ConfigSource& source);

// The environment of this process as a map (for ConfigSource::env).
std::map<std::string, std::string> ProcessEnvironment();

// The configuration as YAML-like text with every secret masked (`check-config`, start log).
std::string RenderMasked(const Config& config);

}  // namespace queuebox
