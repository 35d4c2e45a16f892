// rabbitmq_source.cc: one consumer thread per source over rabbitmq-c. It takes up to
// prefetchCount ready deliveries (waiting at most kBatchWaitMs after the first), stores them with
// one InboxIntake::Store, then acks them with one basic.ack(multiple); a failed store is one
// basic.nack(multiple, requeue) and a backoff, so nothing is acked that was not stored.
#include "sources/rabbitmq/rabbitmq_source.h"

#include <amqp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"
#include "destinations/rabbitmq/amqp_connection.h"
#include "sources/broker_intake.h"
#include "sources/rabbitmq/amqp_headers.h"

namespace queuebox::sources {
namespace {

using Clock = std::chrono::steady_clock;
constexpr amqp_channel_t kChannel = 1;
constexpr int64_t kConnectTimeoutMs = 5000;  // socket, handshake and RPC timeout
constexpr int kHeartbeatSeconds = 30;        // finds a half-open connection of an idle consumer
constexpr int64_t kPollMs = 200;             // longest wait for a first delivery (Stop latency)
constexpr int64_t kBatchWaitMs = 5;          // longest wait for more deliveries after the first
constexpr int64_t kReconnectInitialMs = 250, kReconnectCapMs = 30000;
constexpr int64_t kStoreRetryInitialMs = 100, kStoreRetryCapMs = 30000;

struct Delivery {
  uint64_t tag = 0;
  BrokerMessage message;
};

class RabbitmqSource final : public BrokerSource {
 public:
  RabbitmqSource(RabbitmqSourceSettings settings, amqp::AmqpUrl url, BrokerIntake intake,
                 const BrokerSourceContext& context)
      : settings_(std::move(settings)),
        url_(std::move(url)),
        intake_(std::move(intake)),
        context_(context) {}
  ~RabbitmqSource() override { Stop(); }

  Status Start() override;
  void Stop() override;
  std::string component() const override { return "rabbitmq." + settings_.name; }
  bool healthy() const override { return healthy_.load(); }

 private:
  enum class Next { kDelivery, kNothing, kBroken };

  void Run();
  Status Connect();
  void Disconnect();
  // Fetches, stores and acknowledges one batch. Not OK when the connection broke.
  Status ConsumeBatch();
  // One delivery into `out` within `wait_ms`; kBroken with `why` set when the connection broke.
  Next Receive(int64_t wait_ms, Delivery* out, std::string* why);
  // Sleeps `ms` unless Stop() comes first; false when stopping.
  bool Wait(int64_t ms);
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }
  std::string Endpoint() const { return url_.host + ":" + std::to_string(url_.port); }
  std::string Reason(std::string_view text) const {
    return SanitizeError(text, static_cast<size_t>(context_.max_error_body_bytes));
  }
  void NoteOutage(const Status& why);

  const RabbitmqSourceSettings settings_;
  const amqp::AmqpUrl url_;
  const BrokerIntake intake_;
  const BrokerSourceContext context_;

