// columns.h: the one list of outbox columns. The stores render their SQL from it; src/config
// declares the database.columnMapping.outbox.* options from it. Public in qb_store.
//
// Thread-safety: immutable.
#pragma once

#include <span>
#include <string>

#include "queuebox/store.h"

namespace queuebox::store {

// One outbox column: its logical name (the SQL-template placeholder and the default column
// name), its setting key (database.columnMapping.outbox.<setting>) and its OutboxColumns member.
struct OutboxColumnField {
  const char* name;
  const char* setting;
  std::string OutboxColumns::*member;
};
// Every outbox column, in the seed's order.
std::span<const OutboxColumnField> OutboxColumnFields();

}  // namespace queuebox::store
