#include "destinations/rabbitmq/rabbitmq_destination.h"

#include <amqp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <set>
#include <thread>
#include <utility>

#include "core/backoff.h"
#include "core/log.h"
#include "destinations/rabbitmq/amqp_connection.h"
#include "destinations/rabbitmq/amqp_extension.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;
constexpr amqp_channel_t kChannel = 1;
const std::vector<std::string> kExchangeTypes = {"topic", "direct", "fanout"};

using amqp::BytesText;
using amqp::ParseAmqpUrl;
using amqp::RpcError;
using amqp::ToTimeval;
using ParsedUrl = amqp::AmqpUrl;

amqp_bytes_t BytesOf(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

amqp_table_entry_t StringEntry(const std::string& key, const std::string& value) {
  amqp_table_entry_t e;
  e.key = BytesOf(key);
  e.value.kind = AMQP_FIELD_KIND_UTF8;
  e.value.value.bytes = BytesOf(value);
  return e;
}

// The AMQP extension of a message; an empty one when it has none.
const AmqpExtension& AmqpOf(const OutboundMessage& message) {
  static const AmqpExtension kNone;
  const auto* amqp = dynamic_cast<const AmqpExtension*>(message.extension);
  return amqp != nullptr ? *amqp : kNone;
}

// The AMQP basic properties a message may set by name (AmqpExtension::properties): the
// short-string ones.
struct PropertySlot {
  std::string_view name;
  amqp_flags_t flag;
  amqp_bytes_t amqp_basic_properties_t::*field;
};
constexpr PropertySlot kStringProperties[] = {
    {"content_type", AMQP_BASIC_CONTENT_TYPE_FLAG, &amqp_basic_properties_t::content_type},
    {"content_encoding", AMQP_BASIC_CONTENT_ENCODING_FLAG,
     &amqp_basic_properties_t::content_encoding},
    {"correlation_id", AMQP_BASIC_CORRELATION_ID_FLAG, &amqp_basic_properties_t::correlation_id},
    {"reply_to", AMQP_BASIC_REPLY_TO_FLAG, &amqp_basic_properties_t::reply_to},
    {"expiration", AMQP_BASIC_EXPIRATION_FLAG, &amqp_basic_properties_t::expiration},
    {"message_id", AMQP_BASIC_MESSAGE_ID_FLAG, &amqp_basic_properties_t::message_id},
    {"type", AMQP_BASIC_TYPE_FLAG, &amqp_basic_properties_t::type},
    {"user_id", AMQP_BASIC_USER_ID_FLAG, &amqp_basic_properties_t::user_id},
    {"app_id", AMQP_BASIC_APP_ID_FLAG, &amqp_basic_properties_t::app_id},
};
constexpr size_t kMaxShortString = 255;  // AMQP 0-9-1 shortstr

const PropertySlot* FindProperty(std::string_view name) {
  for (const PropertySlot& slot : kStringProperties) {
    if (slot.name == name) return &slot;
  }
  return nullptr;
}

// Empty when every requested property is one we can set; else why not.
std::string CheckProperties(const std::map<std::string, std::string>& properties) {
  for (const auto& [name, value] : properties) {
    if (FindProperty(name) == nullptr) return "unknown AMQP property '" + name + "'";
    if (value.size() > kMaxShortString) {
      return "AMQP property '" + name + "' is longer than 255 bytes";
    }
  }
  return {};
}

}  // namespace

// One AMQP connection with its confirm channel. Not thread-safe (the destination's mutex).
class RabbitMqDestination::Connection {
 public:
  ~Connection() {
    if (state_ == nullptr) return;
    if (healthy_) {
      amqp_channel_close(state_, kChannel, AMQP_REPLY_SUCCESS);
      amqp_connection_close(state_, AMQP_REPLY_SUCCESS);
    }
    amqp_destroy_connection(state_);
  }

