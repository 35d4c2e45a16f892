#include "destinations/kafka/kafka_destination.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <utility>

#include "core/log.h"
#include "destinations/kafka/kafka_security.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMinTimeoutMs = 2000;

void AddHeader(rd_kafka_headers_t* h, const std::string& name, const std::string& value) {
  rd_kafka_header_add(h, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                      static_cast<ssize_t>(value.size()));
}

// Whose fault a failed produce or delivery is (issue 17 item 1; docs/guarantees.md §8).
// The destination's (Outcome::Unavailable: the row is released, no attempt spent): the cluster
// or the partition's leader cannot be reached or cannot take writes now. librdkafka retries
// those itself until delivery.timeout.ms, so a message that still failed reports one of them or
// _MSG_TIMED_OUT. A timeout is an outage when no broker is reachable (`brokers_down`:
// librdkafka reported _ALL_BROKERS_DOWN and nothing was delivered since) or when the message had
// a partition (`partitioned`: the topic and its leader were known, so the broker did not answer;
// a connection can stay up while it does not, and a delivery to another broker clears
// brokers_down). A message that never got a partition waited for its topic: a topic that does not
// exist or that the cluster refuses times out that way, and that is the message's fault.
// The message's (Outcome::Retry: an attempt spent, dead at maxAttempts): MSG_SIZE_TOO_LARGE and
// _MSG_SIZE_TOO_LARGE, INVALID_MSG, CORRUPT_MESSAGE, INVALID_RECORD, RECORD_LIST_TOO_LARGE,
// TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PART and _UNKNOWN_TOPIC / _UNKNOWN_PARTITION
// (allow.auto.create.topics is false: the topic must exist), TOPIC_EXCEPTION, POLICY_VIOLATION,
// and every code not listed below.
bool IsOutage(rd_kafka_resp_err_t err, bool brokers_down, bool partitioned) {
  switch (err) {
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__TIMED_OUT_QUEUE:
      return brokers_down || partitioned;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
    case RD_KAFKA_RESP_ERR__RESOLVE:
    case RD_KAFKA_RESP_ERR__SSL:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR__QUEUE_FULL:  // the local queue stayed full for timeoutMs
    case RD_KAFKA_RESP_ERR__FATAL:       // the producer is replaced (CurrentProducer)
    case RD_KAFKA_RESP_ERR__PURGE_QUEUE:
    case RD_KAFKA_RESP_ERR__PURGE_INFLIGHT:
    case RD_KAFKA_RESP_ERR__DESTROY:
    case RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_REPLICA_NOT_AVAILABLE:
    case RD_KAFKA_RESP_ERR_NETWORK_EXCEPTION:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS:
    case RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR:
    case RD_KAFKA_RESP_ERR_THROTTLING_QUOTA_EXCEEDED:
      return true;
    default:
      return false;
  }
}

}  // namespace

rd_kafka_headers_t* KafkaRecordHeaders(const HeaderList& headers, const OutboxRow& row) {
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(headers.size() + 3);
  for (const auto& [n, v] : headers) AddHeader(hdrs, n, v);
  AddHeader(hdrs, "x-message-id", row.id);
  AddHeader(hdrs, "x-topic", row.topic);
  AddHeader(hdrs, "x-attempt", std::to_string(row.attempt));
  return hdrs;
}

// Outcomes of one batch, filled by delivery reports (any polling thread).
struct KafkaDestination::Batch {
  explicit Batch(size_t n) : outcomes(n) {}
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<Outcome>> outcomes;
  size_t pending = 0;
  int max_error_chars = 2048;
};

// The opaque of one produced message; owned by librdkafka until its delivery report.
struct KafkaDestination::Slot {
  std::shared_ptr<Batch> batch;
  size_t index = 0;
};

struct KafkaDestination::Producer {
  rd_kafka_t* rk = nullptr;
  std::atomic<bool> brokers_down{false};
  int64_t timeout_ms = 30000;
  std::string name;

  ~Producer() {
    if (rk == nullptr) return;
    rd_kafka_flush(rk, static_cast<int>(timeout_ms));
    // What the flush did not deliver (brokers down): purged, and its delivery reports served
    // here, so every message's Slot is freed (rd_kafka_destroy drops them without a report).
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(rk, 5000);
    rd_kafka_destroy(rk);
  }

