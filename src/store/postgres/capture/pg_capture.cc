#include "store/postgres/capture/pg_capture.h"

#include <algorithm>
#include <utility>

#include "babelqueue/envelope.h"
#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"
#include "store/common.h"

namespace queuebox::store::capture {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kRetentionWarnEvery{600000};

// A replication-protocol identifier: double-quoted (the names are validated identifiers).
std::string QuoteIdent(const std::string& name) { return "\"" + name + "\""; }

std::string RecoverySteps(const PgCaptureOptions& o) {
  return "Stop the process that owns capture identity '" + o.identity +
         "'. If the state files are only unavailable, restore the volume. Otherwise reset the "
         "identity: DELETE FROM queuebox_capture_state WHERE identity_name = '" +
         o.identity + "'; SELECT pg_drop_replication_slot('" + o.slot +
         "'); delete the files in '" + o.state_directory +
         "'. Then start again (docs/capture.md, Recovery).";
}

// The status of a failed libpq result: connection-class SQLSTATEs are kUnavailable.
Status ResultError(PGconn* conn, PGresult* res, const std::string& what) {
  std::string message = res != nullptr ? PQresultErrorMessage(res) : "";
  if (message.empty()) message = PQerrorMessage(conn);
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string_view code = state != nullptr ? state : "";
  if (PQstatus(conn) != CONNECTION_OK || code.substr(0, 2) == "08" || code.substr(0, 3) == "57P" ||
      code == "55006" /* object in use: the slot is active elsewhere */) {
    return Unavailable(what + ": " + message);
  }
  return FailedPrecondition(what + ": " + message);
}

std::optional<int64_t> ToInt(const std::optional<std::string>& v) {
  if (!v) return std::nullopt;
  return ParseInt(*v);
}

}  // namespace

Result<PgCaptureOptions> CaptureOptionsFor(const DatabaseConfig& db, const CaptureConfig& capture) {
  PgCaptureOptions o;
  QB_ASSIGN_OR_RETURN(o.connection, PgSettingsFor(db));
  const CaptureConnectionConfig& c = capture.connection;
  if (c.hostname) o.connection.host = *c.hostname;
  if (c.port) o.connection.port = std::to_string(*c.port);
  if (c.database) o.connection.dbname = *c.database;
  if (c.username) o.connection.username = *c.username;
  if (c.password) o.connection.password = *c.password;
  o.identity = capture.identity;
  o.state_directory = capture.state_directory;
  o.schema = capture.schema.value_or("public");
  o.table = db.outbox_table;
  o.publication = capture.publication;
  o.slot = capture.slot;
  o.retention_warn_bytes = capture.slot_retention_warn_bytes;
  return o;
}

Result<CaptureTarget> ResolveCaptureTarget(const PgSettings& connection) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(connection.url.c_str(), &err);
  if (opts == nullptr) {
    std::string message = err != nullptr ? err : "out of memory";
    if (err != nullptr) PQfreemem(err);
    (void)message;  // it may quote the URL, password included
    return InvalidArgument("The capture connection's URL cannot be parsed (database.url).");
  }
  CaptureTarget t;
  for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
    std::string_view key = o->keyword;
    std::string value = o->val != nullptr ? o->val : "";
    if (key == "host" || (key == "hostaddr" && t.host.empty())) {
      if (!value.empty()) t.host = value;
    } else if (key == "port") {
      t.port = value;
    } else if (key == "dbname") {
      t.database = value;
    }
  }
  PQconninfoFree(opts);
  if (!connection.host.empty()) t.host = connection.host;
  if (!connection.dbname.empty()) t.database = connection.dbname;
  if (t.host.find(',') != std::string::npos) {
    return InvalidArgument(
        "database.url names several hosts; set outbox.capture.connection.hostname to the one "
        "host capture reads from.");
  }
  if (!connection.port.empty()) {
    t.port = connection.port;
  } else if (t.port.find(',') != std::string::npos) {
    // A multi-host URL's port list: one port for all its hosts, or ask for the one.
    std::string one;
    size_t start = 0;
    while (start <= t.port.size()) {
      size_t comma = t.port.find(',', start);
      std::string p = t.port.substr(start, comma == std::string::npos ? comma : comma - start);
      if (p.empty()) p = "5432";
      if (!one.empty() && p != one) {
        return InvalidArgument(
            "database.url names several ports; set outbox.capture.connection.port to the port "
            "of outbox.capture.connection.hostname.");
      }
      one = p;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    t.port = one;
  }
  if (t.port.empty()) t.port = "5432";
  if (t.host.empty() || t.database.empty()) {
    return InvalidArgument(
        "Capture needs a host and a database: set them in database.url or in "
        "outbox.capture.connection.hostname / outbox.capture.connection.database.");
  }
  return t;
}

