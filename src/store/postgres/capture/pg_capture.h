// pg_capture.h: change capture on PostgreSQL by logical replication (QueueBox's
// `postgres-logical` mode; reference Appendix A). It reads the WAL the database writes anyway,
// through libpq's replication protocol and the built-in pgoutput plugin, and calls `on_wake`
// (Relay::Wake) when a transaction that inserted into the outbox table has committed. It only
// wakes: delivery still claims every row by SQL, so a lost or late event costs latency, never a
// message, and nothing here ever fails the relay.
//
// One run of the capture thread:
//  1. a control connection (application_name "queuebox-capture") takes the session advisory lock
//     of the identity (capture_state.h CaptureLockKey) and holds it for the run; a lock another
//     session holds stops capture for this process ("already has an active owner");
//  2. it checks the state (capture_state.h DecideState) against queuebox_capture_state (migration
//     V17); a mismatch stops capture with its reason ("requires explicit state recovery"); so does
//     a slot that vanished while the state remains;
//  3. it checks that the publication exists and publishes the outbox table's inserts (QueueBox
//     never creates a publication);
//  4. a replication connection (replication=database) creates the slot on the first start
//     (CREATE_REPLICATION_SLOT ... LOGICAL pgoutput; never dropped) and streams from the recorded
//     position (START_REPLICATION ... (proto_version '1', publication_names '...'));
//  5. every `status_interval` it sends a standby status update that confirms what it handled (the
//     slot's confirmed_flush_lsn advances, so the slot does not keep WAL) and asks the server for a
//     keepalive, whose WAL end it confirms next time while no transaction is open; the position is
//     written to offsets.dat at the same pace.
// A connection failure ends the run: the thread wakes delivery, waits a capped, jittered backoff
// (1 s doubling to 30 s; core/backoff.h ReconnectDelayMs) and starts again. A stop for recovery
// or for another owner is final for this process; delivery continues by SQL.
//
// Visibility: PostgreSQL can decode a commit before the committing session's snapshot change is
// visible to others (the WAL flush wakes the sender before the commit leaves the proc array). A
// claim woken in that instant would miss the row, so after the last insert wake the engine wakes
// once more `settle` later.
//
// Every `retention_check_interval` (also while capture is stopped) it reads the WAL the slot
// retains, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn); above
// `retention_warn_bytes` it logs a warning (at most every 10 minutes while it stays above).
//
// Thread-safety: Start/Stop from one controlling thread; status() and the counters from any
// thread. `on_wake` runs on the capture thread and must be cheap and not throw.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "queuebox/config.h"
#include "queuebox/status.h"
#include "store/change_capture.h"
#include "store/postgres/capture/capture_state.h"
#include "store/postgres/capture/pgoutput.h"
#include "store/postgres/notifier_thread.h"
#include "store/postgres/pg_connection.h"

namespace queuebox::store::capture {

inline constexpr const char* kCaptureApplicationName = "queuebox-capture";

struct PgCaptureOptions {
  std::string identity = "queuebox";  // ^[a-z][a-z0-9_]{0,62}$
  std::string state_directory;        // required
  std::string schema = "public";      // of the outbox table
  std::string table = "outbox";       // database.outboxTableName
  std::string publication = "queuebox_outbox";
  std::string slot = "queuebox_outbox";
  // The capture connection: database.url with outbox.capture.connection.* applied (PgSettings
  // host/port/dbname/username/password overrides). One host only.
  PgSettings connection;
  int64_t reconnect_initial_ms = 1000;
  int64_t reconnect_cap_ms = 30000;
  std::chrono::milliseconds status_interval{10000};
  std::chrono::milliseconds settle{20};  // 0: no second wake
  std::chrono::milliseconds retention_check_interval{60000};
  int64_t retention_warn_bytes = int64_t{1} << 30;  // 1 GiB
};

using ::queuebox::IsCaptureName;  // store/change_capture.h

// The engine's options from the configuration (outbox.capture.* over database.*): the capture
// connection is database.url with outbox.capture.connection.{hostname,port,database,username,
// password} applied; the table is database.outboxTableName; the schema defaults to public.
// kInvalidArgument for a database.url that is not a PostgreSQL URL.
Result<PgCaptureOptions> CaptureOptionsFor(const DatabaseConfig& db, const CaptureConfig& capture);

// The capture connection's target, as the fingerprint names it: the URL's host, port (5432 when
// absent) and database after the overrides. kInvalidArgument for a URL libpq cannot parse, more
// than one host, or no host or database.
struct CaptureTarget {
  std::string host, port, database;
};
Result<CaptureTarget> ResolveCaptureTarget(const PgSettings& connection);

// The advisory health state (component outbox-capture; it never makes readiness fail).
enum class CaptureState {
  kStarting,   // the first run has not streamed yet
  kStreaming,  // healthy: the replication stream is open
  kRetrying,   // a run failed; the next one starts after the backoff (reason set)
  kStopped,    // capture stopped for this process: recovery needed or another owner (reason set)
};
std::string_view CaptureStateName(CaptureState s);  // "starting" | "streaming" | ...

struct CaptureStatus {
  CaptureState state = CaptureState::kStarting;
  std::string reason;                // why it is retrying or stopped (sanitised, no secrets)
  bool recovery_required = false;    // kStopped by a state check
  bool owned_elsewhere = false;      // kStopped because another session holds the identity
  std::string confirmed_lsn;         // the last position confirmed to the server ("" before one)
  std::string start_lsn;             // where the current or last stream started
  int64_t slot_retained_bytes = -1;  // the last retention reading; -1 before one
};

// The slot as pg_replication_slots shows it (store/change_capture.h).
using SlotInfo = ::queuebox::CaptureSlotInfo;
// nullopt when no slot has that name. Errors as PgConnection::Query.
Result<std::optional<SlotInfo>> ReadSlotInfo(PgConnection& conn, const std::string& slot);

using CaptureReport = ::queuebox::CaptureReport;  // store/change_capture.h
// Reads the slot and the registry row on a new connection with `settings`. A missing
// queuebox_capture_state table reads as not recorded. Errors: kUnavailable and the like.
Result<CaptureReport> ReadCaptureReport(const PgSettings& settings, const std::string& identity,
                                        const std::string& slot);

class PgCapture final : public ChangeCapture {
 public:
  // Validates the options (identity, names, state directory, target); connects nothing.
  // kInvalidArgument naming the bad setting.
  static Result<std::unique_ptr<PgCapture>> Create(PgCaptureOptions options,
                                                   std::function<void()> on_wake);
  ~PgCapture() override;  // Stop()
  PgCapture(const PgCapture&) = delete;
  PgCapture& operator=(const PgCapture&) = delete;

