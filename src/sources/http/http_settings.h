// http_settings.h: the http source kind's settings and option table (QueueBox reference §11.1,
// §11.4, §12.2): each `sources.<name>` of type http (the default type) answers
// POST <inbox.basePath><path> (sources/http/http_source.h).
//
// Thread-safety: the table is built once and immutable.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "queuebox/config.h"
#include "sources/registry.h"
#include "sources/source_keys.h"

namespace queuebox {

// An HTTP (webhook) source: POST <inbox.basePath><path> (QueueBox reference §11.1).
struct HttpSourceSettings {
  std::string name;                               // sources.<name>
  std::string path;                               // required, starts with /
  std::string topic = "{{ eventType }}";          // the relay's topic template
  std::vector<std::string> idempotency_key_path;  // idempotencyKeyPath
  std::optional<std::string> idempotency_key_header;
  std::optional<std::string> aggregate_id_header;
  std::optional<std::string> event_type_header;
  std::optional<int> requests_per_minute;  // rateLimit.requestsPerMinute: one bucket per source
  std::optional<AdminAuthConfig> auth;     // an auth scheme block (auth/auth_schemes.h)
  SourceKeys keys;
};

}  // namespace queuebox

namespace queuebox::sources {

const OptionTable<HttpSourceSettings>& HttpSourceOptions();
// The registry entry: no consumer (the data port serves the routes).
SourceKind HttpSourceKind();
// Binds a validated source block; kInvalidArgument when it is of another kind.
Result<HttpSourceSettings> BindHttpSource(const SourceConfig& source);

}  // namespace queuebox::sources
