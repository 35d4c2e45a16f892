// strict_order.h: outbox.ordering: strict on PostgreSQL (docs/claim.md, "Strict order").
//
// A producer's transaction takes its row's sequence from the outbox's sequence (nextval, the
// column default) and holds that sequence's RowExclusiveLock until it ends. Before each strict
// claim the store reads the sequence's last value, then the open transactions that hold that
// lock; the claim's snapshot comes after both. A transaction that could still commit a lower
// sequence than a visible row took its value before that row's, so it is open and listed, or its
// row is visible to the claim (committed), or it has none (rolled back). StrictOrderBound turns
// the readings into the claim's bound: keyed rows above it wait.
//
// Thread-safety: StrictOrderBound is not thread-safe; the store serialises the readings and
// their Observe calls (a reading must be observed before the next one is taken).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace queuebox::store {

class StrictOrderBound {
 public:
  // An open transaction holding the sequence's lock: its virtual transaction id (pg_locks; one
  // per transaction while it runs) and when it began ("YYYY-MM-DDTHH:MI:SS.USZ", UTC;
  // "-infinity" when unknown), the default scheduled_at of the rows it inserts.
  struct Holder {
    std::string vxid;
    std::string started_at = "-infinity";
  };
  // What a reading gives the claim.
  struct Reading {
    // No holder can commit a sequence at or below it that the claim cannot see; rows above the
    // last value (taken after the reading) wait for the next reading too.
    int64_t bound = 0;
    // The earliest start among the holders listed now and those that ended since the previous
    // reading: their rows (due at their start by default) can sort before the claim window's
    // start, so the window starts no later. nullopt when there are none.
    std::optional<std::string> window_from_at;
  };

  // One reading: `last_value`, the last sequence handed out, read before `holders`.
  //
  // A holder first listed by this reading took its values after the previous reading listed the
  // holders, so above the previous reading's last value (its floor); a holder listed by the
  // first reading, and a prepared transaction (it changed its vxid when it was prepared), may
  // hold any value (floor 0) until it ends.
  Reading Observe(int64_t last_value, const std::vector<Holder>& holders);

 private:
  struct Held {
    int64_t floor = 0;
    std::string started_at;
  };
  std::optional<int64_t> previous_last_;  // nullopt before the first reading
  std::map<std::string, Held> held_;      // vxid -> floor, start
};

// The statements of a reading; $1 is the sequence (regclass text) for the holders.
// The last value handed out: last_value, or one less when the sequence was set but not called.
std::string StrictLastValueSql(const std::string& sequence_regclass);
// vxid and start (the format of Holder::started_at; NULL when unknown) of the open transactions
// (other than this session) holding the sequence's RowExclusiveLock in this database.
extern const char kStrictHoldersSql[];
// pid and age in seconds (pg_stat_activity.xact_start; NULL when this role may not read it) of
// the oldest open transaction holding the sequence's lock ($1, regclass text); no row when none.
extern const char kStrictOldestHolderSql[];
// The sequence that fills the outbox's sequence column and its cache size: $1 table, $2 column.
// No row (or a NULL sequence) when the column has no sequence default.
extern const char kStrictSequenceSql[];

}  // namespace queuebox::store