  Status Open(const ParsedUrl& url, int64_t timeout_ms) {
    Result<amqp_connection_state_t> opened =
        amqp::OpenConnection(url, timeout_ms, /*heartbeat_s=*/0, kChannel);
    if (!opened.ok()) return opened.status();
    state_ = *opened;
    amqp_confirm_select(state_, kChannel);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(state_);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) return Unavailable(RpcError(r, "confirm.select"));
    healthy_ = true;
    return Status::Ok();
  }

  // Declares `exchange` once per connection. A failure closes the channel: the connection is
  // then unusable (healthy_ false).
  Status Declare(const std::string& exchange, const std::string& type) {
    if (exchange.empty() || exchange.starts_with("amq.") || declared_.count(exchange)) {
      return Status::Ok();
    }
    amqp_exchange_declare(state_, kChannel, amqp_cstring_bytes(exchange.c_str()),
                          amqp_cstring_bytes(type.c_str()), /*passive=*/0, /*durable=*/1,
                          /*auto_delete=*/0, /*internal=*/0, amqp_empty_table);
    amqp_rpc_reply_t r = amqp_get_rpc_reply(state_);
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
      healthy_ = false;
      return Unavailable(RpcError(r, "exchange.declare '" + exchange + "'"));
    }
    declared_.insert(exchange);
    return Status::Ok();
  }

  static std::string CloseReason(const amqp_frame_t& frame) { return amqp::CloseReason(frame); }

  amqp_connection_state_t state() { return state_; }
  bool healthy() const { return healthy_; }
  void set_broken() { healthy_ = false; }
  uint64_t NextTag() { return next_tag_++; }

 private:
  amqp_connection_state_t state_ = nullptr;
  bool healthy_ = false;
  uint64_t next_tag_ = 1;  // delivery tags of the confirm channel count from 1
  std::set<std::string> declared_;
};

// ---- option table ------------------------------------------------------------------------------

std::vector<std::string> ValidateRabbitMqBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  if (auto url = OptionalString(block, "url")) {
    Result<ParsedUrl> p = ParseAmqpUrl(*url);
    if (!p.ok()) problems.push_back("url: " + p.status().message());
  }
  ValidateAddressKeys(block, "exchange", "exchangeFrom", &problems);
  return problems;
}

DestinationType RabbitMqDestinationType() {
  using S = RabbitMqDestinationSettings;
  OptionTable<S> options = {
      opt::Secret("url", &S::url,
                  "AMQP URI amqp://user:password@host:port/vhost (amqps:// for TLS); its "
                  "password is never logged")
          .Required(),
  };
  AddAddressOptions(options, "exchange", "exchangeFrom", "RabbitMQ exchange", &S::exchange,
                    &S::exchange_from);
  options.Add(opt::Choice("exchangeType", &S::exchange_type, kExchangeTypes, "topic",
                          "Type of the declared (durable) exchange"));
  options.Add(
      opt::Text("routingKeyTemplate", &S::routing_key_template, "{{ topic }}",
                "Routing key when the route has no routingKeyTemplate (missing field: \"\")"));
  // deliveryMode is an enum in YAML and a bool in the settings.
  OptionSpec delivery_mode{.key = "deliveryMode",
                           .type = OptionType::kEnum,
                           .default_value = "persistent",
                           .enum_values = {"persistent", "transient"},
                           .description = "AMQP delivery_mode 2 (persistent) or 1"};
  options.Add(opt::Custom<S>(
      std::move(delivery_mode),
      [](S& s, const nlohmann::json& v) { s.persistent = v.get<std::string>() != "transient"; },
      [](const S& s) { return nlohmann::json(s.persistent ? "persistent" : "transient"); }));
  return MakeDestinationType<S>(
      "rabbitmq", options, ValidateRabbitMqBlock,
      [](S s, const DestinationConfig& config,
         const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
        s.static_headers = config.headers;
        s.max_error_body_bytes = context.max_error_body_bytes;
        return AsDestination(RabbitMqDestination::Create(std::move(s)));
      });
}

// ---- destination -------------------------------------------------------------------------------