  amqp_connection_state_t conn_ = nullptr;  // the consumer thread's (and Start's before it)
  int failures_ = 0;                        // connection attempts failed in a row
  bool outage_logged_ = false;              // one WARN per outage
  int store_failures_ = 0;                  // stores failed in a row
  std::atomic<bool> healthy_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;
};

Status RabbitmqSource::Start() {
  if (thread_.joinable()) return Status::Ok();
  Status s = Connect();
  if (!s.ok() && s.code() == StatusCode::kFailedPrecondition) {
    // The broker answered and refused the queue: a configuration problem, not an outage.
    return FailedPrecondition("sources." + settings_.name + ".queueName: " + Reason(s.message()));
  }
  if (!s.ok()) NoteOutage(s);  // the broker is away: start anyway, unhealthy, and keep trying
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void RabbitmqSource::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  Disconnect();  // Start may have connected without a thread (a refused Start)
}

bool RabbitmqSource::Wait(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  return !stopping_;
}

void RabbitmqSource::NoteOutage(const Status& why) {
  ++failures_;
  healthy_ = false;
  if (outage_logged_) {
    log::Debug("RabbitMQ source still cannot consume; retrying",
               {{"source", settings_.name}, {"error", Reason(why.message())}});
    return;
  }
  outage_logged_ = true;
  log::Warn("RabbitMQ source cannot consume; reconnecting with backoff",
            {{"source", settings_.name},
             {"endpoint", Endpoint()},
             {"queue", settings_.queue_name},
             {"error", Reason(why.message())}});
}

Status RabbitmqSource::Connect() {
  Result<amqp_connection_state_t> opened =
      amqp::OpenConnection(url_, kConnectTimeoutMs, kHeartbeatSeconds, kChannel);
  if (!opened.ok()) {
    return Unavailable("cannot connect to RabbitMQ at " + Endpoint() + ": " +
                       opened.status().message());
  }
  conn_ = *opened;
  const amqp_bytes_t queue = amqp_cstring_bytes(settings_.queue_name.c_str());
  // declareQueue false: a passive declare, so a typo fails instead of creating a queue.
  amqp_queue_declare(conn_, kChannel, queue, /*passive=*/settings_.declare_queue ? 0 : 1,
                     /*durable=*/1, /*exclusive=*/0, /*auto_delete=*/0, amqp_empty_table);
  amqp_rpc_reply_t r = amqp_get_rpc_reply(conn_);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    Status s;
    if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION && r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
      auto* close = static_cast<amqp_channel_close_t*>(r.reply.decoded);
      if (close->reply_code == AMQP_NOT_FOUND) {
        s = FailedPrecondition("queue '" + settings_.queue_name + "' does not exist in vhost '" +
                               url_.vhost +
                               "'; create it, or set declareQueue: true to declare it");
      } else {
        s = FailedPrecondition(amqp::RpcError(r, "queue.declare '" + settings_.queue_name + "'"));
      }
      amqp_channel_close_ok_t ok{};
      amqp_send_method(conn_, kChannel, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok);
    } else {
      s = Unavailable(amqp::RpcError(r, "queue.declare '" + settings_.queue_name + "'"));
    }
    Disconnect();
    return s;
  }
  amqp_basic_qos(conn_, kChannel, 0, static_cast<uint16_t>(settings_.prefetch_count), 0);
  r = amqp_get_rpc_reply(conn_);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) {
    amqp_basic_consume(conn_, kChannel, queue, amqp_empty_bytes, /*no_local=*/0, /*no_ack=*/0,
                       /*exclusive=*/0, amqp_empty_table);
    r = amqp_get_rpc_reply(conn_);
  }
  if (r.reply_type != AMQP_RESPONSE_NORMAL) {
    Status s = Unavailable(amqp::RpcError(r, "basic.qos/basic.consume"));
    Disconnect();
    return s;
  }
  if (failures_ > 0) {
    log::Info("RabbitMQ source connected again",
              {{"source", settings_.name}, {"endpoint", Endpoint()}});
  }
  failures_ = 0;
  outage_logged_ = false;
  healthy_ = true;
  return Status::Ok();
}

void RabbitmqSource::Disconnect() {
  healthy_ = false;
  if (conn_ == nullptr) return;
  // Closing returns the unacknowledged deliveries to the queue; a dead socket just fails fast.
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn_);
  conn_ = nullptr;
}

void RabbitmqSource::Run() {
  while (!stopping()) {
    if (conn_ == nullptr) {
      if (!Wait(
              ReconnectDelayMs(std::max(failures_ - 1, 0), kReconnectInitialMs, kReconnectCapMs))) {
        break;
      }
      Status s = Connect();
      if (!s.ok()) NoteOutage(s);
      continue;
    }
    Status s = ConsumeBatch();
    if (!s.ok()) {
      // A socket error leaves nothing to close politely: drop the state at once.
      amqp_destroy_connection(conn_);
      conn_ = nullptr;
      NoteOutage(s);
    }
  }
  Disconnect();
}

