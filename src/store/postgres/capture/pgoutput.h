// pgoutput.h: the parts of PostgreSQL's streaming replication protocol and of the pgoutput
// logical decoding output (protocol version 1) that change capture needs: reading XLogData and
// primary keepalive frames, writing standby status updates, and telling an insert into the outbox
// table from every other change. It decodes no column values: capture only wakes delivery
// (QueueBox reference Appendix A), so it reads message types and relation names only.
//
// Formats (PostgreSQL docs "Streaming Replication Protocol" and "Logical Replication Message
// Formats"): all integers are big-endian; an LSN is a 64-bit WAL position written "%X/%X";
// timestamps are microseconds since 2000-01-01 00:00 UTC.
//
// Thread-safety: pure functions; a StreamTracker is used by one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

#include "queuebox/status.h"

namespace queuebox::store::capture {

// A WAL position (pg_lsn).
using Lsn = uint64_t;

// "16/B374D848" (upper and lower 32 bits in hexadecimal, as PostgreSQL prints pg_lsn).
std::string FormatLsn(Lsn lsn);
// The inverse of FormatLsn (either case); nullopt for anything else.
std::optional<Lsn> ParseLsn(std::string_view text);

// Microseconds since 2000-01-01 00:00 UTC, PostgreSQL's timestamp epoch.
int64_t PgEpochMicros(std::chrono::system_clock::time_point t);

// 'w' XLogData: WAL data starting at `start`; the server's WAL end when it sent the frame.
struct XLogData {
  Lsn start = 0;
  Lsn wal_end = 0;
  std::string_view data;  // one pgoutput message; points into the frame
};
// 'k' primary keepalive: everything up to `wal_end` has been sent.
struct Keepalive {
  Lsn wal_end = 0;
  bool reply_requested = false;
};
using CopyFrame = std::variant<XLogData, Keepalive>;

// Reads one CopyData payload of a START_REPLICATION stream. kInvalidArgument for a frame that is
// too short or of an unknown type (the caller ends the stream and reconnects).
Result<CopyFrame> ParseCopyFrame(std::string_view frame);

// 'r' standby status update: written = flushed = applied = `confirmed` (the position up to which
// the client needs nothing resent; the slot's confirmed_flush_lsn follows the flushed position),
// `now_us` (PgEpochMicros), and whether the server should answer with a keepalive at once.
std::string StandbyStatusUpdate(Lsn confirmed, int64_t now_us, bool reply_requested);

// What one pgoutput message is, as far as waking delivery goes.
enum class ChangeKind {
  kBegin,       // 'B'
  kCommit,      // 'C'
  kRelation,    // 'R' (recorded for the changes that follow)
  kInsert,      // 'I'
  kUpdate,      // 'U'
  kDelete,      // 'D'
  kTruncate,    // 'T'
  kOther,       // 'O' origin, 'Y' type, 'M' message: nothing to do
  kUnreadable,  // too short, an unknown type, or a change of a relation never described
};

struct Decoded {
  ChangeKind kind = ChangeKind::kOther;
  bool outbox = false;  // kInsert/kUpdate/kDelete of the outbox table
  Lsn commit_end = 0;   // kCommit: the end of the commit record (the position to confirm)
};

// Decodes pgoutput messages of one replication session. Relation messages map relation ids to
// names (each session describes a relation before its first change); a change is of the outbox
// when its relation's namespace and name equal `schema` and `table` exactly.
class PgOutputDecoder {
 public:
  PgOutputDecoder(std::string schema, std::string table)
      : schema_(std::move(schema)), table_(std::move(table)) {}
  Decoded Decode(std::string_view message);

 private:
  std::string schema_, table_;
  std::unordered_map<uint32_t, bool> is_outbox_;  // relation id -> names match
};

// The wake and confirm decisions of one replication session (QueueBox reference Appendix A):
//  - a transaction wakes delivery once, at its first insert into the outbox table; updates,
//    deletes and truncates never wake (the relay's own state writes make no new work), and a
//    message that cannot be read wakes (one extra claim costs less than a missed insert);
//  - the confirmed position advances to each commit's end, and to a keepalive's WAL end when no
//    transaction is open: the server has then sent every transaction that committed before it,
//    and a slot whose confirmed position follows the WAL end retains no WAL without bound while
//    the outbox is quiet.
class StreamTracker {
 public:
  // `start`: the position the stream starts from (nothing before it is confirmed again).
  StreamTracker(std::string schema, std::string table, Lsn start)
      : decoder_(std::move(schema), std::move(table)), confirmed_(start), received_(start) {}

  struct Step {
    bool wake = false;   // wake delivery now
    bool reply = false;  // the server asked for a status update now
  };
  // One CopyData payload. kInvalidArgument for a frame that is not XLogData or keepalive.
  Result<Step> OnFrame(std::string_view frame);

  Lsn confirmed() const { return confirmed_; }
  Lsn received() const { return received_; }
  bool in_transaction() const { return in_transaction_; }

  // What this session decoded (tests and status).
  struct Counts {
    int64_t commits = 0;
    int64_t outbox_inserts = 0;
    int64_t outbox_updates = 0;
    int64_t outbox_deletes = 0;
    int64_t other_changes = 0;  // changes of tables other than the outbox
    int64_t unreadable = 0;
    int64_t wakes = 0;
  };
  const Counts& counts() const { return counts_; }

 private:
  PgOutputDecoder decoder_;
  Lsn confirmed_;
  Lsn received_;
  bool in_transaction_ = false;
  bool woke_in_transaction_ = false;
  Counts counts_;
};

}  // namespace queuebox::store::capture
