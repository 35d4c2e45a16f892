#include "destinations/broker_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"

namespace queuebox {
namespace {

bool KnownColumn(std::string_view column) {
  const auto& cols = AddressFromColumns();
  return std::find(cols.begin(), cols.end(), column) != cols.end();
}

std::string ColumnProblem(std::string_view value) {
  return "'" + std::string(value) + "' is not a column this key can read (use aggregate_type, " +
         "topic or key)";
}

}  // namespace

Result<AddressSpec> AddressSpec::Create(std::string_view destination, std::string_view field,
                                        std::string_view tmpl, std::string_view from_key,
                                        const std::optional<std::string>& from) {
  std::string prefix = "destinations." + std::string(destination) + ".";
  if (from && !KnownColumn(*from)) {
    return InvalidArgument(prefix + std::string(from_key) + ": " + ColumnProblem(*from));
  }
  Result<Template> t = Template::CompileAddress(tmpl);
  if (!t.ok()) {
    return InvalidArgument(prefix + std::string(field) + ": " + t.status().message());
  }
  return AddressSpec(std::string(field), std::move(t).value(), from);
}

std::string AddressSpec::Render(const OutboxRow& row, const TemplateContext& context) const {
  if (from_) {
    if (*from_ == "topic") return row.topic;
    if (*from_ == "key") return row.key.value_or("");
    return row.aggregate_type.value_or("");
  }
  return tmpl_.Render(context);
}

void ValidateAddressKeys(const nlohmann::json& block, std::string_view field,
                         std::string_view from_key, std::vector<std::string>* problems) {
  auto it = block.find(std::string(field));
  if (it != block.end() && it->is_string()) {
    Status s = ValidateAddressTemplate(it->get<std::string>());
    if (!s.ok()) problems->push_back(std::string(field) + ": " + s.message());
  }
  auto from = block.find(std::string(from_key));
  if (from != block.end() && from->is_string() && !KnownColumn(from->get<std::string>())) {
    problems->push_back(std::string(from_key) + ": " + ColumnProblem(from->get<std::string>()));
  }
}

Result<HeaderList> MergeRowHeaders(const std::map<std::string, std::string>& static_headers,
                                   std::string_view row_headers) {
  HeaderList out(static_headers.begin(), static_headers.end());
  Result<HeaderList> row = ParseRowHeaders(row_headers);
  if (!row.ok()) return row.status();
  for (auto& header : *row) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture one in a lambda.
    auto same = std::find_if(out.begin(), out.end(),
                             [&header](const auto& h) { return h.first == header.first; });
    if (same != out.end()) {
      same->second = std::move(header.second);
    } else {
      out.push_back(std::move(header));
    }
  }
  return out;
}

namespace {

// At most 64 bytes of `s` for a reason, with "..." when cut.
std::string Shown(std::string_view s) {
  constexpr size_t kMax = 64;
  if (s.size() <= kMax) return std::string(s);
  size_t n = kMax;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // whole characters
  return std::string(s.substr(0, n)) + "...";
}

const char* JsonTypeName(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::boolean:
      return "a boolean";
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    case nlohmann::json::value_t::string:
      return "a string";
    default:
      return "a number";
  }
}

}  // namespace

Result<HeaderList> ParseRowHeaders(std::string_view headers) {
  HeaderList out;
  if (headers.empty()) return out;
  // A NUL ends nlohmann's input early (`{}\0junk` parses as `{}`): not JSON.
  nlohmann::json j = headers.find('\0') != std::string_view::npos
                         ? nlohmann::json(nlohmann::json::value_t::discarded)
                         : nlohmann::json::parse(headers, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgument(
        "headers: not valid JSON; the row's headers must be a JSON object of "
        "strings");
  }
  if (!j.is_object()) {
    return InvalidArgument(std::string("headers: ") + JsonTypeName(j) +
                           ", not a JSON object of strings");
  }
  out.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it->is_string()) {
      return InvalidArgument("headers: the value of \"" + Shown(it.key()) + "\" is " +
                             JsonTypeName(*it) +
                             "; the row's headers must be a JSON object of "
                             "strings");
    }
    out.emplace_back(it.key(), it->get<std::string>());
  }
  return out;
}