RabbitmqSource::Next RabbitmqSource::Receive(int64_t wait_ms, Delivery* out, std::string* why) {
  timeval tv = amqp::ToTimeval(wait_ms);
  amqp_envelope_t env;
  amqp_rpc_reply_t r = amqp_consume_message(conn_, &env, &tv, 0);
  if (r.reply_type == AMQP_RESPONSE_NORMAL) {
    out->tag = env.delivery_tag;
    const amqp_bytes_t& body = env.message.body;
    out->message = RabbitMqBrokerMessage(
        env.message.properties,
        body.len == 0 ? std::string_view()
                      : std::string_view(static_cast<const char*>(body.bytes), body.len));
    amqp_destroy_envelope(&env);
    return Next::kDelivery;
  }
  if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) {
    return Next::kNothing;
  }
  if (r.reply_type != AMQP_RESPONSE_LIBRARY_EXCEPTION ||
      r.library_error != AMQP_STATUS_UNEXPECTED_STATE) {
    *why = amqp::RpcError(r, "RabbitMQ consume");
    return Next::kBroken;
  }
  // A frame other than a delivery is waiting: a close, a cancel, or something to skip.
  amqp_frame_t frame;
  timeval zero = amqp::ToTimeval(0);
  int rc = amqp_simple_wait_frame_noblock(conn_, &frame, &zero);
  if (rc == AMQP_STATUS_TIMEOUT) return Next::kNothing;
  if (rc != AMQP_STATUS_OK) {
    *why = std::string("RabbitMQ connection lost: ") + amqp_error_string2(rc);
    return Next::kBroken;
  }
  if (frame.frame_type != AMQP_FRAME_METHOD) return Next::kNothing;
  switch (frame.payload.method.id) {
    case AMQP_CHANNEL_CLOSE_METHOD:
    case AMQP_CONNECTION_CLOSE_METHOD:
      *why = "RabbitMQ " + amqp::CloseReason(frame);
      return Next::kBroken;
    case AMQP_BASIC_CANCEL_METHOD:  // the queue was deleted
      *why = "RabbitMQ cancelled the consumer of queue '" + settings_.queue_name +
             "' (the queue was deleted?)";
      return Next::kBroken;
    default:
      return Next::kNothing;
  }
}

