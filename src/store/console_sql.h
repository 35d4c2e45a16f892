// console_sql.h: ConsoleQueries (queuebox/console.h) for every SQL dialect. The statements are
// built here once for both; a dialect differs in its parameters ($n / ?n), its casts, its
// timestamp text and how it estimates (PostgreSQL: pg_class.reltuples; SQLite: sqlite_stat1).
//
// Indexes read (docs/console.md "Indexes"): dead rows by idx_outbox_dead_updated (updated_at,
// sequence), pending and processing rows through their partial indexes, the oldest pending row by
// idx_outbox_pending_created (V25), inbox rows through idx_inbox_state_created, one message by
// its key, the rows waiting behind it by idx_outbox_key_sequence, the outbox row of an inbox row
// by idx_outbox_inbox_id, the per-minute activity (queuebox_console_activity, V24) by its primary
// key (outbox_table, minute, replica_id).
//
// Thread-safety: as the runners it is given (the stores' are thread-safe).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "queuebox/console.h"
#include "queuebox/store.h"
#include "store/common.h"

namespace queuebox::store {

class SqlConsole final : public ConsoleQueries {
 public:
  // Runs one statement already rendered (table and column names in place).
  using Reader = std::function<Result<SqlRows>(const std::string&, const std::vector<SqlParam>&)>;
  // Deletes the dead rows of `table` among `ids` (lowercase UUIDs) with their history.
  using Discarder =
      std::function<Result<int64_t>(const std::string& table, const std::vector<std::string>&)>;

  // `write` runs a statement that writes (SQLite: in its own write transaction); it may be the
  // same runner as `read` where any statement may write (PostgreSQL).
  SqlConsole(DatabaseConfig config, bool postgres, Reader read, Reader write, Discarder discard);

  Result<ConsolePage> List(const ConsoleQuery& query) override;
  Result<int64_t> Count(const ConsoleQuery& query) override;
  Result<std::optional<ConsoleRow>> Get(const std::string& table, const std::string& id) override;
  Result<int64_t> WaitingBehind(const std::string& key, int64_t sequence) override;
  Result<ConsoleCounts> Counts(const std::string& table) override;
  Result<std::optional<ConsoleRow>> FindInbox(const std::string& source,
                                              const std::string& idempotency_key) override;
  Result<std::optional<ConsoleRow>> ForwardedFrom(const std::string& inbox_id) override;
  Result<int64_t> DiscardDead(const std::string& table,
                              const std::vector<std::string>& ids) override;
  // console_activity.cc
  Status RecordActivity(const std::string& replica_id, int64_t sent, int64_t dead) override;
  Result<std::vector<ConsoleMinute>> Activity(int minutes) override;

 private:
  struct Where;
  // The rendered statement of `tmpl` for `table` ("outbox" | "inbox").
  std::string Render(const std::string& table, const std::string& tmpl) const;
  // The selected columns of a row (with payload and headers when `whole`), and its reader.
  std::string Columns(const std::string& table, bool whole) const;
  static ConsoleRow ReadRow(const std::string& table, const SqlRow& r, bool whole);
  std::string Time(const std::string& column) const;
  // WHERE of a query's filters (not its cursor); false when a filter matches nothing.
  Result<bool> Filters(const ConsoleQuery& query, Where& where) const;
  Status Cursor(const ConsoleQuery& query, Where& where) const;
  // `last_error` contains `text`, ASCII case ignored.
  std::string ErrorContains(const std::string& text, Where& where) const;
  // A page of a query with an error-text filter: the matches within a bounded window of rows.
  Result<ConsolePage> SearchErrors(const ConsoleQuery& query, Where& where);
  // The keyset order of a table's pages, and a row's place in it (the cursor text).
  static std::string Order(const std::string& table);
  static std::string Position(const ConsoleRow& row);
  Result<std::optional<ConsoleRow>> One(const std::string& table, const std::string& where_sql,
                                        const std::vector<SqlParam>& params);
  // SQLite: the row count of the table's statistics (sqlite_stat1); -1 when there are none.
  Result<double> Estimate(const std::string& table);

  DatabaseConfig config_;
  bool pg_;
  Reader read_;
  Reader write_;
  Discarder discard_;
};

// The states of a console table ("outbox": pending, processing, sent, dead; "inbox": pending,
// processing, processed, dead); empty for any other name.
const std::vector<std::string>& ConsoleStates(const std::string& table);

}  // namespace queuebox::store
