// capture_state.h: the persistent state of change capture and the checks that keep one capture
// configuration's position away from another (QueueBox reference Appendix A, §3.1 V7).
//
//  - The state directory (outbox.capture.stateDirectory) holds `identity` (the state id, a UUID,
//    that ties the files to the database's row) and `offsets.dat` (the WAL position capture has
//    handled, in QueueBox C++'s own text form).
//  - The table queuebox_capture_state holds one row per capture identity: identity_name,
//    state_id, config_fingerprint. The fingerprint is a SHA-256 over the settings that give a
//    position its meaning (host, port, database, schema.table, slot, publication) and no secret.
//    It is computed over the same text QueueBox computes it over, so a database and a state
//    volume that QueueBox used pass the same checks here.
//  - One owner per identity: a session advisory lock on a key derived from the identity as
//    QueueBox derives it, so a QueueBox process and a QueueBox C++ process exclude each other.
//
// Thread-safety: pure functions; a StateDirectory is used by one thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "queuebox/status.h"
#include "store/postgres/capture/pgoutput.h"

namespace queuebox::store::capture {

inline constexpr const char* kIdentityFile = "identity";
inline constexpr const char* kOffsetsFile = "offsets.dat";
inline constexpr const char* kStateTable = "queuebox_capture_state";

// What the fingerprint covers.
struct FingerprintInput {
  std::string host, port, database;  // the capture connection's target
  std::string schema, table;         // the outbox table
  std::string slot, publication;
};
// 64 lowercase hex digits: SHA-256 of the lines "connector.class=<PostgreSQL connector>",
// "database.hostname=", "database.port=", "database.dbname=", "database.names=" (empty on
// PostgreSQL), "table.include.list=\Q<schema>.<table>\E", "slot.name=", "publication.name="
// joined by '\n' (QueueBox's CaptureProperties.captureFingerprint).
std::string CaptureFingerprint(const FingerprintInput& in);

// The advisory lock key of an identity: the 32-bit Java String.hashCode of
// "queuebox_capture_<identity>", sign-extended (QueueBox's CaptureLock).
int64_t CaptureLockKey(const std::string& identity);

// The files of one state directory. Reads never create anything; writes create the directory
// (mode 0750) and replace a file atomically (temporary file, fsync, rename, fsync of the folder).
class StateDirectory {
 public:
  explicit StateDirectory(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // The state id in `identity` (surrounding whitespace trimmed); nullopt when the file is
  // missing. kUnavailable when it cannot be read (permissions: the message names the path).
  Result<std::optional<std::string>> ReadIdentity() const;
  Status WriteIdentity(const std::string& state_id) const;

  struct Offsets {
    bool present = false;    // the file exists
    std::optional<Lsn> lsn;  // nullopt: present but not in QueueBox C++'s form (QueueBox's)
  };
  Result<Offsets> ReadOffsets() const;
  Status WriteOffsets(Lsn lsn) const;

 private:
  Status WriteFile(const std::string& name, const std::string& text) const;
  std::string path_;
};

// The database's row for an identity.
struct RegistryRow {
  std::string state_id;
  std::string fingerprint;
};

// What start-up does with the state it found.
enum class StateVerdict {
  kCreate,   // no row and no files: a first start (the slot is created if missing)
  kResume,   // row and files agree: resume from the recorded position (the slot must exist)
  kRecover,  // stop capture; an operator decides (reason set)
};
struct StateDecision {
  StateVerdict verdict = StateVerdict::kCreate;
  std::string reason;
};
// The checks of QueueBox's CaptureState.verify, in its order: with a row, a changed fingerprint,
// then missing or foreign files, need recovery; without a row, files that exist need recovery.
// `identity` and `directory` only name things in the reason.
StateDecision DecideState(const std::optional<RegistryRow>& row,
                          const std::optional<std::string>& identity_file, bool offsets_present,
                          const std::string& fingerprint, const std::string& identity,
                          const std::string& directory);

}  // namespace queuebox::store::capture