Status RabbitmqSource::ConsumeBatch() {
  amqp_maybe_release_buffers(conn_);
  std::vector<Delivery> batch;
  std::string why;
  Delivery d;
  switch (Receive(kPollMs, &d, &why)) {
    case Next::kBroken:
      return Unavailable(why);
    case Next::kNothing:
      return Status::Ok();
    case Next::kDelivery:
      batch.push_back(std::move(d));
      break;
  }
  // Whatever else is ready (or arrives within kBatchWaitMs) joins the batch.
  const auto deadline = Clock::now() + std::chrono::milliseconds(kBatchWaitMs);
  bool broken = false;
  while (batch.size() < static_cast<size_t>(settings_.prefetch_count)) {
    int64_t left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    Next next = Receive(std::max<int64_t>(left, 0), &d, &why);
    if (next == Next::kBroken) {
      broken = true;  // what we hold is redelivered: store nothing, ack nothing
      break;
    }
    if (next == Next::kDelivery) {
      batch.push_back(std::move(d));
    } else if (left <= 0) {
      break;
    }
  }
  if (broken) return Unavailable(why);

  std::vector<NewInboxMessage> rows;
  rows.reserve(batch.size());
  int64_t filtered = 0;
  for (Delivery& delivery : batch) {
    std::optional<NewInboxMessage> row = intake_.Receive(std::move(delivery.message));
    if (row) {
      rows.push_back(std::move(*row));
    } else {
      ++filtered;
    }
  }
  const uint64_t last_tag = batch.back().tag;
  std::vector<InboxStoreOutcome> outcomes;
  if (!rows.empty()) {
    Result<std::vector<InboxStoreOutcome>> stored = context_.intake->Store(rows);
    if (!stored.ok()) {
      // Nothing was stored: give the batch back to the broker and wait before the next one.
      ++store_failures_;
      if (store_failures_ == 1) {
        log::Warn("RabbitMQ source could not store a batch; the broker redelivers it",
                  {{"source", settings_.name},
                   {"messages", std::to_string(batch.size())},
                   {"error", Reason(stored.status().message())}});
      }
      int rc = amqp_basic_nack(conn_, kChannel, last_tag, /*multiple=*/1, /*requeue=*/1);
      if (rc != AMQP_STATUS_OK) {
        return Unavailable(std::string("RabbitMQ basic.nack failed: ") + amqp_error_string2(rc));
      }
      Wait(ReconnectDelayMs(store_failures_ - 1, kStoreRetryInitialMs, kStoreRetryCapMs));
      return Status::Ok();
    }
    outcomes = std::move(stored).value();
  }
  if (store_failures_ > 0) {
    log::Info("RabbitMQ source stores again", {{"source", settings_.name}});
    store_failures_ = 0;
  }
  // Stored, duplicate, rejected and filtered deliveries are all done with.
  int rc = amqp_basic_ack(conn_, kChannel, last_tag, /*multiple=*/1);
  intake_.Count(context_.observer, outcomes, filtered);
  if (rc != AMQP_STATUS_OK) {
    // The rows are stored; the redelivery after the reconnect is a duplicate.
    return Unavailable(std::string("RabbitMQ basic.ack failed: ") + amqp_error_string2(rc));
  }
  return Status::Ok();
}

}  // namespace

BrokerMessage RabbitMqBrokerMessage(const amqp_basic_properties_t& p, std::string_view body) {
  BrokerMessage m;
  m.body = std::string(body);
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) m.headers = AmqpHeaderStrings(p.headers);
  // The idempotency key's fallback: text the store takes, as a Kafka record key.
  if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
    m.message_id = HeaderText(amqp::BytesText(p.message_id));
  if (p._flags & AMQP_BASIC_CORRELATION_ID_FLAG) {
    m.correlation_property = amqp::BytesText(p.correlation_id);
  }
  // The AMQP timestamp is in seconds.
  if ((p._flags & AMQP_BASIC_TIMESTAMP_FLAG) &&
      p.timestamp <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1000)) {
    m.broker_time_ms = static_cast<int64_t>(p.timestamp) * 1000;
  }
  return m;
}

Result<std::unique_ptr<BrokerSource>> CreateRabbitmqSource(RabbitmqSourceSettings settings,
                                                           const BrokerSourceContext& context) {
  const std::string prefix = "sources." + settings.name + ".";
  if (context.intake == nullptr) return InvalidArgument(prefix + "type: the inbox is required");
  Result<amqp::AmqpUrl> url = amqp::ParseAmqpUrl(settings.connection_url);
  if (!url.ok()) return InvalidArgument(prefix + "connectionUrl: " + url.status().message());
  if (settings.queue_name.empty() || settings.queue_name.size() > 255) {
    return InvalidArgument(prefix + "queueName: a queue name of 1 to 255 bytes is required");
  }
  if (settings.prefetch_count < 1 || settings.prefetch_count > 65535) {
    return InvalidArgument(prefix + "prefetchCount: must be between 1 and 65535, got " +
                           std::to_string(settings.prefetch_count));
  }
  Result<BrokerIntake> intake = BrokerIntake::Create("rabbitmq", settings.name, settings.broker,
                                                     context.transforms, context.observer);
  if (!intake.ok()) return intake.status();
  return std::unique_ptr<BrokerSource>(new RabbitmqSource(
      std::move(settings), std::move(url).value(), std::move(intake).value(), context));
}

}  // namespace queuebox::sources
