// registry.h: the one list of built-in destination types (architecture §7 rule 5). Each type
// brings its option table (parsed and validated by src/config), an optional cross-key validator,
// and a factory. An unknown `type:` fails at start naming the known ones.
//
// Thread-safety: the registry is immutable; factories may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/destination.h"
#include "queuebox/options.h"

namespace queuebox {

// What a destination factory may use besides its own block.
struct DestinationContext {
  int max_error_body_bytes = 2048;  // http.maxErrorBodyBytes: cut of failure texts
  // Called with every HTTP response status an http destination receives (0 when no response
  // arrived), for queuebox_http_publish_responses_total{status_class}. Optional; thread-safe.
  std::function<void(int status)> on_http_response;
};

struct DestinationType {
  std::string type;                 // "http", "file", "kafka", "rabbitmq", "nats"
  std::vector<OptionSpec> options;  // keys of the block besides `type` and `headers`
  BlockValidator validate;          // cross-key checks; may be empty
  std::function<Result<std::unique_ptr<Destination>>(const DestinationConfig&,
                                                     const DestinationContext&)>
      create;
};

// Built-in types, in a fixed order (the order of "known types" in messages).
const std::vector<DestinationType>& BuiltinDestinationTypes();
// nullptr when unknown.
const DestinationType* FindDestinationType(std::string_view type);
// "file, http, kafka, nats, rabbitmq": the known type names, sorted, for messages.
std::string KnownDestinationTypes();

}  // namespace queuebox
