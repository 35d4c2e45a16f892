// env.h: QUEUEBOX_* environment variables and ${NAME} placeholders (QueueBox reference §12.1).
//
// Naming (QueueBox's EnvConfigLoader): strip QUEUEBOX_; `__` is a literal `_`; every other `_`
// separates levels; names match keys of the option tables case-insensitively, ignoring `-` and
// `_` (QUEUEBOX_OUTBOX_POLLINTERVALMS -> outbox.pollIntervalMs); a number is a list index
// (QUEUEBOX_ROUTES_0_TOPICPATTERN -> routes[0].topicPattern); a map key (a destination name, a
// header) is the existing YAML key it matches, else the segment in lower case.
// Values merge key by key into blocks; a list set from the environment replaces the whole list.
// QUEUEBOX_CONFIG_FILE, QUEUEBOX_CPP_DEFAULT_CONFIG_FILE and QUEUEBOX_CPP_LOG_STREAM are not keys.
// A variable that binds no key is an error, except Kubernetes service-link variables
// (*_SERVICE_HOST, *_SERVICE_PORT*,
// *_PORT,
// *_PORT_<n>_<TCP|UDP|SCTP>*), which are ignored.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "config/validate.h"

namespace queuebox::cfg {

inline constexpr char kConfigFileVar[] = "QUEUEBOX_CONFIG_FILE";

// True when `name` is a Kubernetes service-link form (see above).
bool IsServiceLinkVariable(const std::string& name);

// Merges the QUEUEBOX_* variables of `env` into `tree` (the YAML map, or an empty object).
// Records the variable of each path in `d` (Diagnostics::SetSource) and adds an error for every
// variable that binds no key. Returns the number of variables that bound a key.
int ApplyEnvironment(const std::map<std::string, std::string>& env, nlohmann::json& tree,
                     Diagnostics& d);

// Replaces `${NAME}` and `${NAME:-fallback}` in every text value under `tree` with the value of
// NAME in `env` (the fallback when NAME is unset or empty). An unset NAME without a fallback is
// an error at the value's path; the value itself is never shown.
void ExpandPlaceholders(nlohmann::json& tree, const std::map<std::string, std::string>& env,
                        const std::string& path, Diagnostics& d);

}  // namespace queuebox::cfg