std::string_view CaptureStateName(CaptureState s) {
  switch (s) {
    case CaptureState::kStarting:
      return "starting";
    case CaptureState::kStreaming:
      return "streaming";
    case CaptureState::kRetrying:
      return "retrying";
    case CaptureState::kStopped:
      return "stopped";
  }
  return "unknown";
}

Result<std::optional<SlotInfo>> ReadSlotInfo(PgConnection& conn, const std::string& slot) {
  QB_ASSIGN_OR_RETURN(
      SqlRows rows,
      conn.Query("SELECT coalesce(plugin, ''), coalesce(database::text, ''), active, "
                 "coalesce(confirmed_flush_lsn::text, ''), coalesce(restart_lsn::text, ''), "
                 "coalesce(wal_status, ''), "
                 "pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, "
                 "pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint "
                 "FROM pg_replication_slots WHERE slot_name = $1",
                 {slot}));
  if (rows.empty()) return std::optional<SlotInfo>();
  const SqlRow& r = rows[0];
  SlotInfo info;
  info.plugin = r[0].value_or("");
  info.database = r[1].value_or("");
  info.active = r[2].value_or("") == "t";
  info.confirmed_flush_lsn = r[3].value_or("");
  info.restart_lsn = r[4].value_or("");
  info.wal_status = r[5].value_or("");
  info.retained_bytes = ToInt(r[6]).value_or(-1);
  info.restart_retained_bytes = ToInt(r[7]).value_or(-1);
  return std::optional<SlotInfo>(std::move(info));
}

Result<CaptureReport> ReadCaptureReport(const PgSettings& settings, const std::string& identity,
                                        const std::string& slot) {
  QB_ASSIGN_OR_RETURN(auto conn, PgConnection::Connect(settings));
  CaptureReport report;
  QB_ASSIGN_OR_RETURN(report.slot, ReadSlotInfo(*conn, slot));
  QB_ASSIGN_OR_RETURN(SqlRows table, conn->Query(std::string("SELECT to_regclass('") + kStateTable +
                                                 "') IS NOT NULL"));
  if (!table.empty() && table[0][0].value_or("") == "t") {
    QB_ASSIGN_OR_RETURN(SqlRows found, conn->Query(std::string("SELECT 1 FROM ") + kStateTable +
                                                       " WHERE identity_name = $1",
                                                   {identity}));
    report.recorded = !found.empty();
  }
  return report;
}

Result<std::unique_ptr<PgCapture>> PgCapture::Create(PgCaptureOptions options,
                                                     std::function<void()> on_wake) {
  std::vector<std::string> problems;
  if (!IsCaptureName(options.identity)) {
    problems.push_back("outbox.capture.identity must match ^[a-z][a-z0-9_]{0,62}$");
  }
  if (!IsCaptureName(options.publication)) {
    problems.push_back("outbox.capture.publication must match ^[a-z][a-z0-9_]{0,62}$");
  }
  if (!IsCaptureName(options.slot)) {
    problems.push_back("outbox.capture.slot must match ^[a-z][a-z0-9_]{0,62}$");
  }
  if (!IsValidIdentifier(options.schema)) {
    problems.push_back("outbox.capture.schema must be an SQL identifier");
  }
  if (!IsValidIdentifier(options.table)) {
    problems.push_back("database.outboxTableName must be an SQL identifier");
  }
  if (options.state_directory.empty()) {
    problems.push_back("outbox.capture.stateDirectory is required when capture is enabled");
  }
  auto target = ResolveCaptureTarget(options.connection);
  if (!target.ok()) problems.push_back(target.status().message());
  if (!problems.empty()) {
    std::string message = problems[0];
    for (size_t i = 1; i < problems.size(); ++i) message += "; " + problems[i];
    return InvalidArgument(message);
  }
  return std::unique_ptr<PgCapture>(
      new PgCapture(std::move(options), std::move(target).value(), std::move(on_wake)));
}

