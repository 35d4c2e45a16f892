// nats_destination.h: the `nats` destination (QueueBox reference §7.4, §7.5, §7.7, §9.1), built on
// nats.c 3.4.
//
// Connection: one per destination, opened by Start(), reconnecting forever in the background
// with capped jittered backoff (nats.c buffers publishes while it reconnects). A server that is
// not up at start does not fail the start: the connection keeps trying in the background, the
// destination reports not ready (Health) and its batches fail at once (retry path) until a
// server answered (issue 13 item 4). Credentials: username + password or token.
// Message: subject = subjectFrom column or the `subject` template rendered (empty => failure
//   "rendered an empty subject"; the route's routingKeyTemplate never changes it); body = the
//   payload bytes verbatim; headers = static, then row headers (a row header replaces a static
//   one), then x-message-id, x-topic, x-attempt and x-message-key (when the row has a key), which
//   replace any header of the same name (exact letter case: NATS names are case-sensitive, so a
//   row's X-Message-Id stays beside it); JetStream also gets Nats-Msg-Id = outbox id, so the
//   stream drops a duplicate after a retry or a replica crash (within its duplicate window).
// Outcomes: JetStream (jetStream: true, default): Delivered only on a PubAck (a duplicate PubAck
//   counts: the stream holds the message). Core NATS (jetStream: false): publish, then flush
//   within timeoutMs => Delivered (no delivery proof, as in QueueBox).
//   The destination's fault => Unavailable (row released, no attempt spent; docs/guarantees.md
//   §8): not connected yet, reconnecting or closed (nothing is published then), a publish or
//   flush status of a lost connection (IsOutageStatus in the .cc), a PubAck or flush timeout
//   while the connection is lost or was lost during the wait, "no responders" while JetStream
//   itself does not answer an API request (server restarting, JetStream or the stream's leader
//   down), an error PubAck naming JetStream unavailable, no leader/peers, stream offline or out
//   of resources (IsOutageJsError).
//   The message's fault => Retry (an attempt spent, dead at maxAttempts): "no responders" while
//   JetStream answers (no stream covers the subject), larger than max_payload, an invalid subject,
//   not permitted, an error PubAck for a rule of the stream (message too large for the stream,
//   maximum messages with discard new, sealed, ...), a PubAck timeout over a connection that
//   stayed up. A message NATS can never take => Reject (dead at once, the batch goes
//   on; broker_common.h): row headers not a JSON object of strings, a header, topic or key with
//   CR, LF or NUL, a header name that is empty or holds ':', a space or a control character
//   (CheckHeaderNames), a payload that is not JSON, a subject with an empty or wildcard token or
//   whitespace.
// Throughput: the batch is published asynchronously (js_PublishMsgAsync); PubAcks are matched
//   to their message by Nats-Msg-Id through a registry of in-flight messages. Each message has
//   its own PubAck deadline (timeoutMs, nats.c's jsPubOptions.MaxWait): a late PubAck costs
//   only its own message, never the other batches in flight on the connection. The relay hands
//   it a whole claimed task in one call (PipelinesBatch).
// Teardown: Stop waits for nats.c's closed callback (its connection callbacks run on the
//   library's thread after Close returns); the PubAck handler's closure is never freed and
//   reaches the registry only while the destination holds it.
//
// Thread-safety: PublishBatch may run on several threads at once (nats.c is thread-safe; each
// batch waits for its own messages only).
#pragma once

#include <nats/nats.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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

struct NatsDestinationSettings {
  std::string name;                         // destinations.<name>
  std::string servers;                      // comma list of nats:// URLs, required
  std::string subject;                      // literal or address template, required
  std::optional<std::string> subject_from;  // aggregate_type | topic | key; wins over subject
  bool jet_stream = true;
  int64_t timeout_ms = 30000;  // PubAck wait / flush timeout (ms), > 0
  std::optional<std::string> username;
  std::optional<std::string> password;  // secret
  std::optional<std::string> token;     // secret
  std::map<std::string, std::string> static_headers;
  int max_error_body_bytes = 2048;  // cut of failure reasons (characters)
};

// The registry entry for `type: nats`: option table, block validator, factory.
DestinationType NatsDestinationType();
// Cross-key checks of a nats block: username and password together, token or username (not
// both), subject placeholders, subjectFrom column.
std::vector<std::string> ValidateNatsBlock(const nlohmann::json& block);

