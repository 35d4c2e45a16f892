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

// QueueBox's default configuration file, read when neither --config nor QUEUEBOX_CONFIG_FILE
// names one. QUEUEBOX_CPP_DEFAULT_CONFIG_FILE (ours, not QueueBox's) moves it, for tests and
// installs under another prefix.
inline constexpr char kDefaultConfigFile[] = "/etc/queuebox/queuebox.yml";
inline constexpr char kDefaultConfigFileVar[] = "QUEUEBOX_CPP_DEFAULT_CONFIG_FILE";
// Where `run` and `migrate` write their log lines: stderr (unset, the default) or stdout, as the
// container image sets it (QueueBox's image logs on stdout). Ours, not a key.
inline constexpr char kLogStreamVar[] = "QUEUEBOX_CPP_LOG_STREAM";

// Where configuration comes from (QueueBox reference §12.1). Precedence per key: QUEUEBOX_*
// variables, then one YAML file: `file` (--config; it must exist), else the file
// QUEUEBOX_CONFIG_FILE names, else `default_file`. A file named by QUEUEBOX_CONFIG_FILE or the
// default that does not exist is skipped, as in QueueBox (env-only deployments keep
// QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml from QueueBox's .env.example); an empty file
// counts as absent. No variable and no file: kInvalidArgument naming every source.
struct ConfigSource {
  std::string file;                        // --config; empty: not given
  std::map<std::string, std::string> env;  // the process environment (injectable for tests)
  std::string default_file = kDefaultConfigFile;
};

// The ConfigSource of this process: `file` from --config, the environment, and the default file
// (kDefaultConfigFileVar when set).
ConfigSource ProcessConfigSource(std::string file);

// Loads and validates. kInvalidArgument with one message listing every problem:
//   "The configuration has N errors. Fix each one and start QueueBox again.\n  - path: reason"
Result<Config> LoadConfig(const ConfigSource& source);

// The environment of this process as a map (for ConfigSource::env).
std::map<std::string, std::string> ProcessEnvironment();

// The configuration as YAML-like text with every secret masked (`check-config`, start log).
std::string RenderMasked(const Config& config);

}  // namespace queuebox