RabbitMqDestination::RabbitMqDestination(RabbitMqDestinationSettings settings, AddressSpec exchange,
                                         Template routing_key)
    : settings_(std::move(settings)),
      exchange_(std::move(exchange)),
      routing_key_(std::move(routing_key)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      reconnect_(settings_.name, [this] { return ConnectAndDeclare(); }) {}

RabbitMqDestination::~RabbitMqDestination() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Result<std::unique_ptr<RabbitMqDestination>> RabbitMqDestination::Create(
    RabbitMqDestinationSettings s) {
  const std::string prefix = "destinations." + s.name + ".";
  Result<ParsedUrl> url = ParseAmqpUrl(s.url);
  if (!url.ok()) return InvalidArgument(prefix + "url: " + url.status().message());
  if (std::find(kExchangeTypes.begin(), kExchangeTypes.end(), s.exchange_type) ==
      kExchangeTypes.end()) {
    return InvalidArgument(prefix + "exchangeType: '" + s.exchange_type +
                           "' is not one of topic, direct, fanout");
  }
  Result<AddressSpec> exchange =
      AddressSpec::Create(s.name, "exchange", s.exchange, "exchangeFrom", s.exchange_from);
  if (!exchange.ok()) return exchange.status();
  Template rk = Template::CompileRoutingKey(s.routing_key_template, "");
  auto d = std::unique_ptr<RabbitMqDestination>(
      new RabbitMqDestination(std::move(s), std::move(exchange).value(), std::move(rk)));
  d->host_ = url->host;
  d->port_ = url->port;
  return d;
}

std::string RabbitMqDestination::Endpoint() const { return host_ + ":" + std::to_string(port_); }

void RabbitMqDestination::Drop(const std::string& reason) {
  FailInFlight(reason, true);
  conn_.reset();
  connected_ = false;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    last_error_ = FailureReason(reason, settings_.max_error_body_bytes);
  }
  // Reconnect in the background too, so readiness recovers without waiting for traffic.
  if (started_) reconnect_.Kick();
}

Status RabbitMqDestination::EnsureConnected(bool ignore_backoff) {
  if (conn_ && conn_->healthy()) return Status::Ok();
  FailInFlight("RabbitMQ connection lost", true);  // none: a connection breaks through Drop
  conn_.reset();
  if (!ignore_backoff && Clock::now() < next_connect_) {
    std::lock_guard<std::mutex> lock(error_mu_);
    return Unavailable("RabbitMQ at " + Endpoint() + " unavailable (reconnecting): " + last_error_);
  }
  Result<ParsedUrl> url = ParseAmqpUrl(settings_.url);
  if (!url.ok()) return url.status();
  auto conn = std::make_unique<Connection>();
  Status s = conn->Open(*url, settings_.connect_timeout_ms);
  if (!s.ok()) {
    ++failures_;
    next_connect_ = Clock::now() + std::chrono::milliseconds(ReconnectDelayMs(failures_));
    std::string reason = "cannot connect to RabbitMQ at " + Endpoint() + ": " + s.message();
    Drop(reason);
    return Unavailable(FailureReason(reason, settings_.max_error_body_bytes));
  }
  if (failures_ > 0) {
    log::Info("RabbitMQ connection restored",
              {{"destination", settings_.name}, {"endpoint", Endpoint()}});
  }
  failures_ = 0;
  conn_ = std::move(conn);
  connected_ = true;
  return Status::Ok();
}

Status RabbitMqDestination::ConnectAndDeclare() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ && conn_->healthy()) return Status::Ok();
  Status s = EnsureConnected(/*ignore_backoff=*/true);
  if (s.ok() && exchange_.fixed()) {
    OutboxRow none;
    std::string exchange = exchange_.Render(none, TemplateContext::ForRow(none));
    s = conn_->Declare(exchange, settings_.exchange_type);
    if (!s.ok()) {
      Drop(s.message());
      return FailedPrecondition(FailureReason(s.message(), settings_.max_error_body_bytes));
    }
  }
  return s;
}