PgCapture::PgCapture(PgCaptureOptions options, CaptureTarget target, std::function<void()> on_wake)
    : options_(std::move(options)),
      target_(std::move(target)),
      state_dir_(options_.state_directory),
      on_wake_(std::move(on_wake)) {
  options_.connection.application_name = kCaptureApplicationName;
  options_.connection.pool_size = 1;
  options_.connection.replication.clear();
  fingerprint_ = CaptureFingerprint({target_.host, target_.port, target_.database, options_.schema,
                                     options_.table, options_.slot, options_.publication});
}

PgCapture::~PgCapture() { Stop(); }

Status PgCapture::Start() {
  return thread_.Start([this] { Loop(); });
}

void PgCapture::Stop() {
  if (!thread_.Stop()) return;
  if (state_.load() != CaptureState::kStopped)
    SetState(CaptureState::kStopped, "capture was stopped");
}

CaptureStatus PgCapture::status() const {
  CaptureStatus s;
  s.state = state_.load();
  s.slot_retained_bytes = retained_bytes_.load();
  std::lock_guard<std::mutex> lock(mu_);
  s.reason = reason_;
  s.recovery_required = recovery_required_;
  s.owned_elsewhere = owned_elsewhere_;
  s.confirmed_lsn = confirmed_lsn_;
  s.start_lsn = start_lsn_;
  return s;
}

void PgCapture::SetState(CaptureState s, std::string reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    reason_ = std::move(reason);
  }
  state_ = s;
}

void PgCapture::Wake(bool insert) {
  wakes_.fetch_add(1);
  if (insert) insert_wakes_.fetch_add(1);
  on_wake_();
}

int PgCapture::WaitFor(int fd_a, int fd_b, int64_t ms) { return thread_.WaitFor(fd_a, fd_b, ms); }

Result<PGresult*> PgCapture::AsyncQuery(PGconn* conn, const std::string& sql,
                                        ExecStatusType expect) {
  if (PQsendQuery(conn, sql.c_str()) == 0) return ResultError(conn, nullptr, "send");
  PGresult* last = nullptr;
  while (true) {
    while (PQisBusy(conn) != 0) {
      int r = WaitFor(PQsocket(conn), -1, -1);
      if (r < 0) {
        if (last != nullptr) PQclear(last);
        return Aborted("stopping");
      }
      if (PQconsumeInput(conn) == 0) {
        if (last != nullptr) PQclear(last);
        return ResultError(conn, nullptr, "the connection was lost");
      }
    }
    PGresult* r = PQgetResult(conn);
    if (r == nullptr) break;
    if (last != nullptr) PQclear(last);
    last = r;
    if (PQresultStatus(r) == PGRES_COPY_BOTH) break;  // no further result until the copy ends
  }
  if (last == nullptr) return Internal("no result");
  if (PQresultStatus(last) != expect) {
    Status s = ResultError(conn, last, "PostgreSQL refused it");
    PQclear(last);
    return s;
  }
  return last;
}

void PgCapture::Loop() {
  log::RateLimiter limiter(milliseconds(30000));
  int failures = 0;
  while (!thread_.stopping()) {
    Wake(false);  // every attempt: delivery never waits for capture to recover
    const int64_t streams_before = streams_.load();
    RunEnd end = RunOnce();
    if (thread_.stopping()) break;
    Wake(false);
    const std::string reason = SanitizeError(end.status.message());
    if (end.final) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        recovery_required_ = end.recovery;
        owned_elsewhere_ = end.owned_elsewhere;
      }
      // The log line comes first: whoever sees kStopped finds the reason already written.
      if (end.owned_elsewhere) {
        log::Error("Capture identity already has an active owner. SQL reconciliation continues.",
                   {{"identity", options_.identity}, {"reason", reason}});
      } else {
        log::Error("Capture requires explicit state recovery. SQL reconciliation continues.",
                   {{"identity", options_.identity},
                    {"reason", reason},
                    {"recovery", RecoverySteps(options_)}});
      }
      SetState(CaptureState::kStopped, reason);
      RetentionOnlyLoop();
      return;
    }
    if (streams_.load() > streams_before) failures = 0;
    const int64_t delay =
        ReconnectDelayMs(failures++, options_.reconnect_initial_ms, options_.reconnect_cap_ms);
    SetState(CaptureState::kRetrying, reason);
    log::WriteLimited(limiter, log::Level::kWarn,
                      "Capture interrupted; SQL reconciliation continues and capture retries.",
                      {{"identity", options_.identity},
                       {"reason", reason},
                       {"retry_in_ms", std::to_string(delay)}});
    if (WaitFor(-1, -1, delay) < 0) break;
  }
}

