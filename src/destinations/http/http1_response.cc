// http1_response.cc: the HTTP/1.x answer reader (http1_response.h).
#include "destinations/http/http1_response.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <ctime>

namespace queuebox {
namespace {

bool Http1NameIs(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x | 0x20) == (y | 0x20);
         });
}

std::string_view TrimBlanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// True when the comma-separated list `value` holds `token` (case-insensitive).
bool TokenListHas(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (Http1NameIs(TrimBlanks(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// The last coding of a comma-separated Transfer-Encoding list.
std::string_view LastTransferCoding(std::string_view value) {
  size_t comma = value.rfind(',');
  return TrimBlanks(comma == std::string_view::npos ? value : value.substr(comma + 1));
}

bool AllDecimalDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Retry-After: delay-seconds, or an HTTP date (IMF-fixdate) from now. 0 when neither.
int64_t ParseRetryAfterSeconds(std::string_view value) {
  value = TrimBlanks(value);
  if (AllDecimalDigits(value)) {
    int64_t s = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), s);
    if (ec == std::errc::result_out_of_range) return int64_t{1} << 40;  // clamped by the caller
    return ec == std::errc() && end == value.data() + value.size() ? s : 0;
  }
  std::tm tm{};
  std::string text(value);
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return 0;
  const int64_t at = timegm(&tm);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  return std::max<int64_t>(0, at - now);
}

}  // namespace

void Http1ResponseParser::Reset(size_t body_cap) {
  state_ = State::kStatus;
  body_cap_ = body_cap;
  line_.clear();
  head_bytes_ = 0;
  problem_.clear();
  status_ = 0;
  minor_ = 1;
  reason_.clear();
  body_.clear();
  retry_after_s_ = 0;
  keep_alive_ = true;
  chunked_ = transfer_to_close_ = close_ = false;
  has_length_ = false;
  length_ = remaining_ = 0;
}

void Http1ResponseParser::KeepBody(std::string_view data) {
  if (body_.size() < body_cap_) body_.append(data.substr(0, body_cap_ - body_.size()));
}

void Http1ResponseParser::HeadLine(std::string_view line) {
  if (state_ == State::kStatus) {
    // "HTTP/1.1 200 OK": version, a space, three digits, then an optional space and reason.
    if (line.size() < 12 || line.substr(0, 7) != "HTTP/1." || line[7] < '0' || line[7] > '9' ||
        line[8] != ' ' || !AllDecimalDigits(line.substr(9, 3)) ||
        (line.size() > 12 && line[12] != ' ')) {
      problem_ = "not an HTTP/1.x status line";
      return;
    }
    minor_ = line[7] - '0';
    status_ = (line[9] - '0') * 100 + (line[10] - '0') * 10 + (line[11] - '0');
    if (status_ < 100) {
      problem_ = "status code below 100";
      return;
    }
    reason_ = std::string(line.size() > 13 ? line.substr(13, 200) : std::string_view());
    keep_alive_ = minor_ >= 1;
    state_ = State::kHeaders;
    return;
  }
  if (line.empty()) return EndOfHead();
  if (line.front() == ' ' || line.front() == '\t') {
    problem_ = "folded header line";
    return;
  }
  size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    problem_ = "header line without a name";
    return;
  }
  Field(line.substr(0, colon), TrimBlanks(line.substr(colon + 1)));
}

void Http1ResponseParser::Field(std::string_view name, std::string_view value) {
  if (Http1NameIs(name, "content-length")) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (!AllDecimalDigits(value) || ec != std::errc() || end != value.data() + value.size() ||
        (has_length_ && n != length_)) {
      problem_ = "bad Content-Length";
      return;
    }
    has_length_ = true;
    length_ = n;
  } else if (Http1NameIs(name, "transfer-encoding")) {
    if (!Http1NameIs(LastTransferCoding(value), "chunked")) {
      // RFC 9112 6.3: the body then ends with the connection.
      chunked_ = false;
      keep_alive_ = false;
      has_length_ = false;
      transfer_to_close_ = true;
    } else {
      chunked_ = true;
    }
  } else if (Http1NameIs(name, "connection")) {
    if (TokenListHas(value, "close")) {
      keep_alive_ = false;
      close_ = true;
    } else if (TokenListHas(value, "keep-alive") && minor_ == 0) {
      keep_alive_ = true;
    }
  } else if (Http1NameIs(name, "retry-after")) {
    retry_after_s_ = ParseRetryAfterSeconds(value);
  }
}

