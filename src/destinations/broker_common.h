// broker_common.h: what the Kafka, RabbitMQ and NATS destinations share: the address of a
// message (a `*From` column or an address template, QueueBox reference §7.5), merged headers
// (§9.1: static headers, then row headers, a row header wins) and failure reasons.
//
// Thread-safety: AddressSpec is immutable after Create and may be used from many threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "core/template.h"
#include "queuebox/destination.h"
#include "queuebox/message.h"
#include "queuebox/options.h"
#include "queuebox/status.h"

namespace queuebox {

// The row columns a `*From` key may name (underscore spelling, §7.5).
inline const std::vector<std::string>& AddressFromColumns() {
  static const std::vector<std::string> kColumns = {"aggregate_type", "topic", "key"};
  return kColumns;
}

// The address (Kafka topic, RabbitMQ exchange, NATS subject) of one message.
class AddressSpec {
 public:
  // `field` is the template key ("topic", "exchange", "subject"), `from_key` its *From key.
  // `from` (when set) names a column and wins over the template. kInvalidArgument, naming the
  // destination and field, for an unknown placeholder or an unknown column:
  //   "destinations.<name>.topic: unknown placeholder '{{ x }}' (...)"
  static Result<AddressSpec> Create(std::string_view destination, std::string_view field,
                                    std::string_view tmpl, std::string_view from_key,
                                    const std::optional<std::string>& from);

  // The address of `row` (may be empty: the caller fails the message, never a default).
  std::string Render(const OutboxRow& row, const TemplateContext& context) const;
  // True when the address is the same for every message (a literal without *From).
  bool fixed() const { return !from_ && tmpl_.literal(); }
  const std::string& field() const { return field_; }

