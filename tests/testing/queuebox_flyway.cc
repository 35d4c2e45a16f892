#include "testing/queuebox_flyway.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include "testing/source_dir.h"

namespace queuebox::testing {
namespace {

constexpr const char* kScripts[] = {
    "V1__create_outbox.sql",       "V2__create_inbox.sql",
    "V3__add_claimed_at.sql",      "V4__add_last_error.sql",
    "V5__add_correlation_id.sql",  "V6__add_consumption_and_leases.sql",
    "V7__capture_state.sql",       "V8__add_pull_claim_indexes.sql",
    "V9__add_aggregate_type.sql",  "V10__add_inbox_headers.sql",
    "V11__add_outbox_sequence.sql"};

std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// "V6__add_consumption_and_leases.sql" -> "add consumption and leases" (Flyway's description).
std::string DescriptionOf(const std::string& script) {
  std::string d = script.substr(script.find("__") + 2);
  d = d.substr(0, d.size() - 4);
  for (char& c : d) c = c == '_' ? ' ' : c;
  return d;
}

uint32_t Crc32Update(uint32_t crc, const std::string& bytes) {
  crc = ~crc;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

}  // namespace

std::string QueueBoxScriptName(int version) {
  if (version < 1 || version > 11) std::abort();
  return kScripts[version - 1];
}

std::string QueueBoxScript(int version) {
  std::ifstream in(std::string(QUEUEBOX_SOURCE_DIR) + "/tests/testing/queuebox_flyway/" +
                   QueueBoxScriptName(version));
  if (!in) std::abort();
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

int32_t FlywayChecksum(const std::string& text) {
  uint32_t crc = 0;
  std::string rest = text;
  if (rest.rfind("\xEF\xBB\xBF", 0) == 0) rest = rest.substr(3);
  size_t start = 0;
  while (start < rest.size()) {
    size_t end = rest.find_first_of("\r\n", start);
    if (end == std::string::npos) end = rest.size();
    crc = Crc32Update(crc, rest.substr(start, end - start));
    if (end < rest.size() && rest[end] == '\r' && end + 1 < rest.size() && rest[end + 1] == '\n') {
      ++end;
    }
    start = end + 1;
  }
  return static_cast<int32_t>(crc);
}

void CreateFlywayHistory(TempPgDatabase& db) {
  db.Exec(
      "CREATE TABLE IF NOT EXISTS flyway_schema_history ("
      " installed_rank INT NOT NULL,"
      " version VARCHAR(50),"
      " description VARCHAR(200) NOT NULL,"
      " type VARCHAR(20) NOT NULL,"
      " script VARCHAR(1000) NOT NULL,"
      " checksum INTEGER,"
      " installed_by VARCHAR(100) NOT NULL,"
      " installed_on TIMESTAMP NOT NULL DEFAULT now(),"
      " execution_time INTEGER NOT NULL,"
      " success BOOLEAN NOT NULL,"
      " CONSTRAINT flyway_schema_history_pk PRIMARY KEY (installed_rank));"
      "CREATE INDEX IF NOT EXISTS flyway_schema_history_s_idx ON flyway_schema_history (success)");
}

namespace {

std::string InsertSql(const FlywayHistoryRow& row) {
  std::string rank =
      row.rank > 0 ? std::to_string(row.rank)
                   : "(SELECT COALESCE(MAX(installed_rank), 0) + 1 FROM flyway_schema_history)";
  return "INSERT INTO flyway_schema_history (installed_rank, version, description, type, script, "
         "checksum, installed_by, execution_time, success) VALUES (" +
         rank + ", " + (row.version ? Quote(*row.version) : "NULL") + ", " +
         Quote(row.description) + ", " + Quote(row.type) + ", " + Quote(row.script) + ", " +
         (row.checksum ? std::to_string(*row.checksum) : "NULL") + ", current_user, " +
         std::to_string(row.execution_time_ms) + ", " + (row.success ? "true" : "false") + ")";
}

}  // namespace

void AddFlywayRow(TempPgDatabase& db, const FlywayHistoryRow& row) { db.Exec(InsertSql(row)); }

void BuildQueueBoxDatabase(TempPgDatabase& db, const QueueBoxFlywayOptions& options) {
  const int by_hand = options.baseline.value_or(0);
  for (int v = 1; v <= by_hand && v <= options.up_to; ++v) db.Exec(QueueBoxScript(v));
  CreateFlywayHistory(db);
  if (options.baseline) {
    AddFlywayRow(db, {.version = std::to_string(*options.baseline),
                      .description = "<< Flyway Baseline >>",
                      .type = "BASELINE",
                      .script = "<< Flyway Baseline >>"});
  }
  for (int v = by_hand + 1; v <= options.up_to; ++v) {
    const std::string script = QueueBoxScriptName(v);
    const std::string text = QueueBoxScript(v);
    // Flyway runs each migration in its own transaction with its history row.
    db.Exec("BEGIN");
    auto started = std::chrono::steady_clock::now();
    db.Exec(text);
    int ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                  std::chrono::steady_clock::now() - started)
                                  .count());
    AddFlywayRow(db, {.version = std::to_string(v),
                      .description = DescriptionOf(script),
                      .script = script,
                      .checksum = FlywayChecksum(text),
                      .execution_time_ms = ms});
    db.Exec("COMMIT");
  }
}

}  // namespace queuebox::testing