Status RabbitMqDestination::Start() {
  started_ = true;
  Status s = ConnectAndDeclare();
  if (s.ok()) return s;
  if (s.code() == StatusCode::kFailedPrecondition) {
    // The broker answered and refused the exchange: a configuration problem, not an outage.
    return Unavailable("destinations." + settings_.name + ": " + s.message());
  }
  // The broker is not reachable: start anyway, not ready, and keep trying in the background.
  reconnect_.Kick();
  return Status::Ok();
}

// One PublishBatch call: what pass 1 prepared for each message, the outcomes decided so far, and
// which delivery tag stands for which message while the confirms are read.
struct RabbitMqDestination::Batch {
  struct Prepared {
    std::string exchange, routing_key, message_id;
    HeaderList headers;
  };

  Batch(std::span<const OutboundMessage> batch, int max_error_chars)
      : messages(batch),
        prepared(batch.size()),
        outcomes(batch.size()),
        max_chars(max_error_chars) {}

  // A retryable failure, unless the message already has its outcome.
  void Fail(size_t i, const std::string& reason) {
    if (!outcomes[i]) outcomes[i] = Outcome::Retry(FailureReason(reason, max_chars));
  }
  void FailAll(const std::string& reason) {
    for (size_t i = 0; i < messages.size(); ++i) Fail(i, reason);
  }
  // The broker is out (not connected, the connection lost or closed, no confirm in time): the
  // destination's fault, not the message's (Outcome::kUnavailable).
  void FailOutage(size_t i, const std::string& reason) {
    if (!outcomes[i]) outcomes[i] = Outcome::Unavailable(FailureReason(reason, max_chars));
  }
  void FailAllOutage(const std::string& reason) {
    for (size_t i = 0; i < messages.size(); ++i) FailOutage(i, reason);
  }
  // EnsureConnected failed: a broker that cannot be reached is out; a bad URL is the
  // configuration's fault.
  void FailNotConnected(const Status& s) {
    if (s.code() == StatusCode::kUnavailable) {
      FailAllOutage(s.message());
    } else {
      FailAll(s.message());
    }
  }
  bool AnyUndecided() const {
    return std::any_of(outcomes.begin(), outcomes.end(), [](const auto& o) { return !o; });
  }
  // A lost claim (docs/guarantees.md §3): every open message whose cancel flag is set is
  // cancelled. True when nothing is left to publish.
  bool CancelLost() {
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!outcomes[i] && messages[i].cancel_requested()) outcomes[i] = Outcome::Cancelled();
    }
    return !AnyUndecided();
  }
  // The confirm (ack or nack) of one delivery tag decides its message.
  void Settle(uint64_t tag, bool ack) {
    auto it = pending.find(tag);
    if (it == pending.end()) return;
    const size_t i = it->second;
    auto ret = returned.find(tag);
    if (!ack) {
      Fail(i, "RabbitMQ nacked the message (exchange '" + prepared[i].exchange + "')");
    } else if (ret != returned.end()) {
      Fail(i, ret->second);
    } else {
      outcomes[i] = Outcome::Delivered();
    }
    pending.erase(it);
  }
  void Report(OutcomeSink& sink) {
    for (size_t i = 0; i < messages.size(); ++i) {
      sink.Report(i, outcomes[i] ? std::move(*outcomes[i])
                                 : Outcome::Retry("RabbitMQ publish was not attempted"));
    }
  }

  std::span<const OutboundMessage> messages;
  std::vector<Prepared> prepared;
  std::vector<std::optional<Outcome>> outcomes;
  int max_chars;
  std::map<uint64_t, size_t> pending;        // delivery tag -> index, until its confirm
  std::map<uint64_t, std::string> returned;  // tag -> reason of its basic.return
  std::string broken;  // why the connection became unusable during the batch; empty while usable
  bool broken_by_outage = true;  // false: a channel the broker closed over a message
};

void RabbitMqDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  Batch b(batch, settings_.max_error_body_bytes);
  Prepare(b);
  if (!TakeChannel(b)) {
    b.Report(sink);
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);  // a reconnect, a reader or Stop() holds it, bounded
  b.CancelLost();  // lost while waiting: not connected for, nor counted as an outage
  ReadFrames();    // confirms of the batches in flight, or a close sent while idle
  if (DeclareExchanges(b)) Publish(b);
  ReadFrames();  // what the declares queued or the publishes read: nothing stays buffered
  const bool awaiting = b.broken.empty() && !b.pending.empty();
  ReleaseChannel(awaiting);  // the next batch publishes while this one awaits its confirms
  if (awaiting) AwaitConfirms(b, lock);
  Finish(b);
  lock.unlock();
  if (awaiting) DoneAwaiting();
  b.Report(sink);
}

bool RabbitMqDestination::TakeChannel(Batch& b) {
  // Another batch may publish, or declare an exchange (an RPC of up to connectTimeoutMs): the
  // wait wakes when the channel is released, and every 20 ms to see lost claims. A condition
  // variable, not timed_mutex::try_lock_for: ThreadSanitizer (g++ 12) does not see
  // pthread_mutex_clocklock.
  const int window = settings_.max_batches_awaiting_confirms;
  std::unique_lock<std::mutex> lock(channel_mu_);
  while (channel_taken_ || (window > 0 && awaiting_ >= window)) {
    channel_waits_.fetch_add(1);
    if (b.CancelLost()) return false;  // nothing left to publish
    channel_free_.wait_for(lock, std::chrono::milliseconds(20));
  }
  channel_taken_ = true;
  return true;
}

void RabbitMqDestination::ReleaseChannel(bool awaiting) {
  {
    std::lock_guard<std::mutex> lock(channel_mu_);
    channel_taken_ = false;
    if (awaiting) ++awaiting_;
  }
  channel_free_.notify_all();
}

void RabbitMqDestination::DoneAwaiting() {
  {
    std::lock_guard<std::mutex> lock(channel_mu_);
    --awaiting_;
  }
  channel_free_.notify_all();
}

HeaderList RabbitMqStringHeaders(const std::string& topic, HeaderList merged,
                                 const std::map<std::string, int64_t>& integer_headers) {
  HeaderList out = {{"x-topic", topic}};
  for (auto& header : merged) {  // not a structured binding: clang 14 cannot capture one
    auto same = std::find_if(out.begin(), out.end(),
                             [&](const auto& h) { return h.first == header.first; });
    if (same != out.end()) {
      same->second = std::move(header.second);
    } else {
      out.emplace_back(std::move(header.first), std::move(header.second));
    }
  }
  // Integer headers replace string headers of the same name.
  std::erase_if(out, [&](const auto& h) { return integer_headers.count(h.first) > 0; });
  return out;
}

std::vector<amqp_table_entry_t> RabbitMqHeaderEntries(
    const HeaderList& headers, int32_t attempt,
    const std::map<std::string, int64_t>& integer_headers) {
  std::vector<amqp_table_entry_t> entries;
  entries.reserve(headers.size() + 1 + integer_headers.size());
  for (const auto& [k, v] : headers) {
    entries.push_back(StringEntry(k, v));
    if (k == "x-topic") {
      // x-attempt (integer) right after x-topic, unless another header replaced it.
      bool replaced = integer_headers.count("x-attempt") > 0 ||
                      std::any_of(headers.begin(), headers.end(),
                                  [](const auto& h) { return h.first == "x-attempt"; });
      if (!replaced) {
        amqp_table_entry_t e;
        e.key = amqp_cstring_bytes("x-attempt");
        e.value.kind = AMQP_FIELD_KIND_I32;
        e.value.value.i32 = attempt;
        entries.push_back(e);
      }
    }
  }
  for (const auto& [k, v] : integer_headers) {
    amqp_table_entry_t e;
    e.key = BytesOf(k);
    e.value.kind = AMQP_FIELD_KIND_I64;
    e.value.value.i64 = v;
    entries.push_back(e);
  }
  return entries;
}

