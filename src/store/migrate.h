// migrate.h: versioned migrations with a history table, shared by every dialect.
//
// The bundled SQL files live in src/store/<dialect>/migrations/V<n>__<description>.sql and are
// embedded at build time (embed_migrations.cmake writes embedded_migrations.cc). A run records
// each applied version in `queuebox_schema_history` (version, description, checksum,
// applied_at), like Flyway does for QueueBox (reference §3, §13.5):
//   - empty database (no history, no outbox table): apply every version;
//   - no history of ours but QueueBox's Flyway history (flyway_schema_history, store/flyway.h):
//     adopt it, i.e. record QueueBox's applied versions V1..VN as a baseline (description
//     "... (adopted from Flyway)", checksum NULL), then apply the later files; a failed or
//     unknown Flyway migration is kFailedPrecondition, nothing changes;
//   - outbox table without either history: kFailedPrecondition asking for `--baseline <version>`;
//   - baseline: record versions <= baseline as applied by hand (checksum NULL), then apply the
//     later ones; a baseline over an existing history is kFailedPrecondition, nothing changes;
//   - an applied version whose file changed since (checksum differs): kFailedPrecondition,
//     unless the recorded checksum is one the dialect lists as an accepted earlier form of that
//     version (a placeholder an earlier release applied, since filled: docs/schema.md
//     "Placeholders"); such a version counts as applied and is not run again.
// The whole run is one transaction (both dialects have transactional DDL), so a failing file
// leaves the database as it was.
//
// Thread-safety: a MigrationBackend is used by one thread for the length of the run.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "queuebox/status.h"
#include "queuebox/store.h"
#include "store/common.h"

namespace queuebox::store {

struct Migration {
  int version = 0;
  const char* description = "";  // from the file name: "create outbox"
  const char* sql = "";
};

// The bundled files of each dialect, ascending by version (generated at build time).
const std::vector<Migration>& PostgresMigrations();
const std::vector<Migration>& SqliteMigrations();

// Accepted earlier checksums per version: the files an earlier release applied under that
// number, before the file took its final text (PostgreSQL V2, V3, V5, V6, V8, V10; SQLite V2).
using EarlierChecksums = std::map<int, std::vector<int32_t>>;
const EarlierChecksums& PostgresEarlierChecksums();
const EarlierChecksums& SqliteEarlierChecksums();

inline constexpr const char* kHistoryTable = "queuebox_schema_history";

// One database connection inside one open transaction, as the runner needs it.
class MigrationBackend {
 public:
  virtual ~MigrationBackend() = default;
  // Opens the transaction and takes whatever lock keeps two replicas from migrating at once.
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual void Rollback() = 0;
  // Runs SQL text that may hold several statements.
  virtual Status ExecScript(const std::string& sql) = 0;
  virtual Result<bool> TableExists(const std::string& table) = 0;
  // Creates the history table (dialect types).
  virtual Status CreateHistory() = 0;
  // One statement with parameters, rows as text.
  virtual Result<SqlRows> Query(const std::string& sql, const std::vector<SqlParam>& params) = 0;
  // The text of parameter n (1-based) in this dialect: "$1" or "?1".
  virtual std::string Param(int n) const = 0;
};

// Runs the migration algorithm above. `config` is checked with RequireDefaultSchema first.
// `earlier`: the dialect's accepted earlier checksums.
Result<MigrateReport> RunMigrations(MigrationBackend& db, const std::vector<Migration>& files,
                                    const DatabaseConfig& config, std::optional<int> baseline,
                                    const EarlierChecksums& earlier = {});

}  // namespace queuebox::store