// What the checks of one run found, for the steps after them.
struct PgCapture::RunChecks {
  StateDecision decision;
  StateDirectory::Offsets offsets;
  std::optional<SlotInfo> slot;
};

PgCapture::RunEnd PgCapture::RunOnce() {
  auto control = PgConnection::Connect(options_.connection);
  if (!control.ok()) return {control.status()};
  IgnoreNotices((*control)->native());
  if (Clock::now() >= next_retention_check_) CheckRetention(control->get());
  RunChecks checks;
  RunEnd end = TakeIdentity(**control);
  if (end.status.ok()) end = CheckState(**control, checks);
  if (end.status.ok()) end.status = CheckPublication(**control);
  if (end.status.ok()) end = CheckSlot(**control, checks);
  if (!end.status.ok()) return end;

  PgSettings replication_settings = options_.connection;
  replication_settings.replication = "database";
  auto replication = PgConnection::Connect(replication_settings);
  if (!replication.ok()) return {replication.status()};
  PGconn* rc = (*replication)->native();
  IgnoreNotices(rc);
  Result<Lsn> start = SlotStart(rc, checks);
  if (start.ok()) start = RecordState(**control, checks, *start);
  const Status streaming = start.ok() ? StartStreaming(rc, *start) : start.status();
  if (!streaming.ok()) return {streaming};
  // Rows may have been inserted while no one read the stream: one wake covers them.
  Wake(false);
  return {Serve(**control, **replication, *start)};
}

// 1. One owner per identity: the lock lives as long as the control session.
PgCapture::RunEnd PgCapture::TakeIdentity(PgConnection& control) {
  RunEnd end;
  auto locked =
      control.Query("SELECT pg_try_advisory_lock($1::bigint)", {CaptureLockKey(options_.identity)});
  if (!locked.ok()) {
    end.status = locked.status();
  } else if ((*locked)[0][0].value_or("") != "t") {
    end.status = FailedPrecondition("another session holds the capture lock of identity '" +
                                    options_.identity + "' (advisory lock " +
                                    std::to_string(CaptureLockKey(options_.identity)) + ")");
    end.final = true;
    end.owned_elsewhere = true;
  }
  return end;
}

// 2. The recorded state against the files.
PgCapture::RunEnd PgCapture::CheckState(PgConnection& control, RunChecks& checks) {
  auto registry = control.Query(std::string("SELECT state_id, config_fingerprint FROM ") +
                                    kStateTable + " WHERE identity_name = $1",
                                {options_.identity});
  if (!registry.ok()) {
    if (registry.status().message().find("does not exist") != std::string::npos) {
      return {FailedPrecondition(
          "The table queuebox_capture_state is missing: apply the bundled migrations (queuebox "
          "migrate; V17) or create it as docs/schema.md shows.")};
    }
    return {registry.status()};
  }
  std::optional<RegistryRow> row;
  if (!registry->empty()) {
    row = RegistryRow{(*registry)[0][0].value_or(""), (*registry)[0][1].value_or("")};
  }
  auto identity_file = state_dir_.ReadIdentity();
  if (!identity_file.ok()) return {identity_file.status()};
  auto offsets = state_dir_.ReadOffsets();
  if (!offsets.ok()) return {offsets.status()};
  checks.offsets = *offsets;
  // Files this process wrote on a first start whose row insert then failed: not another
  // instance's, so the first start simply goes on.
  const bool own_bootstrap =
      !row && !bootstrap_state_id_.empty() && identity_file->value_or("") == bootstrap_state_id_;
  checks.decision = own_bootstrap ? StateDecision{}
                                  : DecideState(row, *identity_file, offsets->present, fingerprint_,
                                                options_.identity, options_.state_directory);
  RunEnd end;
  if (checks.decision.verdict == StateVerdict::kRecover) {
    end.status = FailedPrecondition(checks.decision.reason);
    end.final = true;
    end.recovery = true;
  }
  return end;
}