void RabbitMqDestination::Prepare(Batch& b) const {
  for (size_t i = 0; i < b.messages.size(); ++i) {
    const OutboundMessage& message = b.messages[i];
    const OutboxRow& row = *message.row;
    TemplateContext ctx = TemplateContext::ForRow(row);
    Batch::Prepared& p = b.prepared[i];
    p.exchange = exchange_.Render(row, ctx);
    if (p.exchange.empty()) {
      b.Fail(i, "RabbitMQ destination '" + settings_.name + "' rendered an empty exchange");
      continue;
    }
    Result<HeaderList> headers = MergeMessageHeaders(settings_.static_headers, message);
    Status sendable =
        headers.ok() ? CheckAmqpShortString("exchange", p.exchange) : headers.status();
    if (sendable.ok()) sendable = CheckBodyIsJson(message);
    for (size_t h = 0; sendable.ok() && h < headers->size(); ++h) {  // table keys are short strings
      sendable = CheckAmqpShortString("headers: a name", (*headers)[h].first);
    }
    if (!sendable.ok()) {  // a message RabbitMQ can never take: dead at once, the batch goes on
      b.outcomes[i] = Outcome::Reject(FailureReason(sendable.message(), b.max_chars));
      continue;
    }
    const AmqpExtension& amqp = AmqpOf(message);
    std::string bad_property = CheckProperties(amqp.properties);
    if (!bad_property.empty()) {
      b.outcomes[i] = Outcome::Reject(FailureReason(bad_property, b.max_chars));
      continue;
    }
    p.headers = RabbitMqStringHeaders(row.topic, std::move(*headers), amqp.integer_headers);
    auto message_id = amqp.properties.find("message_id");
    p.message_id = message_id != amqp.properties.end() ? message_id->second : row.id;
    p.routing_key = message.routing_key ? *message.routing_key : routing_key_.Render(ctx);
    if (Status key = CheckAmqpShortString("routing key", p.routing_key); !key.ok()) {
      b.outcomes[i] = Outcome::Reject(FailureReason(key.message(), b.max_chars));
    }
  }
}

bool RabbitMqDestination::DeclareExchanges(Batch& b) {
  std::map<std::string, std::string> bad_exchanges;  // exchange -> why its declare failed
  for (size_t i = 0; i < b.messages.size(); ++i) {
    if (b.outcomes[i]) continue;
    const std::string& ex = b.prepared[i].exchange;
    if (bad_exchanges.count(ex)) continue;
    Status s = EnsureConnected(/*ignore_backoff=*/!bad_exchanges.empty());
    if (!s.ok()) {
      b.FailNotConnected(s);
      return false;
    }
    s = conn_->Declare(ex, settings_.exchange_type);
    if (!s.ok()) {
      bad_exchanges[ex] = s.message();
      Drop(s.message());
    }
  }
  for (size_t i = 0; i < b.messages.size(); ++i) {
    auto bad = bad_exchanges.find(b.prepared[i].exchange);
    if (bad != bad_exchanges.end()) b.Fail(i, bad->second);
  }
  if (!b.AnyUndecided()) return false;
  Status s = EnsureConnected(/*ignore_backoff=*/!bad_exchanges.empty());
  if (!s.ok()) {
    b.FailNotConnected(s);
    return false;
  }
  return true;
}