  // Starts the capture thread. kFailedPrecondition when already started; kInternal when the stop
  // event cannot be created.
  Status Start() override;
  // Confirms the handled position once more, closes the connections (the lock goes with the
  // control session) and joins the thread. Returns within one connect attempt at most;
  // idempotent.
  void Stop() override;

  CaptureStatus status() const;
  bool healthy() const override { return state_.load() == CaptureState::kStreaming; }
  const std::string& fingerprint() const { return fingerprint_; }

  // Counters (tests, metrics).
  int64_t wakes() const override { return wakes_.load(); }  // every on_wake call
  int64_t slot_retained_bytes() const override { return retained_bytes_.load(); }
  int64_t insert_wakes() const { return insert_wakes_.load(); }       // transactions with inserts
  int64_t streams() const { return streams_.load(); }                 // START_REPLICATION successes
  int64_t outbox_changes_ignored() const { return ignored_.load(); }  // updates + deletes seen

 private:
  PgCapture(PgCaptureOptions options, CaptureTarget target, std::function<void()> on_wake);

  struct RunEnd {
    Status status;
    bool final = false;  // recovery or another owner: no more runs
    bool recovery = false;
    bool owned_elsewhere = false;
  };
  struct RunChecks;
  struct Stream;
  void Loop();
  // One run (see above): the checks on a control connection, then the stream until it fails or
  // Stop. A check that fails ends the run with its status.
  RunEnd RunOnce();
  RunEnd TakeIdentity(PgConnection& control);
  RunEnd CheckState(PgConnection& control, RunChecks& checks);
  Status CheckPublication(PgConnection& control);
  RunEnd CheckSlot(PgConnection& control, RunChecks& checks);
  Result<Lsn> SlotStart(PGconn* replication, const RunChecks& checks);
  Result<Lsn> RecordState(PgConnection& control, const RunChecks& checks, Lsn start);
  Status StartStreaming(PGconn* replication, Lsn start);
  // Streams on an open replication connection until it fails or Stop.
  Status Serve(PgConnection& control, PgConnection& replication, Lsn start);
  Status SendStatus(Stream& stream, bool reply_requested);
  Status ReadFrames(Stream& stream, bool& reply);
  // Reads and, above the threshold, reports the slot's retention (best effort).
  void CheckRetention(PgConnection* control);
  void RetentionOnlyLoop();
  // Waits on the stop event up to `ms` (-1 forever) and on fds >= 0. Returns -1 on stop, 0 on
  // timeout, else a bit mask of the readable fds (1: fd_a, 2: fd_b).
  int WaitFor(int fd_a, int fd_b, int64_t ms);
  // Sends `sql` on `conn` without blocking the stop: kUnavailable when the connection fails,
  // kAborted on Stop, kInternal/kFailedPrecondition when the server refuses it.
  Result<PGresult*> AsyncQuery(PGconn* conn, const std::string& sql, ExecStatusType expect);
  void Wake(bool insert);
  void SetState(CaptureState s, std::string reason);

  PgCaptureOptions options_;
  CaptureTarget target_;
  std::string fingerprint_;
  StateDirectory state_dir_;
  std::function<void()> on_wake_;
  NotifierThread thread_{"change capture", "the capture"};
  std::atomic<CaptureState> state_{CaptureState::kStarting};
  std::atomic<int64_t> wakes_{0}, insert_wakes_{0}, streams_{0}, ignored_{0};
  std::atomic<int64_t> retained_bytes_{-1};
  mutable std::mutex mu_;  // guards the strings below
  std::string reason_, confirmed_lsn_, start_lsn_;
  bool recovery_required_ = false, owned_elsewhere_ = false;
  std::chrono::steady_clock::time_point next_retention_check_{};
  std::chrono::steady_clock::time_point last_retention_warning_{};
  bool retention_warned_ = false;
  std::string bootstrap_state_id_;  // the state id this process wrote on a first start
};

}  // namespace queuebox::store::capture