namespace {

// A one-pass validator with the rules of nlohmann::json::accept (strict, no comments), without
// its token buffer and SAX calls: 6-10x less CPU on a 1 KiB payload, which the http and nats
// destinations check per message. RFC 8259 plus nlohmann's edges: a leading UTF-8 BOM is
// skipped, strings must be valid UTF-8 (no overlongs, no encoded surrogates) with paired \u
// surrogates, and a number whose double value overflows is refused.
class JsonScanner {
 public:
  explicit JsonScanner(std::string_view s)
      : p_(reinterpret_cast<const unsigned char*>(s.data())), end_(p_ + s.size()) {}

  bool Document() {
    if (p_ != end_ && *p_ == 0xEF) {  // nlohmann skips a BOM, and refuses a partial one
      if (end_ - p_ < 3 || p_[1] != 0xBB || p_[2] != 0xBF) return false;
      p_ += 3;
    }
    std::vector<char> open;  // the containers around the current value: '{' or '['
    while (true) {
      // A value.
      SkipSpace();
      if (p_ == end_) return false;
      switch (*p_) {
        case '{':
          ++p_;
          SkipSpace();
          if (p_ != end_ && *p_ == '}') {
            ++p_;
            break;
          }
          open.push_back('{');
          if (!Member()) return false;
          continue;
        case '[':
          ++p_;
          SkipSpace();
          if (p_ != end_ && *p_ == ']') {
            ++p_;
            break;
          }
          open.push_back('[');
          continue;
        case '"':
          if (!String()) return false;
          break;
        case 't':
          if (!Literal("true")) return false;
          break;
        case 'f':
          if (!Literal("false")) return false;
          break;
        case 'n':
          if (!Literal("null")) return false;
          break;
        default:
          if (!Number()) return false;
          break;
      }
      // After a value: close containers, or go on to the next element.
      while (true) {
        SkipSpace();
        if (open.empty()) return p_ == end_;
        if (p_ == end_) return false;
        const char c = static_cast<char>(*p_++);
        if (c == ',') {
          if (open.back() == '{' && !Member()) return false;
          break;
        }
        if (c != (open.back() == '{' ? '}' : ']')) return false;
        open.pop_back();
      }
    }
  }

 private:
  void SkipSpace() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }

  // `"name" :`, leaving the position at the member's value.
  bool Member() {
    SkipSpace();
    if (p_ == end_ || *p_ != '"' || !String()) return false;
    SkipSpace();
    if (p_ == end_ || *p_ != ':') return false;
    ++p_;
    return true;
  }

  bool Literal(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  int Hex4() {  // the value of 4 hex digits, or -1
    if (end_ - p_ < 4) return -1;
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const unsigned char c = *p_++;
      int d;
      if (c >= '0' && c <= '9') {
        d = c - '0';
      } else if (c >= 'a' && c <= 'f') {
        d = c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        d = c - 'A' + 10;
      } else {
        return -1;
      }
      v = v * 16 + d;
    }
    return v;
  }

  bool Continuation(unsigned char lo, unsigned char hi) {
    if (p_ == end_ || *p_ < lo || *p_ > hi) return false;
    ++p_;
    return true;
  }