// 3. The publication: never created here.
Status PgCapture::CheckPublication(PgConnection& control) {
  const std::string qualified = options_.schema + "." + options_.table;
  QB_ASSIGN_OR_RETURN(
      SqlRows publication,
      control.Query(
          "SELECT p.pubinsert, EXISTS (SELECT 1 FROM pg_publication_tables t WHERE t.pubname = "
          "p.pubname AND t.schemaname = $2 AND t.tablename = $3) FROM pg_publication p WHERE "
          "p.pubname = $1",
          {options_.publication, options_.schema, options_.table}));
  if (publication.empty()) {
    return FailedPrecondition("The publication " + options_.publication +
                              " does not exist. Create it before you enable capture: "
                              "CREATE PUBLICATION " +
                              options_.publication + " FOR TABLE " + qualified + ";");
  }
  if (publication[0][0].value_or("") != "t" || publication[0][1].value_or("") != "t") {
    return FailedPrecondition(
        "The publication " + options_.publication + " does not publish the inserts of " +
        qualified + ", so capture would never see a new row: ALTER PUBLICATION " +
        options_.publication + " ADD TABLE " + qualified + "; (and publish = 'insert').");
  }
  return Status::Ok();
}

// 4. The slot: ours if it exists, and present whenever recorded state says it must be.
PgCapture::RunEnd PgCapture::CheckSlot(PgConnection& control, RunChecks& checks) {
  auto slot = ReadSlotInfo(control, options_.slot);
  if (!slot.ok()) return {slot.status()};
  auto database = control.Query("SELECT current_database()");
  if (!database.ok()) return {database.status()};
  checks.slot = *slot;
  const std::string current_db = (*database)[0][0].value_or("");
  if (*slot && ((*slot)->plugin != "pgoutput" || (*slot)->database != current_db)) {
    return {FailedPrecondition(
        "The replication slot " + options_.slot + " exists for another use (plugin '" +
        (*slot)->plugin + "', database '" + (*slot)->database + "'; capture needs pgoutput on '" +
        current_db + "'). Choose another outbox.capture.slot.")};
  }
  RunEnd end;
  if (!*slot && checks.decision.verdict == StateVerdict::kResume) {
    end.status = FailedPrecondition(
        "The replication slot " + options_.slot +
        " disappeared while capture state remains: queuebox_capture_state and the files in '" +
        options_.state_directory +
        "' record a position in it, and a new slot would silently start from the present.");
    end.final = true;
    end.recovery = true;
  }
  return end;
}

// The slot's confirmed position; on the first start the slot is created (never dropped).
Result<Lsn> PgCapture::SlotStart(PGconn* rc, const RunChecks& checks) {
  if (checks.slot) return ParseLsn(checks.slot->confirmed_flush_lsn).value_or(0);
  // Waits until the transactions running now have finished (a consistent point).
  QB_ASSIGN_OR_RETURN(PGresult * created,
                      AsyncQuery(rc,
                                 "CREATE_REPLICATION_SLOT " + QuoteIdent(options_.slot) +
                                     " LOGICAL pgoutput NOEXPORT_SNAPSHOT",
                                 PGRES_TUPLES_OK));
  std::string point = PQntuples(created) > 0 ? PQgetvalue(created, 0, 1) : "";
  PQclear(created);
  log::Info("Created the replication slot of change capture; QueueBox never drops it",
            {{"slot", options_.slot}, {"consistent_point", point}});
  return ParseLsn(point).value_or(0);
}

// On a first start the state (files, then the registry row) at `start`; otherwise the position
// to resume from. Returns where to stream from.
Result<Lsn> PgCapture::RecordState(PgConnection& control, const RunChecks& checks, Lsn start) {
  if (checks.decision.verdict != StateVerdict::kCreate) {
    if (checks.offsets.lsn) {
      // Never below the slot's confirmed position: the server would move it back.
      return std::max(start, *checks.offsets.lsn);
    }
    log::Info(
        "offsets.dat is not in QueueBox C++'s form (QueueBox's connector wrote it?); capture "
        "resumes from the slot's confirmed position and rewrites the file",
        {{"state_directory", options_.state_directory}});
    return start;
  }
  Result<std::string> state_id = bootstrap_state_id_;
  if (bootstrap_state_id_.empty()) state_id = babelqueue::NewUuidV4();
  QB_RETURN_IF_ERROR(state_id.status());
  QB_RETURN_IF_ERROR(state_dir_.WriteIdentity(*state_id));
  bootstrap_state_id_ = *state_id;
  QB_RETURN_IF_ERROR(state_dir_.WriteOffsets(start));
  QB_RETURN_IF_ERROR(
      control
          .Query(std::string("INSERT INTO ") + kStateTable +
                     " (identity_name, state_id, config_fingerprint) VALUES ($1, $2, $3)",
                 {options_.identity, *state_id, fingerprint_})
          .status());
  log::Info("Recorded the change capture state", {{"identity", options_.identity},
                                                  {"state_directory", options_.state_directory},
                                                  {"position", FormatLsn(start)}});
  return start;
}

