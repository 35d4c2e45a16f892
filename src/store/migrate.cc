#include "store/migrate.h"

#include <algorithm>

#include "store/common.h"
#include "store/flyway.h"

namespace queuebox::store {
namespace {

constexpr const char* kNoHistory =
    "QueueBox tables exist without a migration history. Run `queuebox migrate --baseline "
    "<version>` with the last version you applied by hand.";

// version -> checksum (nullopt for a baselined version).
Result<std::map<int, std::optional<int32_t>>> ReadHistory(MigrationBackend& db) {
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      db.Query(std::string("SELECT version, checksum FROM ") + kHistoryTable, {}));
  std::map<int, std::optional<int32_t>> out;
  for (const SqlRow& r : rows) {
    auto v = ParseInt(r[0].value_or(""));
    if (!v) continue;
    std::optional<int32_t> sum;
    if (r[1]) sum = static_cast<int32_t>(ParseInt(*r[1]).value_or(0));
    out[static_cast<int>(*v)] = sum;
  }
  return out;
}

Result<std::vector<FlywayRow>> ReadFlywayHistory(MigrationBackend& db) {
  QB_ASSIGN_OR_RETURN(SqlRows rows,
                      db.Query(std::string("SELECT installed_rank, version, description, type, "
                                           "script, success FROM ") +
                                   kFlywayHistoryTable,
                               {}));
  std::vector<FlywayRow> out;
  for (const SqlRow& r : rows) {
    FlywayRow row;
    row.installed_rank = ParseInt(r[0].value_or("")).value_or(0);
    row.version = r[1];
    row.description = r[2].value_or("");
    row.type = r[3].value_or("");
    row.script = r[4].value_or("");
    row.success = ParseFlywaySuccess(r[5].value_or(""));
    out.push_back(std::move(row));
  }
  return out;
}

Status Record(MigrationBackend& db, int version, const std::string& description,
              std::optional<int32_t> checksum) {
  std::vector<SqlParam> params(3);
  params[0] = int64_t{version};
  params[1] = description;
  if (checksum) params[2] = int64_t{*checksum};
  return db
      .Query(std::string("INSERT INTO ") + kHistoryTable + " (version, description, checksum) " +
                 "VALUES (" + db.Param(1) + ", " + db.Param(2) + ", " + db.Param(3) + ")",
             params)
      .status();
}

// True when `checksum` is the file's own, or an earlier form of `version` that `earlier` lists.
bool AcceptedChecksum(const EarlierChecksums& earlier, int version, int32_t file_checksum,
                      int32_t checksum) {
  if (checksum == file_checksum) return true;
  auto it = earlier.find(version);
  return it != earlier.end() &&
         std::find(it->second.begin(), it->second.end(), checksum) != it->second.end();
}

Result<MigrateReport> RunInTransaction(MigrationBackend& db, const std::vector<Migration>& files,
                                       const DatabaseConfig& config, std::optional<int> baseline,
                                       const EarlierChecksums& earlier) {
  QB_ASSIGN_OR_RETURN(bool has_history, db.TableExists(kHistoryTable));
  std::map<int, std::optional<int32_t>> history;
  if (has_history) {
    QB_ASSIGN_OR_RETURN(history, ReadHistory(db));
  }
  if (baseline.has_value()) {
    if (!history.empty()) {
      return FailedPrecondition("The database already has a migration history, so --baseline " +
                                std::to_string(*baseline) +
                                " cannot be recorded. Run `queuebox migrate` without it.");
    }
  }
  MigrateReport report;
  if (!baseline.has_value() && history.empty()) {
    // A database that QueueBox migrated: its Flyway history stands for the baseline.
    QB_ASSIGN_OR_RETURN(bool has_flyway, db.TableExists(kFlywayHistoryTable));
    std::optional<FlywayAdoption> adopted;
    if (has_flyway) {
      QB_ASSIGN_OR_RETURN(std::vector<FlywayRow> rows, ReadFlywayHistory(db));
      QB_ASSIGN_OR_RETURN(adopted, RecogniseQueueBoxHistory(std::move(rows)));
    }
    if (!adopted.has_value() || adopted->version == 0) {
      QB_ASSIGN_OR_RETURN(bool has_outbox, db.TableExists(config.outbox_table));
      if (has_outbox) return FailedPrecondition(kNoHistory);
    }
    if (adopted.has_value() && adopted->version > 0) {
      baseline = adopted->version;
      report.adopted_flyway = adopted->Summary();
      report.adopted_version = adopted->version;
    }
  }
  if (!has_history) QB_RETURN_IF_ERROR(db.CreateHistory());

  if (baseline.has_value()) {
    const std::string suffix = report.adopted_flyway ? " (adopted from Flyway)" : "";
    for (const Migration& m : files) {
      if (m.version > *baseline) break;
      QB_RETURN_IF_ERROR(Record(db, m.version, m.description + suffix, std::nullopt));
      history[m.version] = std::nullopt;
    }
  }

  for (const Migration& m : files) {
    int32_t checksum = MigrationChecksum(m.sql);
    auto it = history.find(m.version);
    if (it != history.end()) {
      if (it->second.has_value() &&
          !AcceptedChecksum(earlier, m.version, checksum, *it->second)) {
        return FailedPrecondition("Migration V" + std::to_string(m.version) + " (" + m.description +
                                  ") changed after it was applied: its checksum differs from "
                                  "the one in queuebox_schema_history.");
      }
      continue;
    }
    Status s = db.ExecScript(m.sql);
    if (!s.ok()) {
      return Status(s.code(), "Migration V" + std::to_string(m.version) + " (" + m.description +
                                  ") failed: " + s.message());
    }
    QB_RETURN_IF_ERROR(Record(db, m.version, m.description, checksum));
    report.applied.push_back(m.version);
  }
  return report;
}

}  // namespace

const EarlierChecksums& PostgresEarlierChecksums() {
  // FNV-1a of the files of the release before the inbox: "SELECT 1" placeholders (V2, V5, V8,
  // V10) and the outbox parts alone (V3, V6).
  static const EarlierChecksums* const sums = new EarlierChecksums{
      {2, {-1913712939}}, {3, {2008463858}},  {5, {-1185798742}},
      {6, {1705602405}},  {8, {-1669315349}}, {10, {-1696740570}},
  };
  return *sums;
}

const EarlierChecksums& SqliteEarlierChecksums() {
  // V2 was a "SELECT 1" placeholder; SQLite's V3-V10 keep their text (docs/schema.md).
  static const EarlierChecksums* const sums = new EarlierChecksums{{2, {-1913712939}}};
  return *sums;
}

Result<MigrateReport> RunMigrations(MigrationBackend& db, const std::vector<Migration>& files,
                                    const DatabaseConfig& config, std::optional<int> baseline,
                                    const EarlierChecksums& earlier) {
  QB_RETURN_IF_ERROR(RequireDefaultSchema(config));
  if (baseline.has_value() && *baseline < 0) {
    return InvalidArgument("The baseline version must be 0 or more, got " +
                           std::to_string(*baseline) + ".");
  }
  QB_RETURN_IF_ERROR(db.Begin());
  Result<MigrateReport> report = RunInTransaction(db, files, config, baseline, earlier);
  if (!report.ok()) {
    db.Rollback();
    return report;
  }
  Status commit = db.Commit();
  if (!commit.ok()) {
    db.Rollback();
    return commit;
  }
  return report;
}

}  // namespace queuebox::store
