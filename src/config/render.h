// render.h: helpers of RenderMasked (include/queuebox/config.h), exposed for tests and for other
// printouts of configuration values (QueueBox reference §10 "Config secrets").
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace queuebox::cfg {

// `scheme://user:pass@host/...` -> `scheme://***@host/...`; query parameters password, pwd,
// secret, token (any case) -> `=***`. Text without a URL is returned unchanged.
std::string MaskUrlCredentials(std::string_view text);

// Static headers shown as *** in printouts: authorization, proxy-authorization, cookie,
// set-cookie, or a name containing api-key, apikey, token, secret or password (any case).
bool IsSecretHeaderName(std::string_view name);

// Keys whose values are masked even when no option table declares them secret (free-form
// blocks): password, secret, token, apikey, credential, passphrase ... (any case, - and _
// ignored). Over-masking is accepted.
bool IsSecretKeyName(std::string_view key);

// `ordered_json` as YAML-like text (2-space indent, strings double-quoted).
std::string EmitYaml(const nlohmann::ordered_json& value);

}  // namespace queuebox::cfg
