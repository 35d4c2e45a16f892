// sources.h: the option tables of `sources.<name>` (QueueBox reference §11, §12.2): one table per
// source kind, the keys every kind takes (SourceKeys), and the start-up checks of §11.4. `type`
// selects the kind and defaults to http; the broker kinds (rabbitmq, kafka, nats) share
// BrokerSourceKeys and add their own keys (QueueBox reference §11.3).
//
// Thread-safety: every table is built once and immutable.
#pragma once

#include <string>
#include <vector>

#include "config/schema.h"
#include "queuebox/config.h"
#include "queuebox/options.h"

namespace queuebox::cfg {

// Keys of every kind, bound into SourceKeys.
const OptionTable<SourceKeys>& SourceKeyOptions();
// The http kind's table (its own keys plus SourceKeyOptions()), bound into HttpSourceSettings.
const OptionTable<HttpSourceSettings>& HttpSourceOptions();

// Keys every broker kind takes (QueueBox reference §11.3), bound into BrokerSourceKeys, and
// each broker kind's table (its own keys plus BrokerKeyOptions()).
const OptionTable<BrokerSourceKeys>& BrokerKeyOptions();
const OptionTable<RabbitmqSourceSettings>& RabbitmqSourceOptions();
const OptionTable<KafkaSourceSettings>& KafkaSourceOptions();
const OptionTable<NatsSourceSettings>& NatsSourceOptions();

// Source kinds as variants of the typed block, in registry order; each variant's validator runs
// the start-up checks that need only the block.
const std::vector<Variant>& SourceVariants();
// "http, kafka, nats, rabbitmq": the known kinds, sorted, for messages.
std::string KnownSourceTypes();

// Binds a validated source block (SourceConfig::options) into its kind's settings;
// kInvalidArgument when the source is of another kind.
Result<HttpSourceSettings> BindHttpSource(const SourceConfig& source);
// The keys every kind takes (SourceKeyOptions) of any source.
Result<SourceKeys> BindSourceKeys(const SourceConfig& source);
Result<RabbitmqSourceSettings> BindRabbitmqSource(const SourceConfig& source);
Result<KafkaSourceSettings> BindKafkaSource(const SourceConfig& source);
Result<NatsSourceSettings> BindNatsSource(const SourceConfig& source);

}  // namespace queuebox::cfg
