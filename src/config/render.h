// render.h: helpers of RenderMasked (config/load.h), exposed for tests and for other
// printouts of configuration values (QueueBox reference §10 "Config secrets"). URL credentials
// are masked with core MaskUrlCredentials (core/redaction.h).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace queuebox::cfg {

// Static headers shown as *** in printouts: authorization, proxy-authorization, cookie,
// set-cookie, or a name containing api-key, apikey, token, secret or password (any case).
bool IsSecretHeaderName(std::string_view name);

// Keys whose values are masked even when no option table declares them secret (free-form
// blocks): core IsSecretKey (core/redaction.h), plus `key`, `headerValue` and any key containing
// password, secret, token or apikey (any case, - and _ ignored). Over-masking is accepted.
bool IsSecretKeyName(std::string_view key);

// `ordered_json` as YAML-like text (2-space indent, strings double-quoted).
std::string EmitYaml(const nlohmann::ordered_json& value);

}  // namespace queuebox::cfg