void Http1ResponseParser::EndOfHead() {
  if (status_ >= 100 && status_ < 200) {
    if (status_ == 101) {
      problem_ = "101 Switching Protocols to a request that asked for none";
      return;
    }
    // An interim answer (100 Continue, 103 Early Hints): the final one follows.
    const size_t bytes = head_bytes_;
    Reset(body_cap_);
    head_bytes_ = bytes;
    return;
  }
  if (close_) keep_alive_ = false;
  head_bytes_ = 0;  // the head is done: each chunk line (and the trailers) is bounded on its own
  if (status_ == 204 || status_ == 304) {
    state_ = State::kDone;
  } else if (chunked_ && !transfer_to_close_) {
    has_length_ = false;  // RFC 9112 6.3: Transfer-Encoding overrides Content-Length
    state_ = State::kChunkSize;
  } else if (has_length_ && !transfer_to_close_) {
    remaining_ = length_;
    state_ = remaining_ == 0 ? State::kDone : State::kBody;
  } else {
    keep_alive_ = false;
    state_ = State::kToClose;
  }
}

size_t Http1ResponseParser::Feed(std::string_view data, std::string& problem) {
  size_t used = 0;
  // A line of the head, a chunk size or a trailer: gathered into line_ up to its LF.
  auto take_line = [&](std::string_view& out) -> bool {
    size_t lf = data.find('\n', used);
    size_t end = lf == std::string_view::npos ? data.size() : lf;
    head_bytes_ += end - used + (lf == std::string_view::npos ? 0 : 1);
    if (head_bytes_ > kMaxHead) {
      problem_ = "head or chunk line longer than 64 KiB";
      return false;
    }
    line_.append(data.substr(used, end - used));
    if (lf == std::string_view::npos) {
      used = data.size();
      return false;
    }
    used = lf + 1;
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    out = line_;
    return true;
  };
  while (problem_.empty() && state_ != State::kDone && used < data.size()) {
    switch (state_) {
      case State::kStatus:
      case State::kHeaders:
      case State::kTrailers: {
        std::string_view line;
        if (!take_line(line)) break;
        if (state_ == State::kTrailers) {
          if (line.empty()) state_ = State::kDone;
        } else {
          HeadLine(line);
        }
        line_.clear();
        break;
      }
      case State::kChunkSize: {
        std::string_view line;
        if (!take_line(line)) break;
        std::string_view hex = TrimBlanks(line.substr(0, line.find(';')));
        uint64_t size = 0;
        auto [end, ec] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
        if (hex.empty() || ec != std::errc() || end != hex.data() + hex.size()) {
          problem_ = "bad chunk size";
          break;
        }
        line_.clear();
        head_bytes_ = 0;  // each chunk line is bounded on its own
        remaining_ = size;
        state_ = size == 0 ? State::kTrailers : State::kChunkData;
        break;
      }
      case State::kBody:
      case State::kChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - used));
        KeepBody(data.substr(used, n));
        used += n;
        remaining_ -= n;
        if (remaining_ == 0) state_ = state_ == State::kBody ? State::kDone : State::kChunkEnd;
        break;
      }
      case State::kChunkEnd: {
        std::string_view line;
        if (!take_line(line)) break;
        if (!line.empty()) problem_ = "chunk not followed by a line end";
        line_.clear();
        head_bytes_ = 0;
        state_ = State::kChunkSize;
        break;
      }
      case State::kToClose:
        KeepBody(data.substr(used));
        used = data.size();
        break;
      case State::kDone:
        break;
    }
  }
  if (!problem_.empty()) problem = problem_;
  return used;
}

bool Http1ResponseParser::EndOfStream() {
  if (state_ != State::kToClose) return false;
  state_ = State::kDone;
  return true;
}

Http1Answer Http1ResponseParser::TakeAnswer() {
  Http1Answer a;
  a.kind = Http1Answer::Kind::kAnswered;
  a.status = status_;
  a.reason = std::move(reason_);
  a.body = std::move(body_);
  a.retry_after_s = retry_after_s_;
  return a;
}

}  // namespace queuebox