void RabbitMqDestination::Publish(Batch& b) {
  amqp_connection_state_t state = conn_->state();
  if (!in_flight_.empty()) overlapped_publishes_.fetch_add(1);
  for (size_t i = 0; i < b.messages.size(); ++i) {
    if (b.outcomes[i]) continue;
    const OutboundMessage& message = b.messages[i];
    // Lost while this batch waited for the channel (another batch's confirms) or earlier
    // messages were written: never published.
    if (message.cancel_requested()) {
      b.outcomes[i] = Outcome::Cancelled();
      continue;
    }
    const OutboxRow& row = *message.row;
    const Batch::Prepared& p = b.prepared[i];
    const AmqpExtension& amqp = AmqpOf(message);
    std::vector<amqp_table_entry_t> entries =
        RabbitMqHeaderEntries(p.headers, row.attempt, amqp.integer_headers);
    amqp_basic_properties_t props;
    std::memset(&props, 0, sizeof props);
    props._flags = AMQP_BASIC_CONTENT_TYPE_FLAG | AMQP_BASIC_DELIVERY_MODE_FLAG |
                   AMQP_BASIC_MESSAGE_ID_FLAG | AMQP_BASIC_HEADERS_FLAG;
    props.content_type = amqp_cstring_bytes("application/json");
    props.delivery_mode = settings_.persistent ? 2 : 1;
    props.message_id = BytesOf(p.message_id);
    for (const auto& [name, value] : amqp.properties) {
      const PropertySlot* slot = FindProperty(name);  // checked by Prepare
      props._flags |= slot->flag;
      props.*(slot->field) = BytesOf(value);
    }
    props.headers.num_entries = static_cast<int>(entries.size());
    props.headers.entries = entries.data();
    const std::string_view payload = message.body();
    amqp_bytes_t body{payload.size(), const_cast<char*>(payload.data())};
    int rc = amqp_basic_publish(state, kChannel, amqp_cstring_bytes(p.exchange.c_str()),
                                amqp_cstring_bytes(p.routing_key.c_str()), /*mandatory=*/1,
                                /*immediate=*/0, &props, body);
    if (rc != AMQP_STATUS_OK) {
      BreakInFlight(&b, std::string("RabbitMQ publish failed: ") + amqp_error_string2(rc), true);
      return;
    }
    const uint64_t tag = conn_->NextTag();
    b.pending[tag] = i;
    in_flight_.emplace(tag, std::make_pair(&b, i));
    tags_by_id_[p.message_id].push_back(tag);
  }
}

void RabbitMqDestination::AwaitConfirms(Batch& b, std::unique_lock<std::mutex>& lock) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(settings_.confirm_timeout_ms);
  while (b.broken.empty() && !b.pending.empty()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      BreakInFlight(&b,
                    "no RabbitMQ publisher confirm within " +
                        std::to_string(settings_.confirm_timeout_ms) + "ms",
                    true);
      return;
    }
    if (reading_) {  // another batch waits on the socket and reads for this one too
      confirms_.wait_for(lock, left);
      continue;
    }
    // This batch waits on the socket for every batch in flight, without the mutex, so others
    // publish meanwhile. ReadFrames left nothing buffered, so the socket shows every new frame;
    // a ReadFrames under the mutex meanwhile writes wake_fd_. The wait is capped: a dropped
    // connection closes the socket under it, which poll() does not report.
    reading_ = true;
    pollfd fds[2] = {{amqp_get_sockfd(conn_->state()), POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    lock.unlock();
    ::poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 50)));
    lock.lock();
    reading_ = false;
    if ((fds[1].revents & POLLIN) != 0) {
      uint64_t n;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_, &n, sizeof n);
    }
    ReadFrames();            // a connection opened meanwhile is read like any other
    confirms_.notify_all();  // whoever waits next reads
  }
}

void RabbitMqDestination::ReadFrames() {
  bool read = false;
  while (conn_) {
    amqp_frame_t frame;
    timeval zero = ToTimeval(0);
    const int rc = amqp_simple_wait_frame_noblock(conn_->state(), &frame, &zero);
    if (rc == AMQP_STATUS_TIMEOUT) break;
    read = true;
    if (rc != AMQP_STATUS_OK) {
      BreakInFlight(nullptr, std::string("RabbitMQ connection lost: ") + amqp_error_string2(rc),
                    true);
      break;
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_ACK_METHOD:
      case AMQP_BASIC_NACK_METHOD:
        OnConfirm(frame);
        break;
      case AMQP_BASIC_RETURN_METHOD:
        OnReturn(frame);
        break;
      case AMQP_CONNECTION_CLOSE_METHOD:
      case AMQP_CHANNEL_CLOSE_METHOD:
        BreakInFlight(nullptr, "RabbitMQ " + Connection::CloseReason(frame),
                      frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD);
        break;
      default:
        break;
    }
  }
  if (!read) return;
  if (conn_) amqp_maybe_release_buffers(conn_->state());
  if (reading_) {  // the reader's socket may show nothing now: wake it
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(wake_fd_, &one, sizeof one);
  }
  confirms_.notify_all();
}