  bool String() {
    ++p_;  // the opening quote
    while (true) {
      // The plain run: printable ASCII other than the quote and the backslash.
      while (p_ != end_ && *p_ >= 0x20 && *p_ < 0x80 && *p_ != '"' && *p_ != '\\') ++p_;
      if (p_ == end_) return false;
      const unsigned char c = *p_++;
      if (c == '"') return true;
      if (c == '\\') {
        if (p_ == end_) return false;
        switch (*p_++) {
          case '"':
          case '\\':
          case '/':
          case 'b':
          case 'f':
          case 'n':
          case 'r':
          case 't':
            continue;
          case 'u': {
            const int u = Hex4();
            if (u < 0 || (u >= 0xDC00 && u <= 0xDFFF)) return false;
            if (u >= 0xD800 && u <= 0xDBFF) {  // a high surrogate: its low one must follow
              if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
              p_ += 2;
              const int low = Hex4();
              if (low < 0xDC00 || low > 0xDFFF) return false;
            }
            continue;
          }
          default:
            return false;
        }
      }
      // UTF-8 (RFC 3629), as nlohmann's lexer checks it.
      bool ok;
      if (c >= 0xC2 && c <= 0xDF) {
        ok = Continuation(0x80, 0xBF);
      } else if (c == 0xE0) {
        ok = Continuation(0xA0, 0xBF) && Continuation(0x80, 0xBF);
      } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
        ok = Continuation(0x80, 0xBF) && Continuation(0x80, 0xBF);
      } else if (c == 0xED) {
        ok = Continuation(0x80, 0x9F) && Continuation(0x80, 0xBF);
      } else if (c == 0xF0) {
        ok = Continuation(0x90, 0xBF) && Continuation(0x80, 0xBF) && Continuation(0x80, 0xBF);
      } else if (c >= 0xF1 && c <= 0xF3) {
        ok = Continuation(0x80, 0xBF) && Continuation(0x80, 0xBF) && Continuation(0x80, 0xBF);
      } else if (c == 0xF4) {
        ok = Continuation(0x80, 0x8F) && Continuation(0x80, 0xBF) && Continuation(0x80, 0xBF);
      } else {
        ok = false;  // a control character, a stray continuation byte or an invalid lead byte
      }
      if (!ok) return false;
    }
  }

  bool Digits() {  // one or more
    const unsigned char* start = p_;
    while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    return p_ != start;
  }

  bool Number() {
    const unsigned char* start = p_;
    if (*p_ == '-') ++p_;
    if (p_ == end_) return false;
    if (*p_ == '0') {
      ++p_;
    } else if (!Digits()) {
      return false;
    }
    bool simple = true;  // an integer token
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (!Digits()) return false;
      simple = false;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!Digits()) return false;
      simple = false;
    }
    // An integer of fewer than 309 digits is finite as a double; nlohmann refuses a number
    // that overflows one (it keeps large integers as doubles).
    if (simple && p_ - start < 309) return true;
    const char* first = reinterpret_cast<const char*>(start);
    const char* last = reinterpret_cast<const char*>(p_);
    double value = 0;
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (ec == std::errc()) return true;
    if (ec != std::errc::result_out_of_range) return false;
    // Overflow or underflow: nlohmann takes strtod's value, which is finite on underflow.
    return std::isfinite(std::strtod(std::string(first, last).c_str(), nullptr));
  }

  const unsigned char* p_;
  const unsigned char* end_;
};

}  // namespace

bool IsJsonDocument(std::string_view text) { return JsonScanner(text).Document(); }

Status CheckPayloadIsJson(std::string_view body) {
  // A NUL is named with its offset (nlohmann's lexer, which IsJsonDocument follows, would end
  // the input there).
  const size_t nul = body.find('\0');
  if (nul != std::string_view::npos) {
    return InvalidArgument("payload: not valid JSON (a NUL byte at offset " + std::to_string(nul) +
                           "; the payload must be one JSON document)");
  }
  if (IsJsonDocument(body)) return Status::Ok();
  return InvalidArgument("payload: not valid JSON (the payload must be one JSON document)");
}

Status CheckHeaderText(std::string_view field, std::string_view value) {
  const size_t at = value.find_first_of(std::string_view("\r\n\0", 3));
  if (at == std::string_view::npos) return Status::Ok();
  const char* what = value[at] == '\0' ? "a NUL byte" : "a line break (CR or LF)";
  return InvalidArgument(std::string(field) + ": contains " + what +
                         ", which a message header cannot carry");
}

