// pgoutput_fuzz: change capture's reading of a replication stream (store/postgres/capture/
// pgoutput.h), from bytes as the server would send them. The input is a list of CopyData
// payloads, each a length byte then that many bytes, fed to one StreamTracker (and the XLogData
// ones to a second PgOutputDecoder beside it); the first 8 bytes are also an LSN.
// Properties: nothing throws or crashes; OnFrame fails exactly when ParseCopyFrame does; the
// received and confirmed positions never go back; a keepalive never wakes; a wake comes only
// from an insert into the outbox or an unreadable message, and at most once inside a
// transaction; the counts add up to what the decoder saw; a standby status update is 34 bytes
// carrying the confirmed position; FormatLsn and ParseLsn read back.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_util.h"
#include "store/postgres/capture/pgoutput.h"

using queuebox::fuzz::Require;
namespace c = queuebox::store::capture;

namespace {

uint64_t PgoBigEndian(std::string_view b) {
  uint64_t v = 0;
  for (char ch : b) v = (v << 8) | static_cast<unsigned char>(ch);
  return v;
}

void PgoCheckLsn(std::string_view input) {
  const c::Lsn lsn = PgoBigEndian(input.substr(0, 8));
  const std::string text = c::FormatLsn(lsn);
  Require(c::ParseLsn(text) == lsn, "an LSN reads back from its text");
  if (std::optional<c::Lsn> parsed = c::ParseLsn(input.substr(0, 24))) {
    Require(c::ParseLsn(c::FormatLsn(*parsed)) == *parsed, "a parsed LSN formats and reads back");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  PgoCheckLsn(input);
  c::StreamTracker tracker("public", "outbox", 100);
  c::PgOutputDecoder beside("public", "outbox");
  c::StreamTracker::Counts seen;
  bool woke_in_transaction = false;
  size_t pos = 8;
  while (pos < input.size()) {
    const size_t len = static_cast<unsigned char>(input[pos++]);
    const std::string_view frame = input.substr(pos, len);
    pos += frame.size();
    const c::Lsn received = tracker.received();
    const c::Lsn confirmed = tracker.confirmed();
    const bool was_in_transaction = tracker.in_transaction();
    auto parsed = c::ParseCopyFrame(frame);
    auto step = tracker.OnFrame(frame);
    Require(step.ok() == parsed.ok(), "OnFrame fails exactly when the frame does not parse");
    Require(tracker.received() >= received && tracker.confirmed() >= confirmed,
            "the received and confirmed positions never go back");
    if (!parsed.ok()) continue;
    if (std::holds_alternative<c::Keepalive>(*parsed)) {
      Require(!step->wake, "a keepalive never wakes");
      continue;
    }
    const c::Decoded d = beside.Decode(std::get<c::XLogData>(*parsed).data);
    const bool may_wake =
        (d.kind == c::ChangeKind::kInsert && d.outbox) || d.kind == c::ChangeKind::kUnreadable;
    Require(!step->wake || may_wake, "only an outbox insert or an unreadable message wakes");
    if (d.kind == c::ChangeKind::kBegin || d.kind == c::ChangeKind::kCommit) {
      woke_in_transaction = false;
    } else if (step->wake && was_in_transaction) {
      Require(!woke_in_transaction, "a transaction wakes at most once");
      woke_in_transaction = true;
    }
    seen.commits += d.kind == c::ChangeKind::kCommit;
    seen.unreadable += d.kind == c::ChangeKind::kUnreadable;
    seen.outbox_inserts += d.kind == c::ChangeKind::kInsert && d.outbox;
  }
  const c::StreamTracker::Counts& counts = tracker.counts();
  Require(counts.commits == seen.commits && counts.unreadable == seen.unreadable &&
              counts.outbox_inserts == seen.outbox_inserts,
          "the counts are what the decoder saw");
  const std::string update = c::StandbyStatusUpdate(tracker.confirmed(), 0, false);
  Require(update.size() == 34 && update[0] == 'r' &&
              PgoBigEndian(std::string_view(update).substr(1, 8)) == tracker.confirmed(),
          "a status update carries the confirmed position");
  return 0;
}
