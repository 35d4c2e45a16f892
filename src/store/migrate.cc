#include "store/migrate.h"

#include "store/common.h"

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

Result<MigrateReport> RunInTransaction(MigrationBackend& db, const std::vector<Migration>& files,
                                       const DatabaseConfig& config, std::optional<int> baseline) {
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
  } else if (history.empty()) {
    QB_ASSIGN_OR_RETURN(bool has_outbox, db.TableExists(config.outbox_table));
    if (has_outbox) return FailedPrecondition(kNoHistory);
  }
  if (!has_history) QB_RETURN_IF_ERROR(db.CreateHistory());

  if (baseline.has_value()) {
    for (const Migration& m : files) {
      if (m.version > *baseline) break;
      QB_RETURN_IF_ERROR(Record(db, m.version, m.description, std::nullopt));
      history[m.version] = std::nullopt;
    }
  }

  MigrateReport report;
  for (const Migration& m : files) {
    int32_t checksum = MigrationChecksum(m.sql);
    auto it = history.find(m.version);
    if (it != history.end()) {
      if (it->second.has_value() && *it->second != checksum) {
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

Result<MigrateReport> RunMigrations(MigrationBackend& db, const std::vector<Migration>& files,
                                    const DatabaseConfig& config, std::optional<int> baseline) {
  QB_RETURN_IF_ERROR(RequireDefaultSchema(config));
  if (baseline.has_value() && *baseline < 0) {
    return InvalidArgument("The baseline version must be 0 or more, got " +
                           std::to_string(*baseline) + ".");
  }
  QB_RETURN_IF_ERROR(db.Begin());
  Result<MigrateReport> report = RunInTransaction(db, files, config, baseline);
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