// 5. Stream from `start`: the state turns kStreaming.
Status PgCapture::StartStreaming(PGconn* rc, Lsn start) {
  QB_ASSIGN_OR_RETURN(
      PGresult * streaming,
      AsyncQuery(rc,
                 "START_REPLICATION SLOT " + QuoteIdent(options_.slot) + " LOGICAL " +
                     FormatLsn(start) + " (proto_version '1', publication_names '" +
                     QuoteIdent(options_.publication) + "')",
                 PGRES_COPY_BOTH));
  PQclear(streaming);
  {
    std::lock_guard<std::mutex> lock(mu_);
    start_lsn_ = FormatLsn(start);
    confirmed_lsn_ = FormatLsn(start);
  }
  const bool again = streams_.fetch_add(1) > 0;
  SetState(CaptureState::kStreaming, "");
  log::Info(again ? "Capture is streaming again" : "Capture is streaming",
            {{"identity", options_.identity},
             {"slot", options_.slot},
             {"publication", options_.publication},
             {"position", FormatLsn(start)}});
  return Status::Ok();
}

// One open stream: the connections, the decoder and the positions confirmed and recorded.
struct PgCapture::Stream {
  Stream(PgConnection& control, PgConnection& replication, const PgCaptureOptions& o, Lsn start)
      : rc(replication.native()),
        cc(control.native()),
        tracker(o.schema, o.table, start),
        written(start),
        next_status(Clock::now() + o.status_interval) {}
  PGconn* rc;
  PGconn* cc;
  StreamTracker tracker;
  Lsn written;               // in offsets.dat
  Lsn sent = 0;              // in the last status update
  int64_t ignored_seen = 0;  // outbox updates + deletes already counted in ignored_
  bool offsets_warned = false;
  Clock::time_point next_status;
  Clock::time_point settle_at = Clock::time_point::max();  // max: no second wake due
};

// Confirms what the tracker handled to the server, then records it in offsets.dat.
Status PgCapture::SendStatus(Stream& st, bool reply_requested) {
  const Lsn confirmed = st.tracker.confirmed();
  std::string msg = StandbyStatusUpdate(confirmed, PgEpochMicros(std::chrono::system_clock::now()),
                                        reply_requested);
  if (PQputCopyData(st.rc, msg.data(), static_cast<int>(msg.size())) != 1 || PQflush(st.rc) != 0) {
    return Unavailable(std::string("cannot send a standby status update: ") +
                       PQerrorMessage(st.rc));
  }
  st.sent = confirmed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    confirmed_lsn_ = FormatLsn(confirmed);
  }
  if (confirmed == st.written) return Status::Ok();
  Status s = state_dir_.WriteOffsets(confirmed);
  if (s.ok()) {
    st.written = confirmed;
    st.offsets_warned = false;
  } else if (!st.offsets_warned) {
    st.offsets_warned = true;
    log::Warn("Cannot record the capture position; capture goes on, a restart may need recovery",
              {{"reason", SanitizeError(s.message())}});
  }
  return Status::Ok();
}