  static void OnDelivery(rd_kafka_t* /*rk*/, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<Producer*>(opaque);
    std::unique_ptr<Slot> slot(static_cast<Slot*>(m->_private));
    if (!slot) return;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) self->brokers_down = false;
    Outcome outcome = Outcome::Delivered();
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::string topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
      std::string why = FailureReason(
          "Kafka delivery to topic '" + topic + "' failed: " + rd_kafka_err2str(m->err),
          slot->batch->max_error_chars);
      outcome = IsOutage(m->err, self->brokers_down, m->partition != RD_KAFKA_PARTITION_UA)
                    ? Outcome::Unavailable(std::move(why))
                    : Outcome::Retry(std::move(why));
    }
    std::lock_guard<std::mutex> lock(slot->batch->mu);
    if (!slot->batch->outcomes[slot->index]) {
      slot->batch->outcomes[slot->index] = std::move(outcome);
      --slot->batch->pending;
    }
    slot->batch->cv.notify_all();
  }

  static void OnError(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
    auto* self = static_cast<Producer*>(opaque);
    if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN) self->brokers_down = true;
    static log::RateLimiter limiter(std::chrono::seconds(10));
    int64_t suppressed = 0;
    if (limiter.Allow(&suppressed)) {
      log::Warn("Kafka client error", {{"destination", self->name},
                                       {"error", SanitizeErrorText(reason)},
                                       {"suppressed", std::to_string(suppressed)}});
    }
  }

  static std::string SanitizeErrorText(const char* reason) {
    return FailureReason(reason ? reason : "", 2000);
  }

  static void OnLog(const rd_kafka_t* /*rk*/, int level, const char* fac, const char* buf) {
    if (level <= 3) {
      log::Debug("librdkafka", {{"facility", fac ? fac : ""}, {"text", SanitizeErrorText(buf)}});
    }
  }
};

// ---- option table ------------------------------------------------------------------------------

std::vector<std::string> ValidateKafkaBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  ValidateAddressKeys(block, "topic", "topicFrom", &problems);
  if (auto key = OptionalString(block, "keyTemplate")) {
    Status s = ValidateAddressTemplate(*key);
    if (!s.ok()) problems.push_back("keyTemplate: " + s.message());
  }
  auto timeout = block.find("timeoutMs");
  if (timeout != block.end() && timeout->is_number_integer() &&
      timeout->get<int64_t>() < kMinTimeoutMs) {
    problems.push_back("timeoutMs: must be at least 2000 (got " +
                       std::to_string(timeout->get<int64_t>()) + ")");
  }
  KafkaSecurity security;
  security.protocol = OptionalString(block, "securityProtocol").value_or("PLAINTEXT");
  security.sasl_mechanism = OptionalString(block, "saslMechanism");
  security.sasl_username = OptionalString(block, "saslUsername");
  security.sasl_password = OptionalString(block, "saslPassword");
  for (std::string& p : KafkaSecurityProblems(security)) {
    // An unknown protocol is the option table's to report (it names the choices).
    if (!p.starts_with("securityProtocol:")) problems.push_back(std::move(p));
  }
  return problems;
}

DestinationType KafkaDestinationType() {
  using S = KafkaDestinationSettings;
  OptionTable<S> options = {
      opt::Text("bootstrapServers", &S::bootstrap_servers, nullptr,
                "Comma-separated host:port list of Kafka brokers")
          .Required(),
  };
  AddAddressOptions(options, "topic", "topicFrom", "Kafka topic", &S::topic, &S::topic_from);
  options.Add(opt::Text("keyTemplate", &S::key_template, "{{ key }}",
                        "Record key when the route has no routingKeyTemplate; blank = no key"));
  options.Add(
      opt::Millis("timeoutMs", &S::timeout_ms, 30000, "Delivery timeout in ms (at least 2000)")
          .Min(kMinTimeoutMs));
  options.Add(opt::Choice("securityProtocol", &S::security_protocol, KafkaSecurityProtocols(),
                          "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"));
  options.Add(opt::Text("saslMechanism", &S::sasl_mechanism, nullptr,
                        "SASL mechanism (e.g. PLAIN, SCRAM-SHA-512)"));
  options.Add(opt::Text("saslUsername", &S::sasl_username, nullptr, "SASL username"));
  options.Add(
      opt::Secret("saslPassword", &S::sasl_password, "SASL password (secret; file: allowed)"));
  return MakeDestinationType<S>(
      "kafka", options, ValidateKafkaBlock,
      [](S s, const DestinationConfig& config,
         const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
        s.static_headers = config.headers;
        s.max_error_body_bytes = context.max_error_body_bytes;
        return AsDestination(KafkaDestination::Create(std::move(s)));
      });
}

