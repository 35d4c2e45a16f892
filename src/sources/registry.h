// registry.h: the one list of source kinds (QueueBox reference §11), as destinations/registry.h
// is for destinations. Each kind brings, from its folder (sources/<kind>/<kind>_settings.h), its
// settings, its option table (validated by src/config, which offers the kinds as the variants of
// sources.<name>), its start-up checks, what every source holds (SourceCommon) and the factory of
// its consumer. An unknown `type:` fails at start naming the known ones; a broker kind this build
// was compiled without is known (its block validates) and fails when the source is built.
//
// Thread-safety: the registry is immutable; factories may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/options.h"
#include "sources/broker_source.h"
#include "sources/source_keys.h"

namespace queuebox::sources {

// What every source holds, whatever its kind, read through its kind's table.
struct SourceCommon {
  std::string topic;                // topic: the relay's topic template
  SourceKeys keys;                  // the keys every kind takes
  std::optional<std::string> path;  // http: the route after inbox.basePath
};

struct SourceKind {
  std::string type;                 // "http", "kafka", "nats", "rabbitmq"
  std::vector<OptionSpec> options;  // keys of the block besides `type`
  BlockValidator validate;          // start-up checks that need only the block; may be empty
  // Each option's value in a default-constructed settings struct, by key (the defaults test).
  nlohmann::json settings_defaults = nlohmann::json::object();
  // Binds a validated block's common part; kInvalidArgument naming sources.<name>.<key>.
  std::function<Result<SourceCommon>(const SourceConfig&)> common;
  // Builds the consumer of a kind that consumes on its own threads (CreateBrokerSources). Empty
  // for http, whose routes WebhookSources serves on the data port (sources/http/http_source.h).
  std::function<Result<std::unique_ptr<BrokerSource>>(const SourceConfig&,
                                                      const BrokerSourceContext&)>
      create;
};

// Binds a validated block of kind `type` through `options` into `Settings` (which has a
// `name`); kInvalidArgument when the source is of another kind or a value does not bind.
template <typename Settings>
Result<Settings> BindSourceSettings(const SourceConfig& source, std::string_view type,
                                    const OptionTable<Settings>& options) {
  if (source.type != type) {
    return InvalidArgument("sources." + source.name + " is of type " + source.type + ", not " +
                           std::string(type));
  }
  Settings s;
  s.name = source.name;
  QB_RETURN_IF_ERROR(options.Bind(source.options, s, "sources." + source.name));
  return s;
}

// The factory of a kind's consumer, given the bound settings.
template <typename Settings>
using SourceFactory = Result<std::unique_ptr<BrokerSource>> (*)(Settings,
                                                                const BrokerSourceContext&);

// A kind whose options bind into `Settings`: `common` reads the common part of bound settings;
// `create` may be null (http; a broker kind compiled out, which the registry marks).
template <typename Settings>
SourceKind MakeSourceKind(std::string type, const OptionTable<Settings>& options,
                          BlockValidator validate, SourceCommon (*common)(const Settings&),
                          SourceFactory<Settings> create) {
  SourceKind k;
  k.type = type;
  k.options = options.specs();
  k.validate = std::move(validate);
  k.settings_defaults = options.StructDefaults();
  k.common = [type, options, common](const SourceConfig& source) -> Result<SourceCommon> {
    QB_ASSIGN_OR_RETURN(Settings s, BindSourceSettings(source, type, options));
    return common(s);
  };
  if (create != nullptr) {
    k.create = [type, options, create](
                   const SourceConfig& source,
                   const BrokerSourceContext& c) -> Result<std::unique_ptr<BrokerSource>> {
      QB_ASSIGN_OR_RETURN(Settings s, BindSourceSettings(source, type, options));
      return create(std::move(s), c);
    };
  }
  return k;
}

// Built-in kinds, in name order (the order of "known types" in messages).
const std::vector<SourceKind>& BuiltinSourceKinds();
// nullptr when unknown.
const SourceKind* FindSourceKind(std::string_view type);
// "http, kafka, nats, rabbitmq": the known kinds, sorted, for messages.
std::string KnownSourceTypes();
// The common part of a validated source block of any kind.
Result<SourceCommon> BindSourceCommon(const SourceConfig& source);

}  // namespace queuebox::sources