// Decodes every frame the replication connection has received; `reply` set when the server asked
// for a status update.
Status PgCapture::ReadFrames(Stream& st, bool& reply) {
  if (PQconsumeInput(st.rc) == 0) {
    return Unavailable(std::string("the replication connection was lost: ") +
                       PQerrorMessage(st.rc));
  }
  while (true) {
    char* buf = nullptr;
    int n = PQgetCopyData(st.rc, &buf, /*async=*/1);
    if (n == 0) break;
    if (n == -1) {
      PGresult* res = PQgetResult(st.rc);
      Status s = ResultError(st.rc, res, "the server ended the replication stream");
      if (res != nullptr) PQclear(res);
      return s.ok() ? Unavailable("the server ended the replication stream") : s;
    }
    if (n < 0) {
      return Unavailable(std::string("the replication stream failed: ") + PQerrorMessage(st.rc));
    }
    auto step = st.tracker.OnFrame(std::string_view(buf, static_cast<size_t>(n)));
    PQfreemem(buf);
    if (!step.ok()) return Unavailable(step.status().message());
    if (step->wake) {
      Wake(true);
      if (options_.settle.count() > 0) st.settle_at = Clock::now() + options_.settle;
    }
    reply = reply || step->reply;
  }
  const auto& counts = st.tracker.counts();
  const int64_t ignored = counts.outbox_updates + counts.outbox_deletes;
  if (ignored != st.ignored_seen) {
    ignored_.fetch_add(ignored - st.ignored_seen);
    st.ignored_seen = ignored;
  }
  return Status::Ok();
}

Status PgCapture::Serve(PgConnection& control, PgConnection& replication, Lsn start) {
  Stream st(control, replication, options_, start);
  const int rfd = PQsocket(st.rc);
  const int cfd = PQsocket(st.cc);
  while (true) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake_at = std::min({st.next_status, next_retention_check_, st.settle_at});
    int r = WaitFor(rfd, cfd, MillisUntil(wake_at, now));
    if (r < 0) {
      // Stop: confirm what was handled, so the next run does not see it again.
      if (st.tracker.confirmed() != st.sent || st.tracker.confirmed() != st.written) {
        (void)SendStatus(st, false);
      }
      return Status::Ok();
    }
    if ((r & 2) != 0 && (PQconsumeInput(st.cc) == 0 || PQstatus(st.cc) != CONNECTION_OK)) {
      return Unavailable(
          "the capture's control connection, which holds the identity's lock, was lost");
    }
    bool reply = false;
    if ((r & 1) != 0) QB_RETURN_IF_ERROR(ReadFrames(st, reply));
    now = Clock::now();
    if (now >= st.settle_at) {
      st.settle_at = Clock::time_point::max();
      Wake(false);
    }
    if (reply) QB_RETURN_IF_ERROR(SendStatus(st, false));
    if (now >= st.next_status) {
      // Asks for a keepalive: its WAL end is confirmed next time (the slot keeps no WAL while
      // the outbox is quiet and other tables are busy).
      QB_RETURN_IF_ERROR(SendStatus(st, true));
      st.next_status = now + options_.status_interval;
    }
    if (now >= next_retention_check_) CheckRetention(&control);
  }
}

void PgCapture::CheckRetention(PgConnection* control) {
  next_retention_check_ = Clock::now() + options_.retention_check_interval;
  std::unique_ptr<PgConnection> own;
  if (control == nullptr) {
    auto conn = PgConnection::Connect(options_.connection);
    if (!conn.ok()) return;
    own = std::move(conn).value();
    control = own.get();
  }
  auto slot = ReadSlotInfo(*control, options_.slot);
  if (!slot.ok() || !*slot) {
    retained_bytes_ = -1;
    return;
  }
  const int64_t bytes = (*slot)->retained_bytes;
  retained_bytes_ = bytes;
  const auto now = Clock::now();
  if (bytes > options_.retention_warn_bytes) {
    if (!retention_warned_ || now - last_retention_warning_ >= kRetentionWarnEvery) {
      retention_warned_ = true;
      last_retention_warning_ = now;
      log::Warn(
          "The replication slot of change capture retains more WAL than the threshold; a slot "
          "that nobody reads keeps WAL until the disk fills. Check that capture streams, or drop "
          "the slot of a retired capture identity.",
          {{"slot", options_.slot},
           {"retained_bytes", std::to_string(bytes)},
           {"threshold_bytes", std::to_string(options_.retention_warn_bytes)},
           {"active", (*slot)->active ? "true" : "false"}});
    }
  } else if (retention_warned_) {
    retention_warned_ = false;
    log::Info("The replication slot of change capture is back under its WAL threshold",
              {{"slot", options_.slot}, {"retained_bytes", std::to_string(bytes)}});
  }
}

void PgCapture::RetentionOnlyLoop() {
  while (!thread_.stopping()) {
    const int64_t wait = MillisUntil(next_retention_check_, Clock::now());
    if (WaitFor(-1, -1, wait) < 0) return;
    CheckRetention(nullptr);
  }
}

}  // namespace queuebox::store::capture