// ---- destination -------------------------------------------------------------------------------

KafkaDestination::KafkaDestination(KafkaDestinationSettings settings, AddressSpec topic,
                                   Template key)
    : settings_(std::move(settings)), topic_(std::move(topic)), key_template_(std::move(key)) {}

KafkaDestination::~KafkaDestination() { Stop(); }

Result<std::unique_ptr<KafkaDestination>> KafkaDestination::Create(
    KafkaDestinationSettings settings) {
  const std::string prefix = "destinations." + settings.name + ".";
  nlohmann::json block = {{"topic", settings.topic},
                          {"keyTemplate", settings.key_template},
                          {"timeoutMs", settings.timeout_ms},
                          {"securityProtocol", settings.security_protocol}};
  if (settings.topic_from) block["topicFrom"] = *settings.topic_from;
  if (settings.sasl_mechanism) block["saslMechanism"] = *settings.sasl_mechanism;
  if (settings.sasl_username) block["saslUsername"] = *settings.sasl_username;
  if (settings.sasl_password) block["saslPassword"] = *settings.sasl_password;
  std::vector<std::string> problems = ValidateKafkaBlock(block);
  if (settings.bootstrap_servers.empty()) problems.push_back("bootstrapServers: required");
  for (std::string& p : KafkaSecurityProblems(
           {settings.security_protocol, std::nullopt, std::nullopt, std::nullopt})) {
    problems.push_back(std::move(p));
  }
  if (!problems.empty()) return InvalidArgument(prefix + problems.front());
  Result<AddressSpec> topic =
      AddressSpec::Create(settings.name, "topic", settings.topic, "topicFrom", settings.topic_from);
  if (!topic.ok()) return topic.status();
  Result<Template> key = Template::CompileAddress(settings.key_template);
  if (!key.ok()) return InvalidArgument(prefix + "keyTemplate: " + key.status().message());
  return std::unique_ptr<KafkaDestination>(
      new KafkaDestination(std::move(settings), std::move(topic).value(), std::move(key).value()));
}

Result<std::shared_ptr<KafkaDestination::Producer>> KafkaDestination::NewProducer() {
  auto producer = std::make_shared<Producer>();
  producer->timeout_ms = settings_.timeout_ms;
  producer->name = settings_.name;
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char err[512];
  std::vector<std::pair<std::string, std::string>> props = {
      {"bootstrap.servers", settings_.bootstrap_servers},
      {"client.id", "queuebox-" + settings_.name},
      {"enable.idempotence", "true"},
      {"acks", "all"},
      {"linger.ms", "5"},
      {"delivery.timeout.ms", std::to_string(settings_.timeout_ms)},
      {"request.timeout.ms", std::to_string(std::max<int64_t>(settings_.timeout_ms - 1000, 1000))},
      {"allow.auto.create.topics", "false"},
  };
  for (auto& p : KafkaSecurityProperties({settings_.security_protocol, settings_.sasl_mechanism,
                                          settings_.sasl_username, settings_.sasl_password})) {
    props.push_back(std::move(p));
  }
  for (const auto& [k, v] : settings_.librdkafka) props.emplace_back(k, v);
  for (const auto& [k, v] : props) {
    if (rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      // The value is not repeated: it may be a secret.
      return InvalidArgument("destinations." + settings_.name + ": Kafka property " + k +
                             " refused: " + FailureReason(err, settings_.max_error_body_bytes));
    }
  }
  rd_kafka_conf_set_opaque(conf, producer.get());
  rd_kafka_conf_set_dr_msg_cb(conf, &Producer::OnDelivery);
  rd_kafka_conf_set_error_cb(conf, &Producer::OnError);
  rd_kafka_conf_set_log_cb(conf, &Producer::OnLog);
  producer->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (producer->rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return InvalidArgument("destinations." + settings_.name +
                           ": cannot create the Kafka producer: " +
                           FailureReason(err, settings_.max_error_body_bytes));
  }
  return producer;
}

