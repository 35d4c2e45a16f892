// queuebox_flyway.h: a PostgreSQL database as QueueBox (the JVM service) leaves it: QueueBox's
// V1..V11 statements (tests/testing/queuebox_flyway/, written from the QueueBox reference §3) run
// one by one, each recorded in `flyway_schema_history` the way Flyway records it (one row per
// migration: installed_rank, version, description, type 'SQL', script, CRC32 checksum,
// installed_by, installed_on, execution_time, success). Used to test that QueueBox C++ adopts such
// a database (docs/schema.md, "Adopting a database that QueueBox migrated").
//
// Thread-safety: one test thread. Errors abort the test binary (TempPgDatabase::Exec).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "testing/pg.h"

namespace queuebox::testing {

struct QueueBoxFlywayOptions {
  int up_to = 11;  // the last QueueBox version applied (0..11)
  // Flyway's baseline row: nullopt = none (QueueBox migrated an empty database). N = the
  // statements of V1..VN ran by hand before QueueBox's first start (no history rows of their own)
  // and Flyway recorded a BASELINE row at version N (QueueBox baselines a database that holds
  // only application tables at 0).
  std::optional<int> baseline = {};
};

// Runs QueueBox's migrations on `db` and records them in flyway_schema_history.
void BuildQueueBoxDatabase(TempPgDatabase& db, const QueueBoxFlywayOptions& options = {});

// Creates flyway_schema_history with Flyway's PostgreSQL DDL (when missing).
void CreateFlywayHistory(TempPgDatabase& db);

// One history row as Flyway writes it; `rank` 0 appends after the last row.
struct FlywayHistoryRow {
  int rank = 0;
  std::optional<std::string> version = {};  // "1", "11"; nullopt: SCHEMA rows, repeatables
  std::string description = {};
  std::string type = "SQL";  // SQL | BASELINE | SCHEMA | JDBC | DELETE | ...
  std::string script = {};
  std::optional<int32_t> checksum = {};
  int execution_time_ms = 0;
  bool success = true;
};
void AddFlywayRow(TempPgDatabase& db, const FlywayHistoryRow& row);

// QueueBox's file of version `version` (1..11): its name ("V6__add_consumption_and_leases.sql")
// and text.
std::string QueueBoxScriptName(int version);
std::string QueueBoxScript(int version);

// Flyway's checksum of a SQL file: CRC32 over its lines without line terminators (a leading BOM
// dropped), as a signed 32-bit integer.
int32_t FlywayChecksum(const std::string& text);

}  // namespace queuebox::testing