// Sets the headers of `row` (§9.1) on `msg`: `headers` (MergeRowHeaders: static, then row) in
// order, then x-message-id, x-topic, x-attempt, x-message-key (when the row has a key) and, for
// JetStream, Nats-Msg-Id = row id. Each is natsMsgHeader_Set, which replaces a value of the exact
// same name (names are case-sensitive): a later header of a name wins, the relay's last. Values
// are C strings (the caller refused CR, LF and NUL: CheckHeaderListText, and names that would not
// read back as themselves: CheckHeaderNames). No I/O; the first
// nats.c error is returned, with the headers set so far left on `msg`.
natsStatus SetNatsHeaders(natsMsg* msg, const HeaderList& headers, const OutboxRow& row,
                          bool jet_stream);

class NatsDestination final : public Destination {
 public:
  // kInvalidArgument (naming destinations.<name>.<key>) for bad settings, among them a static
  // header NATS cannot carry (CheckHeaderNames, CheckHeaderListText: destinations.<name>.headers).
  static Result<std::unique_ptr<NatsDestination>> Create(NatsDestinationSettings settings);
  ~NatsDestination() override;

  const std::string& name() const override { return settings_.name; }
  std::string_view type() const override { return "nats"; }
  // Connects (and creates the JetStream context); when no server answers yet, keeps connecting
  // in the background and returns OK. kUnavailable naming the destination for a connection that
  // cannot be set up at all (bad options).
  Status Start() override;
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;
  // The batch is published asynchronously and its PubAcks awaited together.
  bool PipelinesBatch() const override { return true; }
  // OK while connected; kUnavailable while reconnecting or closed.
  Status Health() override;
  void Stop() override;

 private:
  struct Connection;
  struct Batch;
  struct InFlight {
    std::shared_ptr<Batch> batch;
    size_t index = 0;
  };

  explicit NatsDestination(NatsDestinationSettings settings, AddressSpec subject);
  Result<std::shared_ptr<Connection>> CurrentConnection();
  Result<std::shared_ptr<Connection>> Connect();
  // JetStream: every message is sent asynchronously (PublishAsync), then the PubAcks are awaited.
  void PublishJetStream(Connection& conn, std::span<const OutboundMessage> batch,
                        std::vector<std::optional<Outcome>>& outcomes);
  // Sends one message and registers it in inflight_; a message that cannot be sent gets its
  // outcome in `state` at once.
  void PublishAsync(Connection& conn, const OutboundMessage& message, size_t index,
                    const std::shared_ptr<Batch>& state);
  // Waits for the batch's PubAcks and copies its outcomes out. nats.c times out each message on
  // its own after timeoutMs (jsPubOptions.MaxWait); past that and a grace period the rest are
  // given up: Retry, removed from the registry so a late PubAck is ignored, Unavailable when
  // connection_lost() says so at that moment. True when it gave up on some.
  bool AwaitPubAcks(const std::shared_ptr<Batch>& state,
                    std::vector<std::optional<Outcome>>& outcomes,
                    const std::function<bool()>& connection_lost);
  // True when JetStream does not answer an API request (no responders, timeout, connection
  // lost): a "no responders" PubAck then means JetStream is out, not that no stream covers the
  // subject. One request of at most min(timeoutMs, 5 s).
  bool JetStreamOut(Connection& conn);
  // Core NATS: publish every message, then one flush confirms them all.
  void PublishCore(Connection& conn, std::span<const OutboundMessage> batch,
                   std::vector<std::optional<Outcome>>& outcomes);

  NatsDestinationSettings settings_;
  AddressSpec subject_;
  std::mutex mu_;  // guards conn_ and down_logged_
  std::shared_ptr<Connection> conn_;
  // The "cannot connect yet" WARN was logged and no connection came up since: nats.c 3.4 closes
  // a connection the server refused twice (credentials), and each new one must not log again.
  bool down_logged_ = false;
  // The messages waiting for a PubAck, by Nats-Msg-Id; shared with the PubAck handler, which
  // nats.c may still run after this object is gone (AckTarget in the .cc).
  struct AckRegistry;
  struct AckTarget;
  std::shared_ptr<AckRegistry> acks_;
};

}  // namespace queuebox