Status KafkaDestination::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (producer_) return Status::Ok();
  Result<std::shared_ptr<Producer>> p = NewProducer();
  if (!p.ok()) return p.status();
  producer_ = std::move(p).value();
  return Status::Ok();
}

std::optional<std::string> KafkaDestination::ProducerPropertyForTest(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!producer_) return std::nullopt;
  char value[512];
  size_t size = sizeof value;
  if (rd_kafka_conf_get(rd_kafka_conf(producer_->rk), name.c_str(), value, &size) !=
      RD_KAFKA_CONF_OK) {
    return std::nullopt;
  }
  return std::string(value);
}

int KafkaDestination::LocalQueueLengthForTest() {
  std::lock_guard<std::mutex> lock(mu_);
  return producer_ ? rd_kafka_outq_len(producer_->rk) : -1;
}

Result<std::shared_ptr<KafkaDestination::Producer>> KafkaDestination::CurrentProducer() {
  std::lock_guard<std::mutex> lock(mu_);
  if (producer_) {
    char err[256];
    rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(producer_->rk, err, sizeof err);
    if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) return producer_;
    log::Warn("Kafka producer hit a fatal error; creating a new one",
              {{"destination", settings_.name},
               {"error", FailureReason(err, settings_.max_error_body_bytes)}});
    producer_.reset();  // the last batch still using it destroys it
  }
  Result<std::shared_ptr<Producer>> p = NewProducer();
  if (!p.ok()) return p.status();
  producer_ = std::move(p).value();
  return producer_;
}

void KafkaDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  Result<std::shared_ptr<Producer>> current = CurrentProducer();
  if (!current.ok()) {
    for (size_t i = 0; i < batch.size(); ++i) {
      // No producer could be made (librdkafka refused the configuration): not the message's
      // fault, and the same for every message.
      sink.Report(i, Outcome::Unavailable(FailureReason(current.status().message(),
                                                        settings_.max_error_body_bytes)));
    }
    return;
  }
  std::shared_ptr<Producer> producer = std::move(current).value();
  auto state = std::make_shared<Batch>(batch.size());
  state->max_error_chars = settings_.max_error_body_bytes;
  const auto produce_deadline = Clock::now() + std::chrono::milliseconds(settings_.timeout_ms);
  for (size_t i = 0; i < batch.size(); ++i) {
    Produce(*producer, batch[i], i, state, produce_deadline);
  }
  AwaitDeliveryReports(*producer, *state);
  std::vector<Outcome> outcomes = TakeOutcomes(*state);
  for (size_t i = 0; i < outcomes.size(); ++i) sink.Report(i, std::move(outcomes[i]));
}