 private:
  AddressSpec(std::string field, Template tmpl, std::optional<std::string> from)
      : field_(std::move(field)), tmpl_(std::move(tmpl)), from_(std::move(from)) {}
  std::string field_;
  Template tmpl_;
  std::optional<std::string> from_;
};

// Block-validator checks of an address key and its *From key (relative "key: reason" problems):
// the template's placeholders and the column name. Skips keys absent from the block.
void ValidateAddressKeys(const nlohmann::json& block, std::string_view field,
                         std::string_view from_key, std::vector<std::string>* problems);

// The options of an address key (a required template bound to `tmpl`) and its *From key (one of
// AddressFromColumns(), bound to `from`), e.g. ("topic", "topicFrom", "Kafka topic").
template <typename S>
void AddAddressOptions(OptionTable<S>& table, const std::string& field, const std::string& from_key,
                       const std::string& what, std::string S::*tmpl,
                       std::optional<std::string> S::*from) {
  table.Add(opt::Text(field, tmpl, nullptr,
                      what + ": a literal or a template with {{ topic }}, {{ key }}, "
                             "{{ aggregateType }}, {{ payload.a.b }}, {{ data.a.b }}")
                .Required());
  table.Add(opt::Choice(from_key, from, AddressFromColumns(), nullptr,
                        "Take the " + field +
                            " from this row column (aggregate_type, topic or key); wins over " +
                            field));
}

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// Static headers, then the row's `headers` JSON object; a row header replaces a static header
// of the same name (exact case) in place. kInvalidArgument naming the field ("headers: ...") when
// `row_headers` is not a JSON object of strings (the message can never succeed).
Result<HeaderList> MergeRowHeaders(const std::map<std::string, std::string>& static_headers,
                                   std::string_view row_headers);

// `headers` with the message's trace context (OutboundMessage::trace) in place of any
// traceparent or tracestate (any letter case); unchanged when `trace` is null.
void ApplyTraceHeaders(HeaderList& headers, const TraceHeaders* trace);

// MergeRowHeaders of the message's row, then ApplyTraceHeaders.
Result<HeaderList> MergeMessageHeaders(const std::map<std::string, std::string>& static_headers,
                                       const OutboundMessage& message);

// ---- Rows a destination can never carry (docs/guarantees.md, "Bad rows never stop a batch") ----
// Each check returns kInvalidArgument whose message begins with the field it names; the
// destination reports it as Outcome::Reject, so the row goes dead at once (no attempt loop) and
// the other messages of its batch are published. Messages hold no value longer than 64 bytes.

// The row's `headers` (JSON text; empty counts as {}) as a JSON object of strings.
Result<HeaderList> ParseRowHeaders(std::string_view headers);

// "payload: ..." unless `body` is one JSON document. SQLite has no JSON type, and a schema of
// one's own may hold the payload as text, so a destination checks what it sends.
Status CheckPayloadIsJson(std::string_view body);

// CheckPayloadIsJson of what `message` sends, skipped (Ok) when that is the row's payload and
// its store's column holds only JSON (OutboxRow::payload_is_json).
Status CheckBodyIsJson(const OutboundMessage& message);

// True when `text` is one JSON document, as nlohmann::json::accept(text) decides for text without
// NUL (simdjson first, accept for what it refuses; a NUL byte is refused). Thread-safe.
bool IsJsonDocument(std::string_view text);

// "<field>: ..." when `value` holds CR, LF or NUL, which a header carried as a line of text
// (HTTP, NATS) cannot carry. `field` names it: "key", "topic", "headers: \"X-Name\"".
Status CheckHeaderText(std::string_view field, std::string_view value);

// CheckHeaderText on every name and value of `headers` (field "headers: \"<name>\"").
Status CheckHeaderListText(const HeaderList& headers);

// "headers: ..." unless every name of `headers` can begin a line "name: value" (NATS headers):
// not empty, no ':', no space and no ASCII control character. Such a name is not read back as
// itself: a row header "x-message-id: x" would arrive as a second x-message-id.
Status CheckHeaderNames(const HeaderList& headers);

// "topic: ..." unless `topic` is a legal Kafka topic name: 1 to 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..".
Status CheckKafkaTopic(std::string_view topic);

// "<field>: ..." when `value` is longer than an AMQP 0-9-1 short string (255 bytes): the
// RabbitMQ exchange and routing key.
Status CheckAmqpShortString(std::string_view field, std::string_view value);

// "subject: ..." unless `subject` is a NATS subject one can publish to: tokens separated by '.',
// none empty, no whitespace or control characters, no wildcard token ('*', '>').
Status CheckNatsSubject(std::string_view subject);

// True when `s` is empty or only whitespace (a blank record key means no key, §7.3).
bool IsBlank(std::string_view s);

// A failure reason for last_error: redacted, then cut to max_chars (Outcome::error contract).
std::string FailureReason(std::string_view text, int max_chars);

// A destination factory's result as the registry wants it (DestinationType::create).
template <typename D>
Result<std::unique_ptr<Destination>> AsDestination(Result<std::unique_ptr<D>> made) {
  if (!made.ok()) return made.status();
  return std::unique_ptr<Destination>(std::move(made).value());
}

// Keeps trying to connect a broker destination on a background thread (issue 13 item 4: a
// broker that is down at start does not stop the relay; QueueBox starts, reports the
// destination not ready and keeps retrying). After Kick(), calls `attempt` until it returns OK,
// waiting ReconnectDelayMs(failures, initial_ms, cap_ms) between calls (capped exponential
// backoff with jitter, core/backoff.h); then idles until the next Kick() (a lost connection).
// `attempt` runs on the loop's thread and serialises with the destination's own use of the
// connection. Stop() (and the destructor) ends the loop and joins its thread.
//
// Thread-safety: Kick and Stop may be called from any thread, Kick also from inside `attempt`'s
// callers' locks (it only signals).
class ReconnectLoop {
 public:
  ReconnectLoop(std::string destination, std::function<Status()> attempt, int64_t initial_ms = 250,
                int64_t cap_ms = 30000);
  ~ReconnectLoop();
  ReconnectLoop(const ReconnectLoop&) = delete;
  ReconnectLoop& operator=(const ReconnectLoop&) = delete;

  void Kick();
  void Stop();

 private:
  void Run();

  const std::string destination_;
  const std::function<Status()> attempt_;
  const int64_t initial_ms_, cap_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false;   // guarded by mu_: a Kick not yet served
  bool stopped_ = false;  // guarded by mu_
  std::thread thread_;    // started by the first Kick
};

// JSON value -> string or null when absent/null (for reading factory options).
std::optional<std::string> OptionalString(const nlohmann::json& block, const char* key);

}  // namespace queuebox
