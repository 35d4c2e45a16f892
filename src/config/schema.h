// schema.h: the option tables of the QueueBox C++ configuration (QueueBox reference §12.2). Each
// row declares one option and binds it into its struct (include/queuebox/options.h); the tables
// drive validation, binding, environment-variable names, error messages, the masked printout
// and docs/configuration.md. Destination types bring their own tables
// (src/destinations/registry.h).
//
// Keys inside a table may be dotted ("notify.enabled", "columnMapping.outbox.id"): the nested
// YAML blocks are walked against those components.
//
// Thread-safety: every table is built once and immutable.
#pragma once

#include <string>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/options.h"

namespace queuebox::cfg {

// A fixed section of the root: server, database, outbox, http, admin, retention, logging.
struct Section {
  std::string name;             // root key
  std::string summary;          // one paragraph for the docs
  OptionTable<Config> options;  // keys relative to the section
};

// One type of a block whose keys depend on its `type` (destinations.<name>, admin.auth).
using Variant = BlockVariant;

// "a, b, c": the sorted type names of `variants`, for messages.
std::string KnownTypes(const std::vector<Variant>& variants);

// The root sections, in document order.
const std::vector<Section>& RootSections();
// Every key of the root sections prefixed with its section ("outbox.batchSize"), bound into
// Config.
const OptionTable<Config>& RootOptions();
// RootOptions().specs().
const std::vector<OptionSpec>& RootTable();
// Root keys validated by their own code (not in RootTable): routes, destinations.
const std::vector<std::string>& ReservedRootKeys();

// One item of `routes`.
const OptionTable<RouteConfig>& RouteOptions();

// Keys every destination takes besides its type's keys: `headers`, `transform`.
const OptionTable<CircuitBreakerConfig>& CircuitBreakerOptions();
const OptionTable<RateLimitConfig>& RateLimitOptions();
const OptionTable<DestinationConfig>& DestinationCommonOptions();
// The built-in destination types (src/destinations/registry.h) as variants, registry order.
const std::vector<Variant>& DestinationVariants();
// The source kinds (src/sources/registry.h) as the variants of sources.<name>, registry order.
const std::vector<Variant>& SourceVariants();

// The admin guard message (QueueBox reference §13.2).
extern const char kAdminGuardMessage[];

}  // namespace queuebox::cfg
