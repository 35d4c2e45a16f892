// rabbitmq_destination.h: the `rabbitmq` destination (QueueBox reference §7.2, §7.5-7.7, §9.1),
// built on rabbitmq-c 0.11 (which has no confirm-wait helper: confirms are read frame by frame).
//
// Connection: one AMQP connection with one confirm-mode channel per destination (confirm.select),
// opened by Start(). Each exchange is declared (durable, `exchangeType`) once per connection
// before its first publish; the default exchange ("") and `amq.*` are never declared.
// A broken channel or connection (a failed write, a timeout, connection.close/channel.close from
// the broker) is dropped; the next batch reconnects, after a capped jittered backoff when the
// previous connect attempt failed (core/backoff.h ReconnectDelayMs).
// Message: exchange = exchangeFrom column or the `exchange` template rendered (empty => failure
//   "rendered an empty exchange"); routing key = the route's rendered routingKeyTemplate when the
//   route has one, else the destination's routingKeyTemplate (default {{ topic }}, routing-key
//   rules of §7.6: a missing field renders ""); mandatory = true; properties message_id = outbox
//   id, content_type = application/json, delivery_mode 2 (persistent) / 1 (transient); headers
//   x-topic (string), x-attempt (signed 32-bit integer), then static, then row headers (a later
//   one of the same name replaces an earlier one); body = the payload bytes verbatim.
// Outcomes: Delivered only on basic.ack for the message's delivery tag (a `multiple` ack covers
//   every earlier tag) with no basic.return for it before the ack. basic.return => Retry
//   "unroutable: ...", basic.nack => Retry "nacked ...", no confirm within confirm_timeout_ms or a
//   broken connection => Retry with the reason. A message RabbitMQ can never take => Reject
//   (dead at once, the batch goes on; broker_common.h): row headers not a JSON object of
//   strings, a payload that is not JSON, an exchange, routing key or header name over 255 bytes.
// Throughput: the whole batch is published, then the confirms are read (pipelined); the relay
//   hands it a whole claimed task in one call (PipelinesBatch), so a round of confirms carries up
//   to outbox.batchSize messages, not outbox.concurrency. A batch gives the channel up as soon as
//   it has published, so the next batch publishes while the earlier ones await their confirms
//   (up to outbox.concurrency batches in flight on one channel, as a bare publisher keeps a window
//   of unconfirmed messages). Whichever waiting batch reads the socket settles the confirms of
//   every batch (a `multiple` ack spans batches); a broken connection fails all of them.
//
// Thread-safety: a connection is not thread-safe: publishing and reading frames run under one
// mutex, one batch publishes at a time (TakeChannel), and the socket is waited on without the
// mutex by one batch at a time. Health() does not wait for a running batch.
#pragma once

#include <amqp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "destinations/broker_common.h"
#include "destinations/registry.h"
#include "queuebox/destination.h"

namespace queuebox {

struct RabbitMqDestinationSettings {
  std::string name;      // destinations.<name>
  std::string url;       // amqp://user:pass@host:port/vhost (or amqps://); an empty vhost means "/"
  std::string exchange;  // literal or address template, required
  std::optional<std::string> exchange_from;  // aggregate_type | topic | key; wins over exchange
  std::string exchange_type = "topic";       // topic | direct | fanout
  std::string routing_key_template = "{{ topic }}";
  bool persistent = true;  // deliveryMode: persistent (2) | transient (1)
  std::map<std::string, std::string> static_headers;
  int max_error_body_bytes = 2048;     // cut of failure reasons (characters)
  int64_t confirm_timeout_ms = 5000;   // wait for the confirms of a batch (ms)
  int64_t connect_timeout_ms = 10000;  // TCP connect, handshake and each RPC (ms)
  // Batches awaiting their confirms at once; a batch past it waits for the channel. 0: no limit
  // but the relay's (outbox.concurrency). Not a configuration key: tests set 1 to hold a batch
  // behind another's confirms.
  int max_batches_awaiting_confirms = 0;
};

// The registry entry for `type: rabbitmq`: option table, block validator, factory.
DestinationType RabbitMqDestinationType();
// Cross-key checks of a rabbitmq block: url parses as an AMQP URI, exchange placeholders,
// exchangeFrom column.
std::vector<std::string> ValidateRabbitMqBlock(const nlohmann::json& block);

// The string headers of a message (§9.1): x-topic = `topic`, then `merged` (MergeRowHeaders:
// static, then row), a later one of a name (exact case) replacing the earlier value in place, so
// a row header x-topic or x-attempt wins over the relay's, as in QueueBox ("row wins"); minus the
// names of `integer_headers` (AmqpExtension: those replace string headers). The message id is
// the message_id property, never a header.
HeaderList RabbitMqStringHeaders(const std::string& topic, HeaderList merged,
                                 const std::map<std::string, int64_t>& integer_headers);

// The AMQP header table of a message: each of `headers` (RabbitMqStringHeaders) as a long string
// (field kind 'S'), x-attempt = `attempt` (kind 'I', signed 32-bit) right after x-topic unless
// `headers` or `integer_headers` holds an x-attempt, then `integer_headers` (kind 'l'). The
// entries point into `headers` and `integer_headers`, which must outlive them. No I/O.
std::vector<amqp_table_entry_t> RabbitMqHeaderEntries(
    const HeaderList& headers, int32_t attempt,
    const std::map<std::string, int64_t>& integer_headers);

class RabbitMqDestination final : public Destination {
 public:
  // kInvalidArgument (naming destinations.<name>.<key>) for a bad url, template or column.
  static Result<std::unique_ptr<RabbitMqDestination>> Create(RabbitMqDestinationSettings s);
  ~RabbitMqDestination() override;

