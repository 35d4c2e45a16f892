#include "destinations/broker_common.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"
#include "telemetry/trace_context.h"

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

void ApplyTraceHeaders(HeaderList& headers, const TraceHeaders* trace) {
  if (trace == nullptr) return;
  std::erase_if(headers, [](const auto& h) { return telemetry::IsTraceHeader(h.first); });
  if (trace->traceparent.empty()) return;
  headers.emplace_back(std::string(telemetry::kTraceparent), trace->traceparent);
  if (!trace->tracestate.empty()) {
    headers.emplace_back(std::string(telemetry::kTracestate), trace->tracestate);
  }
}

Result<HeaderList> MergeMessageHeaders(const std::map<std::string, std::string>& static_headers,
                                       const OutboundMessage& message) {
  Result<HeaderList> out = MergeRowHeaders(static_headers, message.row->headers);
  if (out.ok()) ApplyTraceHeaders(*out, message.trace);
  return out;
}

Result<HeaderList> ParseRowHeaders(std::string_view headers) {
  HeaderList out;
  if (headers.empty() || headers == "{}") return out;  // most rows: no parse, no allocation
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

bool IsJsonDocument(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return false;
  // simdjson validates a 1 KiB payload several times faster than nlohmann::json::accept, whose
  // lexer fills a token buffer byte by byte (10 % of the relay's CPU into a local receiver).
  // What simdjson refuses goes to accept, which decides: the edges where the two differ (a UTF-8
  // BOM, integers beyond 64 bits, nesting past simdjson's 1,024 levels) are then nlohmann's, as
  // before. One parser per thread: it keeps its buffers between calls.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text.data(), text.size()).get(root) == simdjson::SUCCESS) return true;
  return nlohmann::json::accept(text);
}

Status CheckBodyIsJson(const OutboundMessage& message) {
  if (!message.transformed_body && message.row->payload_is_json) return Status::Ok();
  return CheckPayloadIsJson(message.body());
}

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
  // One pass (find_first_of calls memchr once per byte of value): this runs per message.
  const auto bad = std::find_if(value.begin(), value.end(),
                                [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
  if (bad == value.end()) return Status::Ok();
  const size_t at = static_cast<size_t>(bad - value.begin());
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
