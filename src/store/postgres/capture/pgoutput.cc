#include "store/postgres/capture/pgoutput.h"

#include <cstdio>

namespace queuebox::store::capture {
namespace {

// Big-endian reader over a byte range; every read fails softly (ok() turns false).
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool ok() const { return ok_; }
  uint64_t Uint(size_t bytes) {
    if (!ok_ || data_.size() - pos_ < bytes) {
      ok_ = false;
      return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(data_[pos_ + i]);
    pos_ += bytes;
    return v;
  }
  // A NUL-terminated string.
  std::string_view CString() {
    if (!ok_) return {};
    size_t end = data_.find('\0', pos_);
    if (end == std::string_view::npos) {
      ok_ = false;
      return {};
    }
    std::string_view s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  std::string_view Rest() { return ok_ ? data_.substr(pos_) : std::string_view(); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
};

void PutUint(std::string& out, uint64_t v, size_t bytes) {
  for (size_t i = bytes; i > 0; --i) out.push_back(static_cast<char>((v >> (8 * (i - 1))) & 0xff));
}

}  // namespace

std::string FormatLsn(Lsn lsn) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%X/%X", static_cast<unsigned>(lsn >> 32),
                static_cast<unsigned>(lsn & 0xffffffffu));
  return buf;
}

std::optional<Lsn> ParseLsn(std::string_view text) {
  size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0 || slash + 1 >= text.size())
    return std::nullopt;
  auto hex = [](std::string_view part) -> std::optional<uint64_t> {
    if (part.empty() || part.size() > 8) return std::nullopt;
    uint64_t v = 0;
    for (char c : part) {
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                                       : -1;
      if (d < 0) return std::nullopt;
      v = (v << 4) | static_cast<uint64_t>(d);
    }
    return v;
  };
  auto hi = hex(text.substr(0, slash));
  auto lo = hex(text.substr(slash + 1));
  if (!hi || !lo) return std::nullopt;
  return (*hi << 32) | *lo;
}

int64_t PgEpochMicros(std::chrono::system_clock::time_point t) {
  // 2000-01-01 00:00:00 UTC is 946684800 s after the Unix epoch.
  constexpr int64_t kPgEpochUnixMicros = 946684800LL * 1000000LL;
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count() -
         kPgEpochUnixMicros;
}

Result<CopyFrame> ParseCopyFrame(std::string_view frame) {
  if (frame.empty()) return InvalidArgument("an empty replication frame");
  Reader r(frame.substr(1));
  switch (frame[0]) {
    case 'w': {
      XLogData d;
      d.start = r.Uint(8);
      d.wal_end = r.Uint(8);
      (void)r.Uint(8);  // the server's send time
      d.data = r.Rest();
      if (!r.ok()) return InvalidArgument("a truncated XLogData frame");
      return CopyFrame(d);
    }
    case 'k': {
      Keepalive k;
      k.wal_end = r.Uint(8);
      (void)r.Uint(8);
      k.reply_requested = r.Uint(1) != 0;
      if (!r.ok()) return InvalidArgument("a truncated keepalive frame");
      return CopyFrame(k);
    }
    default:
      return InvalidArgument("a replication frame of unknown type " +
                             std::to_string(static_cast<unsigned char>(frame[0])));
  }
}

std::string StandbyStatusUpdate(Lsn confirmed, int64_t now_us, bool reply_requested) {
  std::string out;
  out.reserve(34);
  out.push_back('r');
  PutUint(out, confirmed, 8);  // written
  PutUint(out, confirmed, 8);  // flushed
  PutUint(out, confirmed, 8);  // applied
  PutUint(out, static_cast<uint64_t>(now_us), 8);
  out.push_back(reply_requested ? 1 : 0);
  return out;
}

Decoded PgOutputDecoder::Decode(std::string_view message) {
  Decoded d;
  if (message.empty()) {
    d.kind = ChangeKind::kUnreadable;
    return d;
  }
  Reader r(message.substr(1));
  auto change = [&](ChangeKind kind) {
    auto relid = static_cast<uint32_t>(r.Uint(4));
    auto it = is_outbox_.find(relid);
    if (!r.ok() || it == is_outbox_.end()) {
      d.kind = ChangeKind::kUnreadable;
    } else {
      d.kind = kind;
      d.outbox = it->second;
    }
  };
  switch (message[0]) {
    case 'B':
      d.kind = ChangeKind::kBegin;
      break;
    case 'C': {
      (void)r.Uint(1);  // flags
      (void)r.Uint(8);  // the commit record's position
      d.commit_end = r.Uint(8);
      d.kind = r.ok() ? ChangeKind::kCommit : ChangeKind::kUnreadable;
      break;
    }
    case 'R': {
      auto relid = static_cast<uint32_t>(r.Uint(4));
      std::string_view ns = r.CString();
      std::string_view name = r.CString();
      if (!r.ok()) {
        d.kind = ChangeKind::kUnreadable;
        break;
      }
      // pgoutput sends an empty namespace for pg_catalog.
      is_outbox_[relid] = ns == schema_ && name == table_;
      d.kind = ChangeKind::kRelation;
      break;
    }
    case 'I':
      change(ChangeKind::kInsert);
      break;
    case 'U':
      change(ChangeKind::kUpdate);
      break;
    case 'D':
      change(ChangeKind::kDelete);
      break;
    case 'T':
      d.kind = ChangeKind::kTruncate;
      break;
    case 'O':
    case 'Y':
    case 'M':
      d.kind = ChangeKind::kOther;
      break;
    default:
      d.kind = ChangeKind::kUnreadable;
  }
  return d;
}

Result<StreamTracker::Step> StreamTracker::OnFrame(std::string_view frame) {
  QB_ASSIGN_OR_RETURN(CopyFrame parsed, ParseCopyFrame(frame));
  Step step;
  if (const auto* k = std::get_if<Keepalive>(&parsed)) {
    step.reply = k->reply_requested;
    if (k->wal_end > received_) received_ = k->wal_end;
    if (!in_transaction_ && k->wal_end > confirmed_) confirmed_ = k->wal_end;
    return step;
  }
  const auto& x = std::get<XLogData>(parsed);
  if (x.start > received_) received_ = x.start;
  Decoded d = decoder_.Decode(x.data);
  auto wake_once = [&] {
    if (in_transaction_ && woke_in_transaction_) return;
    woke_in_transaction_ = in_transaction_;
    step.wake = true;
    ++counts_.wakes;
  };
  switch (d.kind) {
    case ChangeKind::kBegin:
      in_transaction_ = true;
      woke_in_transaction_ = false;
      break;
    case ChangeKind::kCommit:
      ++counts_.commits;
      in_transaction_ = false;
      woke_in_transaction_ = false;
      if (d.commit_end > confirmed_) confirmed_ = d.commit_end;
      if (d.commit_end > received_) received_ = d.commit_end;
      break;
    case ChangeKind::kInsert:
      if (d.outbox) {
        ++counts_.outbox_inserts;
        wake_once();
      } else {
        ++counts_.other_changes;
      }
      break;
    case ChangeKind::kUpdate:
      ++(d.outbox ? counts_.outbox_updates : counts_.other_changes);
      break;
    case ChangeKind::kDelete:
      ++(d.outbox ? counts_.outbox_deletes : counts_.other_changes);
      break;
    case ChangeKind::kUnreadable:
      ++counts_.unreadable;
      wake_once();
      break;
    case ChangeKind::kRelation:
    case ChangeKind::kTruncate:
    case ChangeKind::kOther:
      break;
  }
  return step;
}

}  // namespace queuebox::store::capture
