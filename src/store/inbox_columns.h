// inbox_columns.h: the one list of inbox columns. The stores render their inbox SQL from it;
// src/config declares the database.columnMapping.inbox.* options from it.
//
// Thread-safety: immutable.
#pragma once

#include <span>
#include <string>

#include "queuebox/inbox.h"

namespace queuebox::store {

// One inbox column: its logical name (the SQL-template placeholder and the default column name),
// its setting key (database.columnMapping.inbox.<setting>) and its InboxColumns member.
struct InboxColumnField {
  const char* name;
  const char* setting;
  std::string InboxColumns::*member;
};
// Every inbox column, in QueueBox's order (reference §12.2).
std::span<const InboxColumnField> InboxColumnFields();

}  // namespace queuebox::store
