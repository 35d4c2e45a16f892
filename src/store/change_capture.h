// change_capture.h: change capture, QueueBox's outbox.capture.* (reference Appendix A), as the
// app, the configuration checks and `queuebox status` see it. This is a public header of
// qb_store; the engine (PostgreSQL logical replication) is store/postgres/capture/pg_capture.h.
//
// Capture only wakes the relay: delivery still claims every row by SQL, so a capture fault costs
// latency, never a message, and never fails the relay.
//
// Thread-safety: the free functions may be called from any thread. ChangeCapture: Start/Stop
// from one controlling thread, the readings from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "queuebox/config.h"
#include "queuebox/status.h"

namespace queuebox {

// ^[a-z][a-z0-9_]{0,62}$: QueueBox's rule for outbox.capture.identity, .publication and .slot.
bool IsCaptureName(const std::string& name);

// Checks that the capture connection (database.url with outbox.capture.connection.* applied)
// names one host and a database. OK for a mode other than postgres-logical, and for a
// database.url that is not a PostgreSQL URL (database.url's own checks report that).
// kInvalidArgument with the message to show at outbox.capture.connection.hostname.
Status CheckCaptureConnection(const DatabaseConfig& db, const CaptureConfig& capture);

// A running change capture; it calls its `on_wake` when committed transactions inserted outbox
// rows.
class ChangeCapture {
 public:
  virtual ~ChangeCapture() = default;
  // Starts capture in the background. kFailedPrecondition when already started.
  virtual Status Start() = 0;
  // Stops capture (its last position is confirmed first); idempotent.
  virtual void Stop() = 0;
  // The advisory health component outbox-capture: true while the change stream is open.
  virtual bool healthy() const = 0;
  // Every on_wake call so far (queuebox_capture_wakeups_total).
  virtual int64_t wakes() const = 0;
  // The WAL the slot retains at the last reading, in bytes; -1 before one.
  virtual int64_t slot_retained_bytes() const = 0;
};

// The capture of `capture.mode` when `capture.enabled`: nullptr, and no error, when capture is
// off or the mode is polling. `on_wake` runs on the capture's thread and must be cheap.
// kInvalidArgument for bad settings (names, state directory, target); no connection is made here.
Result<std::unique_ptr<ChangeCapture>> OpenChangeCapture(const DatabaseConfig& db,
                                                         const CaptureConfig& capture,
                                                         std::function<void()> on_wake);

// A replication slot as pg_replication_slots shows it.
struct CaptureSlotInfo {
  std::string plugin, database, wal_status;
  bool active = false;
  std::string confirmed_flush_lsn, restart_lsn;  // "" when NULL
  // pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), bytes; -1 when unknown.
  int64_t retained_bytes = -1;
  // The same from restart_lsn: what the server cannot remove yet; -1 when unknown.
  int64_t restart_retained_bytes = -1;
};

// What `queuebox status` shows of capture; it works while no relay runs (a stopped relay's slot
// keeps WAL).
struct CaptureReport {
  bool recorded = false;                // queuebox_capture_state has a row for the identity
  std::optional<CaptureSlotInfo> slot;  // nullopt: no slot of that name (yet)
};

// Reads the capture slot and the registry row on a new connection (the capture connection's
// settings). nullopt, and no error, when outbox.capture.mode is not postgres-logical or the
// database is not PostgreSQL. Errors: kInvalidArgument for a bad URL, kUnavailable and the like
// when the query fails.
Result<std::optional<CaptureReport>> ReadCaptureReport(const DatabaseConfig& db,
                                                       const CaptureConfig& capture);

}  // namespace queuebox