void RabbitMqDestination::OnConfirm(const amqp_frame_t& frame) {
  const bool ack = frame.payload.method.id == AMQP_BASIC_ACK_METHOD;
  uint64_t tag;
  bool multiple;
  if (ack) {
    const auto* m = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
    tag = m->delivery_tag;
    multiple = m->multiple != 0;
  } else {
    const auto* m = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
    tag = m->delivery_tag;
    multiple = m->multiple != 0;
  }
  auto it = multiple ? in_flight_.begin() : in_flight_.find(tag);
  if (it == in_flight_.end()) return;
  const auto end = multiple ? in_flight_.upper_bound(tag) : std::next(it);
  while (it != end) {
    auto [batch, i] = it->second;
    batch->Settle(it->first, ack);
    auto ids = tags_by_id_.find(batch->prepared[i].message_id);
    if (ids != tags_by_id_.end()) {
      std::erase(ids->second, it->first);
      if (ids->second.empty()) tags_by_id_.erase(ids);
    }
    it = in_flight_.erase(it);
  }
}

void RabbitMqDestination::OnReturn(const amqp_frame_t& frame) {
  const auto* m = static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
  const std::string reason = "unroutable: RabbitMQ returned the message (" +
                             std::to_string(m->reply_code) + " " + BytesText(m->reply_text) +
                             ", exchange '" + BytesText(m->exchange) + "', routing key '" +
                             BytesText(m->routing_key) + "')";
  amqp_message_t msg;
  amqp_rpc_reply_t r = amqp_read_message(conn_->state(), frame.channel, &msg, 0);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    BreakInFlight(nullptr, RpcError(r, "RabbitMQ read of a returned message"), true);
    return;
  }
  const std::string id = (msg.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                             ? BytesText(msg.properties.message_id)
                             : std::string();
  amqp_destroy_message(&msg);
  // The return precedes the ack of its message: mark the earliest open tag of this id.
  auto tags = tags_by_id_.find(id);
  if (tags == tags_by_id_.end()) return;
  for (uint64_t t : tags->second) {
    Batch& owner = *in_flight_.at(t).first;
    if (owner.returned.emplace(t, reason).second) return;
  }
}

void RabbitMqDestination::FailInFlight(const std::string& reason, bool by_outage) {
  for (auto& [tag, owner] : in_flight_) {
    Batch& b = *owner.first;
    if (b.broken.empty()) {
      b.broken = reason;
      b.broken_by_outage = by_outage;
    }
  }
  in_flight_.clear();
  tags_by_id_.clear();
  confirms_.notify_all();
}

void RabbitMqDestination::BreakInFlight(Batch* current, const std::string& reason, bool by_outage) {
  if (current != nullptr && current->broken.empty()) {
    current->broken = reason;
    current->broken_by_outage = by_outage;
  }
  FailInFlight(reason, by_outage);
  log::Warn("RabbitMQ connection dropped",
            {{"destination", settings_.name},
             {"error", FailureReason(reason, settings_.max_error_body_bytes)}});
  Drop(reason);
}

void RabbitMqDestination::Finish(Batch& b) {
  if (b.broken.empty()) return;
  if (b.broken_by_outage) {
    for (const auto& [tag, i] : b.pending) b.FailOutage(i, b.broken);
    b.FailAllOutage(b.broken);
  } else {
    for (const auto& [tag, i] : b.pending) b.Fail(i, b.broken);
    b.FailAll(b.broken);
  }
}

Status RabbitMqDestination::Health() {
  if (connected_) return Status::Ok();
  std::lock_guard<std::mutex> lock(error_mu_);
  return Unavailable("RabbitMQ destination '" + settings_.name + "' is not connected" +
                     (last_error_.empty() ? std::string() : ": " + last_error_));
}

void RabbitMqDestination::Stop() {
  reconnect_.Stop();
  std::lock_guard<std::mutex> lock(mu_);
  FailInFlight("RabbitMQ destination '" + settings_.name + "' stopped", true);
  conn_.reset();
  connected_ = false;
}

}  // namespace queuebox