Status CheckHeaderListText(const HeaderList& headers) {
  for (const auto& [name, value] : headers) {
    const std::string field = "headers: \"" + Shown(name) + "\"";
    Status s = CheckHeaderText(field + " (name)", name);
    if (s.ok()) s = CheckHeaderText(field, value);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

Status CheckHeaderNames(const HeaderList& headers) {
  for (const auto& header : headers) {
    const std::string& name = header.first;
    if (name.empty()) return InvalidArgument("headers: a name is empty");
    const std::string field = "headers: \"" + Shown(name) + "\" (name): contains ";
    if (name.find(':') != std::string::npos) {
      return InvalidArgument(field + "':', which a header name cannot carry");
    }
    for (char c : name) {
      const auto u = static_cast<unsigned char>(c);
      if (u <= ' ' || u == 0x7f) {
        return InvalidArgument(field + "a space or a control character, which a header name " +
                               "cannot carry");
      }
    }
  }
  return Status::Ok();
}

Status CheckKafkaTopic(std::string_view topic) {
  constexpr size_t kMaxKafkaTopic = 249;
  if (topic.size() > kMaxKafkaTopic) {
    return InvalidArgument("topic: the Kafka topic '" + Shown(topic) + "' is " +
                           std::to_string(topic.size()) + " characters; Kafka allows at most " +
                           std::to_string(kMaxKafkaTopic));
  }
  if (topic == "." || topic == "..") {
    return InvalidArgument("topic: '" + std::string(topic) + "' is not a legal Kafka topic name");
  }
  for (char c : topic) {
    const bool legal = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '.' || c == '_' || c == '-';
    if (!legal) {
      return InvalidArgument("topic: the Kafka topic '" + Shown(topic) +
                             "' has a character Kafka does not allow (only a-z, A-Z, 0-9, '.', "
                             "'_' and '-')");
    }
  }
  return Status::Ok();
}

Status CheckAmqpShortString(std::string_view field, std::string_view value) {
  constexpr size_t kMaxShortString = 255;
  if (value.size() <= kMaxShortString) return Status::Ok();
  return InvalidArgument(std::string(field) + ": '" + Shown(value) + "' is " +
                         std::to_string(value.size()) + " bytes; RabbitMQ allows at most " +
                         std::to_string(kMaxShortString));
}

Status CheckNatsSubject(std::string_view subject) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("subject: the NATS subject '" + Shown(subject) + "' " + why);
  };
  size_t start = 0;
  while (true) {
    const size_t dot = subject.find('.', start);
    const std::string_view token =
        subject.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (token.empty()) return bad("has an empty token (a leading, trailing or double '.')");
    if (token == "*" || token == ">") return bad("has a wildcard token, which cannot be published");
    for (char c : token) {
      if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
        return bad("has whitespace or a control character");
      }
    }
    if (dot == std::string_view::npos) return Status::Ok();
    start = dot + 1;
  }
}

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

std::string FailureReason(std::string_view text, int max_chars) {
  return SanitizeError(text, static_cast<std::size_t>(std::max(max_chars, 1)));
}

std::optional<std::string> OptionalString(const nlohmann::json& block, const char* key) {
  auto it = block.find(key);
  if (it == block.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// ---- ReconnectLoop ------------------------------------------------------------------------------

ReconnectLoop::ReconnectLoop(std::string destination, std::function<Status()> attempt,
                             int64_t initial_ms, int64_t cap_ms)
    : destination_(std::move(destination)),
      attempt_(std::move(attempt)),
      initial_ms_(initial_ms),
      cap_ms_(cap_ms) {}

ReconnectLoop::~ReconnectLoop() { Stop(); }

void ReconnectLoop::Kick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  wanted_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void ReconnectLoop::Stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void ReconnectLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  int failures = 0;
  while (!stopped_) {
    cv_.wait(lock, [&] { return wanted_ || stopped_; });
    if (stopped_) break;
    wanted_ = false;
    lock.unlock();
    Status s = attempt_();
    lock.lock();
    if (s.ok()) {
      failures = 0;
      continue;
    }
    ++failures;
    int64_t delay = ReconnectDelayMs(failures, initial_ms_, cap_ms_);
    if (failures == 1 || failures % 10 == 0) {
      log::Warn("The destination is not reachable; reconnecting in the background",
                {{"destination", destination_},
                 {"attempts", std::to_string(failures)},
                 {"next_attempt_ms", std::to_string(delay)},
                 {"reason", SanitizeError(s.message(), 500)}});
    }
    // The next attempt after the delay (a Kick does not shorten it); a Stop ends the wait.
    cv_.wait_for(lock, std::chrono::milliseconds(delay), [&] { return stopped_; });
    wanted_ = true;
  }
}

}  // namespace queuebox
