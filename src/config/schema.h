// schema.h: the declarative option tables of the QueueBox C++ configuration (architecture §7
// rule 4; QueueBox reference §12.2). One table per section drives parsing, defaults, validation,
// environment-variable names, error messages and docs/configuration.md.
//
// Keys inside a table may be dotted ("notify.enabled", "columnMapping.outbox.id"): the nested
// YAML blocks are walked against those components.
//
// Thread-safety: every table is built once and immutable.
#pragma once

#include <string>
#include <vector>

#include "queuebox/options.h"

namespace queuebox::cfg {

// A fixed section of the root: server, database, outbox, http, admin, retention, logging.
struct Section {
  std::string name;                 // root key
  std::string summary;              // one paragraph for the docs
  std::vector<OptionSpec> options;  // keys relative to the section
};

// A block whose keys depend on its `type` (destinations.<name>, admin.auth).
struct Variant {
  std::string type;
  std::vector<OptionSpec> options;  // keys besides `type` (and the common keys)
  BlockValidator validate;          // may be empty
};

// The root sections, in document order.
const std::vector<Section>& RootSections();
// Every key of the root sections prefixed with its section ("outbox.batchSize").
const std::vector<OptionSpec>& RootTable();
// Root keys validated by their own code (not in RootTable): routes, destinations, admin.auth.
const std::vector<std::string>& ReservedRootKeys();

// One item of `routes`.
const std::vector<OptionSpec>& RouteOptions();

// Keys every destination takes besides its type's keys: `headers`.
const std::vector<OptionSpec>& DestinationCommonOptions();
// The built-in destination types (src/destinations/registry.h) as variants, registry order.
const std::vector<Variant>& DestinationVariants();

// admin.auth types: bearer, api-key, hmac (the source auth block of QueueBox §11.1).
const std::vector<Variant>& AdminAuthVariants();
// "api-key, bearer, hmac": the known auth types for messages.
std::string KnownAuthTypes();

// The root keys that hold SQL identifiers (`^[a-zA-Z_][a-zA-Z0-9_]*$`).
bool IsIdentifierKey(const std::string& root_key);

// The admin guard message (QueueBox reference §13.2).
extern const char kAdminGuardMessage[];

}  // namespace queuebox::cfg
