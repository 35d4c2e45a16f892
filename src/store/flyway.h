// flyway.h: recognising the migration history that QueueBox (the JVM service) keeps in Flyway's
// table, so QueueBox C++ can adopt a database that QueueBox migrated (QueueBox reference §3.1,
// §13.5; docs/schema.md "Adopting a database that QueueBox migrated").
//
// QueueBox applies its PostgreSQL and SQL Server files V1..V11 with Flyway, which records each in
// `flyway_schema_history`: one row per migration (type SQL, version "1".."11", script
// "V1__create_outbox.sql", success true), a BASELINE row when the database was baselined
// (QueueBox baselines at 0 a database that holds only application tables; `queuebox migrate
// --baseline N` records N), a SCHEMA row when Flyway created the schema, DELETE rows when
// `flyway repair` dropped a missing migration. A history is adopted when every row is one of
// those and the applied versions are QueueBox's V1..VN without a gap; the result is N.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "queuebox/status.h"

namespace queuebox::store {

inline constexpr const char* kFlywayHistoryTable = "flyway_schema_history";

// The last migration QueueBox shipped that this build knows (reference §3.1).
inline constexpr int kLastQueueBoxVersion = 11;

// QueueBox's script of `version` (1..kLastQueueBoxVersion): "V6__add_consumption_and_leases.sql".
const char* QueueBoxScript(int version);

// One row of flyway_schema_history (the columns the recognition reads).
struct FlywayRow {
  int64_t installed_rank = 0;
  std::optional<std::string> version;  // NULL for SCHEMA rows and repeatable migrations
  std::string description;
  std::string type;    // SQL, BASELINE, SCHEMA, DELETE, JDBC, ...
  std::string script;  // "V1__create_outbox.sql", "<< Flyway Baseline >>"
  bool success = true;
};

// What an adoptable history shows.
struct FlywayAdoption {
  int version = 0;              // QueueBox's V1..V<version> are applied (0: none)
  std::optional<int> baseline;  // the BASELINE row's version, if any
  std::vector<int> applied;     // versions Flyway applied itself (type SQL), ascending
  int64_t first_rank = 0;       // installed_rank range of the rows read (0 when none)
  int64_t last_rank = 0;
  // One line for the log: "QueueBox V1-V11 (Flyway baseline V0; V1-V11 applied by Flyway;
  // installed_rank 1-12)".
  std::string Summary() const;
};

// Reads `rows` (any order; sorted by installed_rank here). kFailedPrecondition, naming the row
// (installed_rank, version, script) and what to do, when:
//   - a row has success = false (a failed migration: what it left is unknown);
//   - a row is a migration QueueBox never shipped: a version that is not a whole number, a
//     repeatable migration, a type other than SQL/BASELINE/SCHEMA/DELETE, or a version of 1..11
//     whose script is not QueueBox's file of that number;
//   - a version beyond kLastQueueBoxVersion (a newer QueueBox, or a migration added by hand);
//   - the applied versions have a gap (V7 applied, V6 not).
Result<FlywayAdoption> RecogniseQueueBoxHistory(std::vector<FlywayRow> rows);

// Flyway's `success` column as text: PostgreSQL "t"/"f", SQLite and SQL Server "1"/"0".
bool ParseFlywaySuccess(const std::string& text);

}  // namespace queuebox::store
