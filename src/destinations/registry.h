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
  bool block_private_addresses = false;  // http.blockPrivateAddresses (http destinations)
};

struct DestinationType {
  std::string type;                 // "http", "file", "kafka", "rabbitmq", "nats"
  std::vector<OptionSpec> options;  // keys of the block besides `type` and `headers`
  BlockValidator validate;          // cross-key checks; may be empty
  // Each option's value in a default-constructed settings struct, by key (the defaults test).
  nlohmann::json settings_defaults = nlohmann::json::object();
  std::function<Result<std::unique_ptr<Destination>>(const DestinationConfig&,
                                                     const DestinationContext&)>
      create;
};

// A type whose options bind into `Settings` (which has a `name`): the factory receives the
// settings with `name` and every option of the block set, and adds what is not in the block
// (headers, context).
template <typename Settings>
using SettingsFactory = std::function<Result<std::unique_ptr<Destination>>(
    Settings, const DestinationConfig&, const DestinationContext&)>;

template <typename Settings>
DestinationType MakeDestinationType(std::string type, const OptionTable<Settings>& options,
                                    BlockValidator validate, SettingsFactory<Settings> create) {
  DestinationType t;
  t.type = std::move(type);
  t.options = options.specs();
  t.validate = std::move(validate);
  t.settings_defaults = options.StructDefaults();
  t.create = [options, create = std::move(create)](
                 const DestinationConfig& config,
                 const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
    Settings s;
    s.name = config.name;
    QB_RETURN_IF_ERROR(options.Bind(config.options, s, "destinations." + config.name));
    return create(std::move(s), config, context);
  };
  return t;
}

// Built-in types, in a fixed order (the order of "known types" in messages).
const std::vector<DestinationType>& BuiltinDestinationTypes();
// nullptr when unknown.
const DestinationType* FindDestinationType(std::string_view type);
// "file, http, kafka, nats, rabbitmq": the known type names, sorted, for messages.
std::string KnownDestinationTypes();

}  // namespace queuebox