void KafkaDestination::Produce(Producer& producer, const OutboundMessage& message, size_t index,
                               const std::shared_ptr<Batch>& state,
                               std::chrono::steady_clock::time_point produce_deadline) {
  const int max_chars = settings_.max_error_body_bytes;
  auto settle = [&](Outcome o) {
    std::lock_guard<std::mutex> lock(state->mu);
    state->outcomes[index] = std::move(o);
  };
  if (message.cancel_requested()) {  // the claim was lost before librdkafka took the message
    settle(Outcome::Cancelled());
    return;
  }
  const OutboxRow& row = *message.row;
  TemplateContext ctx = TemplateContext::ForRow(row);
  std::string topic = topic_.Render(row, ctx);
  if (topic.empty()) {
    settle(Outcome::Retry("Kafka destination '" + settings_.name + "' rendered an empty topic"));
    return;
  }
  Result<HeaderList> headers = MergeMessageHeaders(settings_.static_headers, message);
  Status sendable = headers.ok() ? CheckKafkaTopic(topic) : headers.status();
  if (sendable.ok()) sendable = CheckBodyIsJson(message);
  if (!sendable.ok()) {  // a message Kafka can never take: dead at once, the batch goes on
    settle(Outcome::Reject(FailureReason(sendable.message(), max_chars)));
    return;
  }
  std::string key = message.routing_key ? *message.routing_key : key_template_.Render(ctx);

  rd_kafka_headers_t* hdrs = KafkaRecordHeaders(*headers, row);

  auto* slot = new Slot{state, index};
  std::vector<rd_kafka_vu_t> vus;
  auto add = [&vus](rd_kafka_vtype_t type) -> rd_kafka_vu_t& {
    vus.emplace_back();
    vus.back().vtype = type;
    return vus.back();
  };
  add(RD_KAFKA_VTYPE_TOPIC).u.cstr = topic.c_str();
  if (!IsBlank(key)) {
    rd_kafka_vu_t& k = add(RD_KAFKA_VTYPE_KEY);
    k.u.mem.ptr = key.data();
    k.u.mem.size = key.size();
  }
  rd_kafka_vu_t& value = add(RD_KAFKA_VTYPE_VALUE);
  const std::string_view body = message.body();
  value.u.mem.ptr = const_cast<char*>(body.data());
  value.u.mem.size = body.size();
  add(RD_KAFKA_VTYPE_MSGFLAGS).u.i = RD_KAFKA_MSG_F_COPY;
  add(RD_KAFKA_VTYPE_HEADERS).u.headers = hdrs;
  add(RD_KAFKA_VTYPE_OPAQUE).u.ptr = slot;

  {
    std::lock_guard<std::mutex> lock(state->mu);
    ++state->pending;  // before producing: another thread's poll may report it at once
  }
  rd_kafka_resp_err_t code = RD_KAFKA_RESP_ERR_NO_ERROR;
  std::string reason;
  bool cancelled = false;
  while (true) {
    rd_kafka_error_t* error = rd_kafka_produceva(producer.rk, vus.data(), vus.size());
    if (error == nullptr) break;
    code = rd_kafka_error_code(error);
    reason = rd_kafka_error_string(error);
    rd_kafka_error_destroy(error);
    // A full local queue drains as reports are served: wait for it within the timeout.
    if (code != RD_KAFKA_RESP_ERR__QUEUE_FULL || Clock::now() >= produce_deadline) break;
    queue_full_waits_.fetch_add(1);
    rd_kafka_poll(producer.rk, 50);
    // Waiting for room in the local queue: a lost claim stops the message here.
    if (message.cancel_requested()) {
      cancelled = true;
      break;
    }
    code = RD_KAFKA_RESP_ERR_NO_ERROR;
  }
  if (code != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_headers_destroy(hdrs);  // not taken over on failure
    delete slot;
    std::lock_guard<std::mutex> lock(state->mu);
    --state->pending;
    std::string why =
        FailureReason("Kafka produce to topic '" + topic + "' failed: " + reason, max_chars);
    state->outcomes[index] = cancelled ? Outcome::Cancelled()
                             : IsOutage(code, producer.brokers_down, /*partitioned=*/false)
                                 ? Outcome::Unavailable(std::move(why))
                                 : Outcome::Retry(std::move(why));
  }
}

void KafkaDestination::AwaitDeliveryReports(Producer& producer, Batch& state) {
  // librdkafka reports every message within delivery.timeout.ms; two more seconds cover its
  // timeout scan.
  const auto deadline = Clock::now() + std::chrono::milliseconds(settings_.timeout_ms + 2000);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(state.mu);
      if (state.pending == 0) break;
    }
    if (Clock::now() >= deadline) break;
    rd_kafka_poll(producer.rk, 50);
  }
}

std::vector<Outcome> KafkaDestination::TakeOutcomes(Batch& state) {
  std::vector<Outcome> outcomes;
  std::lock_guard<std::mutex> lock(state.mu);
  for (auto& outcome : state.outcomes) {
    if (!outcome) {
      // Mark it reported so a late report is ignored.
      // librdkafka did not even time it out: the client is stuck on the cluster.
      outcome = Outcome::Unavailable("no Kafka delivery report within " +
                                     std::to_string(settings_.timeout_ms) + "ms");
      --state.pending;
    }
    outcomes.push_back(*outcome);
  }
  return outcomes;
}

Status KafkaDestination::Health() {
  std::shared_ptr<Producer> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = producer_;
  }
  if (!p) return Unavailable("Kafka producer of destination '" + settings_.name + "' not started");
  char err[256];
  if (rd_kafka_fatal_error(p->rk, err, sizeof err) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return Unavailable("Kafka producer of destination '" + settings_.name +
                       "' hit a fatal error: " + FailureReason(err, 512));
  }
  if (p->brokers_down) {
    return Unavailable("all Kafka brokers of destination '" + settings_.name + "' are down");
  }
  return Status::Ok();
}

void KafkaDestination::Stop() {
  std::shared_ptr<Producer> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    p = std::move(producer_);
  }
  // Destroyed (flushed) here unless a batch still holds it.
}

}  // namespace queuebox