  const std::string& name() const override { return settings_.name; }
  std::string_view type() const override { return "rabbitmq"; }
  // Connects, opens the confirm channel and declares a literal exchange. A broker that cannot
  // be reached does not fail the start: the destination starts not ready (Health) and
  // reconnects in the background with capped jittered backoff; its messages take the retry
  // path meanwhile. kUnavailable naming the destination when the broker refuses the exchange.
  Status Start() override;
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;
  // One confirm channel keeps the batch's order and its confirms are read pipelined.
  bool PipelinesBatch() const override { return true; }
  // OK while the connection is open; kUnavailable with the last error otherwise.
  Status Health() override;
  void Stop() override;
  // How often a batch found the channel taken by another and waited for it. Tests.
  int64_t ChannelWaitsForTest() const { return channel_waits_.load(); }
  // How many batches published while another batch's confirms were outstanding. Tests.
  int64_t OverlappedPublishesForTest() const { return overlapped_publishes_.load(); }

 private:
  class Connection;
  struct Batch;

  RabbitMqDestination(RabbitMqDestinationSettings settings, AddressSpec exchange,
                      Template routing_key);
  // The passes of PublishBatch, in order. Each message keeps the first outcome it gets.
  // 1 (no lock): exchange, headers, message id and routing key of every message; a message that
  //   can never be sent (bad row headers or AMQP property) is rejected here.
  void Prepare(Batch& b) const;
  // Waits until no other batch holds the channel (nor is the window of batches awaiting
  // confirms full) and takes it; false (nothing taken) when every message of `b` was cancelled
  // meanwhile. ReleaseChannel hands it to the next batch; `awaiting`: this batch now awaits its
  // confirms, until DoneAwaiting.
  bool TakeChannel(Batch& b);
  void ReleaseChannel(bool awaiting);
  void DoneAwaiting();
  // 2: declares each exchange once per connection; a failed declare closes the channel, so its
  //   messages fail and the next exchange gets a fresh connection. False when nothing is left to
  //   publish or no connection can be had (every open message then failed).
  bool DeclareExchanges(Batch& b);
  // 3: publishes every open message (mandatory) and enters its delivery tag in in_flight_.
  void Publish(Batch& b);
  // 4: until every published message of `b` has its answer, the confirm timeout passes or the
  //   connection breaks: waits for the socket (`lock` released meanwhile) or for the batch that
  //   reads it.
  void AwaitConfirms(Batch& b, std::unique_lock<std::mutex>& lock);
  // 5: a broken connection fails what is still open (the connection was dropped when it broke).
  void Finish(Batch& b);
  // Under mu_: reads every frame already sent, without waiting: confirms and returns settle the
  // batches in flight, a close or a read error breaks them all. Leaves nothing buffered, so a
  // wait on the socket sees every new frame.
  void ReadFrames();
  // Under mu_: basic.ack / basic.nack (with `multiple`, every tag in flight up to it).
  void OnConfirm(const amqp_frame_t& frame);
  // Under mu_: basic.return, remembered by the earliest tag in flight of its message id.
  void OnReturn(const amqp_frame_t& frame);
  // Under mu_: `current` and every batch in flight fail with `reason`; the connection is dropped.
  void BreakInFlight(Batch* current, const std::string& reason, bool by_outage);
  // Under mu_: every batch in flight gets `reason` (unless it has one) and leaves in_flight_.
  void FailInFlight(const std::string& reason, bool by_outage);
  // Opens conn_ (honouring the reconnect backoff unless `now` is set).
  Status EnsureConnected(bool ignore_backoff);
  // Opens conn_ when it is not open and declares a literal exchange: kUnavailable when the
  // broker cannot be reached, kFailedPrecondition when it refuses the declare. Takes mu_.
  Status ConnectAndDeclare();
  // Under mu_: fails every batch in flight (as an outage unless it already failed otherwise)
  // and closes the connection; the background reconnect is kicked.
  void Drop(const std::string& reason);
  std::string Endpoint() const;

  RabbitMqDestinationSettings settings_;
  AddressSpec exchange_;
  Template routing_key_;
  std::string host_;
  int port_ = 5672;

  // One batch at a time holds the channel (TakeChannel), so a batch waits on channel_free_ and
  // can see its lost claims meanwhile.
  std::mutex channel_mu_;
  std::condition_variable channel_free_;
  bool channel_taken_ = false;  // guarded by channel_mu_
  int awaiting_ = 0;            // guarded by channel_mu_: batches awaiting their confirms
  // Guards conn_ and the backoff state (a batch, the reconnect loop, Stop).
  std::mutex mu_;
  std::unique_ptr<Connection> conn_;
  // The published messages of every batch awaiting confirms on conn_: delivery tag -> (batch,
  // index), and message id -> its tags in order (basic.return names only the id).
  std::map<uint64_t, std::pair<Batch*, size_t>> in_flight_;
  std::map<std::string, std::deque<uint64_t>> tags_by_id_;
  bool reading_ = false;              // a batch waits on the socket for all (without mu_)
  std::condition_variable confirms_;  // with mu_: the reader read, or the connection broke
  int wake_fd_ = -1;                  // eventfd: ReadFrames under mu_ wakes the reader it read for
  int failures_ = 0;
  std::chrono::steady_clock::time_point next_connect_{};

  std::atomic<int64_t> channel_waits_{0};
  std::atomic<int64_t> overlapped_publishes_{0};
  std::atomic<bool> connected_{false};
  std::atomic<bool> started_{false};
  std::mutex error_mu_;
  std::string last_error_;
  // Reconnects in the background while the broker is unreachable (from Start, and after a
  // lost connection), so readiness follows the broker without traffic.
  ReconnectLoop reconnect_;
};

}  // namespace queuebox
