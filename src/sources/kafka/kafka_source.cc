// kafka_source.cc: the kafka consumer of a `type: kafka` source (see kafka_source.h).
#include "sources/kafka/kafka_source.h"

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"
#include "destinations/kafka/kafka_security.h"
#include "sources/broker_intake.h"
#include "sources/kafka/kafka_commit.h"

namespace queuebox::sources {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kFirstPollMs = 200;           // wait for the first record of a batch
constexpr int64_t kProbeIntervalMs = 1000;  // while no broker answers: one metadata probe a second
constexpr int kProbeTimeoutMs = 500;
// While up: one metadata request this often, and three unanswered in a row are an outage. A
// second signal beside librdkafka's all-brokers-down event, which comes once per transition and
// was seen not to come at all for a second outage (health stayed up for 90 s with every mock
// broker down).
constexpr int64_t kHealthProbeIntervalMs = 5000;
constexpr int kHealthProbeTimeoutMs = 2000;
constexpr int kHealthProbeFailures = 3;
constexpr int kSeekTimeoutMs = 10000;
// A synchronous commit (in a rebalance, so also in the close) waits no longer than this.
constexpr int kCommitTimeoutMs = 5000;
// Stop: the consumer close (a revoke's commit, then leaving the group) waits no longer than this.
constexpr int kCloseTimeoutMs = 20000;
constexpr int64_t kStoreBackoffInitialMs = 250;
constexpr int64_t kStoreBackoffCapMs = 10000;  // short of max.poll.interval.ms (5 min)

// A metadata request (the topics known to `rk`) answered within `timeout_ms`.
bool BrokerAnswers(rd_kafka_t* rk, int timeout_ms) {
  const struct rd_kafka_metadata* md = nullptr;
  if (rd_kafka_metadata(rk, 0, nullptr, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    return false;
  }
  rd_kafka_metadata_destroy(md);
  return true;
}

bool Blank(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// librdkafka's header list as views into it (null: no headers).
std::vector<KafkaHeaderBytes> HeaderBytes(const rd_kafka_headers_t* headers) {
  std::vector<KafkaHeaderBytes> out;
  if (headers == nullptr) return out;
  const char* name = nullptr;
  const void* value = nullptr;
  size_t size = 0;
  for (size_t i = 0;
       rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR;
       ++i) {
    KafkaHeaderBytes h{name, std::nullopt};
    if (value != nullptr) h.value.emplace(static_cast<const char*>(value), size);
    out.push_back(h);
  }
  return out;
}

// Records of one batch, destroyed with it.
struct Records {
  std::vector<rd_kafka_message_t*> items;
  Records() = default;
  Records(const Records&) = delete;
  Records& operator=(const Records&) = delete;
  ~Records() {
    for (rd_kafka_message_t* m : items) rd_kafka_message_destroy(m);
  }
};

// A partition list, destroyed with it.
struct PartitionList {
  rd_kafka_topic_partition_list_t* list;
  explicit PartitionList(int size) : list(rd_kafka_topic_partition_list_new(size)) {}
  explicit PartitionList(const rd_kafka_topic_partition_list_t* copy_of)
      : list(rd_kafka_topic_partition_list_copy(copy_of)) {}
  PartitionList(PartitionList&& other) noexcept : list(std::exchange(other.list, nullptr)) {}
  ~PartitionList() {
    if (list != nullptr) rd_kafka_topic_partition_list_destroy(list);
  }
  PartitionList(const PartitionList&) = delete;
  PartitionList& operator=(const PartitionList&) = delete;
};

// (topic, partition) -> offset, in first-seen order of the batch.
using PartitionOffsets = std::map<std::pair<std::string, int32_t>, int64_t>;

class KafkaSource final : public BrokerSource {
 public:
  KafkaSource(KafkaSourceSettings settings, BrokerIntake intake, const BrokerSourceContext& context)
      : settings_(std::move(settings)), intake_(std::move(intake)), context_(context) {}
  ~KafkaSource() override { Stop(); }

  Status Start() override;
  void Stop() override;
  std::string component() const override { return "kafka." + settings_.name; }
  bool healthy() const override { return up_.load() && !fatal_.load(); }

 private:
  Result<rd_kafka_t*> NewConsumer();
  void Run(rd_kafka_t* rk);
  // Polls up to maxPollRecords records (waits kFirstPollMs for the first one).
  void Fetch(rd_kafka_t* rk, Records& batch);
  // Stores the batch, then commits it; or seeks it back and backs off.
  void Process(rd_kafka_t* rk, const Records& batch);
  BrokerMessage Convert(const rd_kafka_message_t* m) const;
  void SeekBack(rd_kafka_t* rk, const Records& batch);
  void CommitStored(rd_kafka_t* rk, const Records& batch);
  // On an assignment: each partition of `assigned` this replica stored records of past the
  // group's committed offset starts at its stored_ offset (what lies below is in the inbox);
  // returns those partitions and offsets, to commit once assigned.
  PartitionList ResumeStored(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* assigned);
  void ProbeBrokers(rd_kafka_t* rk);
  // While up: the health probe (kHealthProbeIntervalMs); NoteOutage after kHealthProbeFailures.
  void CheckBrokers(rd_kafka_t* rk);
  // No broker answers: health down, one WARN per outage.
  void NoteOutage(const std::string& why);
  void Close(rd_kafka_t* rk);
  // Waits `ms` unless Stop() comes first; false when stopping.
  bool Sleep(int64_t ms);
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }
  void WarnLimited(const std::string& message, const std::string& error);

  static void OnError(rd_kafka_t* rk, int err, const char* reason, void* opaque);
  static void OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* partitions, void* opaque);
  static void OnLog(const rd_kafka_t* rk, int level, const char* fac, const char* buf);

  const KafkaSourceSettings settings_;
  const BrokerIntake intake_;
  const BrokerSourceContext context_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::thread thread_;

  std::atomic<bool> up_{false};     // a broker answered and not every broker is down since
  std::atomic<bool> fatal_{false};  // the consumer hit a fatal error and is being rebuilt
  // Only the consumer thread touches these.
  bool outage_ = false;  // an outage was reported (one WARN per outage)
  Clock::time_point next_probe_{};
  Clock::time_point next_health_probe_{};
  int failed_health_probes_ = 0;
  int store_failures_ = 0;
  // Per partition, the offset past the last record this replica stored in the inbox (every record
  // below it is stored: it read them in order from a committed offset). Kept when its assignment
  // is lost (a commit refused for a stale generation) or its revoke's commit fails, when librdkafka
  // forgets its stored offsets: the commit of what was stored is then made when the partition
  // comes back, not lost. Dropped at a revoke whose commit succeeded and when the partition is
  // assigned again (ResumeStored uses it once).
  PartitionOffsets stored_;
  log::RateLimiter limiter_{std::chrono::seconds(10)};
};

// ---- consumer --------------------------------------------------------------------------------

Result<rd_kafka_t*> KafkaSource::NewConsumer() {
  const std::string prefix = "sources." + settings_.name;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  std::vector<std::pair<std::string, std::string>> props = {
      {"bootstrap.servers", settings_.bootstrap_servers},
      {"group.id", settings_.group_id},
      {"client.id", "queuebox-" + settings_.name},
      {"enable.auto.commit", "false"},
      {"enable.auto.offset.store", "false"},
      {"enable.partition.eof", "false"},
      {"auto.offset.reset", settings_.auto_offset_reset},
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
      return InvalidArgument(prefix + ": Kafka property " + k + " refused: " + SanitizeError(err));
    }
  }
  rd_kafka_conf_set_opaque(conf, this);
  rd_kafka_conf_set_error_cb(conf, &KafkaSource::OnError);
  rd_kafka_conf_set_rebalance_cb(conf, &KafkaSource::OnRebalance);
  rd_kafka_conf_set_log_cb(conf, &KafkaSource::OnLog);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    return InvalidArgument(prefix + ": cannot create the Kafka consumer: " + SanitizeError(err));
  }
  rd_kafka_poll_set_consumer(rk);  // error and rebalance callbacks are served by consumer_poll
  PartitionList topics(static_cast<int>(settings_.topics.size()));
  for (const std::string& t : settings_.topics) {
    rd_kafka_topic_partition_list_add(topics.list, t.c_str(), RD_KAFKA_PARTITION_UA);
  }
  rd_kafka_resp_err_t sub = rd_kafka_subscribe(rk, topics.list);
  if (sub != RD_KAFKA_RESP_ERR_NO_ERROR) {
    rd_kafka_destroy(rk);
    return InvalidArgument(prefix + ".topics: cannot subscribe: " + rd_kafka_err2str(sub));
  }
  return rk;
}

Status KafkaSource::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return Status::Ok();
  Result<rd_kafka_t*> rk = NewConsumer();
  if (!rk.ok()) return rk.status();
  stopping_ = false;
  thread_ = std::thread([this, consumer = *rk] { Run(consumer); });
  log::Info("Kafka source started", {{"source", settings_.name}, {"groupId", settings_.group_id}});
  return Status::Ok();
}

void KafkaSource::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = std::thread();
  up_ = false;
}

bool KafkaSource::Sleep(int64_t ms) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  return !stopping_;
}

void KafkaSource::WarnLimited(const std::string& message, const std::string& error) {
  int64_t suppressed = 0;
  if (!limiter_.Allow(&suppressed)) return;
  log::Warn(message, {{"source", settings_.name},
                      {"error", SanitizeError(error)},
                      {"suppressed", std::to_string(suppressed)}});
}

void KafkaSource::Run(rd_kafka_t* rk) {
  int rebuilds = 0;
  while (!stopping()) {
    if (up_) {
      CheckBrokers(rk);
    } else {
      ProbeBrokers(rk);
    }
    char err[512];
    if (rd_kafka_fatal_error(rk, err, sizeof err) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      fatal_ = true;
      log::Error("Kafka consumer hit a fatal error; building a new one",
                 {{"source", settings_.name}, {"error", SanitizeError(err)}});
      rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
      rk = nullptr;
      while (rk == nullptr) {
        if (!Sleep(ReconnectDelayMs(rebuilds++, kStoreBackoffInitialMs, kStoreBackoffCapMs))) {
          return;
        }
        Result<rd_kafka_t*> again = NewConsumer();
        if (again.ok()) {
          rk = *again;
        } else {
          WarnLimited("Kafka consumer cannot be built", again.status().message());
        }
      }
      fatal_ = false;
      up_ = false;
      continue;
    }
    Records batch;
    Fetch(rk, batch);
    if (!batch.items.empty()) Process(rk, batch);
  }
  Close(rk);
}

void KafkaSource::Fetch(rd_kafka_t* rk, Records& batch) {
  const size_t max = static_cast<size_t>(settings_.max_poll_records);
  int timeout = kFirstPollMs;
  while (batch.items.size() < max) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, timeout);
    if (m == nullptr) break;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        std::string topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
        WarnLimited("Kafka consumer error" + (topic.empty() ? "" : " on topic '" + topic + "'"),
                    rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
      break;
    }
    if (!up_) ProbeBrokers(rk);  // a record arrived: a broker answers
    batch.items.push_back(m);
    timeout = 0;
  }
}

BrokerMessage KafkaSource::Convert(const rd_kafka_message_t* m) const {
  KafkaRecordView record;
  if (m->payload != nullptr) record.value.emplace(static_cast<const char*>(m->payload), m->len);
  if (m->key != nullptr) record.key.emplace(static_cast<const char*>(m->key), m->key_len);
  rd_kafka_headers_t* headers = nullptr;
  // rd_kafka_message_headers wants a non-const message; it only reads (parses once, cached).
  if (rd_kafka_message_headers(const_cast<rd_kafka_message_t*>(m), &headers) ==
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    record.headers = HeaderBytes(headers);
  }
  rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  int64_t ts = rd_kafka_message_timestamp(m, &type);
  if (type != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0) record.timestamp_ms = ts;
  return KafkaBrokerMessage(record);
}

void KafkaSource::Process(rd_kafka_t* rk, const Records& batch) {
  std::vector<NewInboxMessage> rows;
  rows.reserve(batch.items.size());
  int64_t filtered = 0;
  for (const rd_kafka_message_t* m : batch.items) {
    std::optional<NewInboxMessage> row = intake_.Receive(Convert(m));
    if (row) {
      rows.push_back(std::move(*row));
    } else {
      ++filtered;
    }
  }
  Result<std::vector<InboxStoreOutcome>> stored = std::vector<InboxStoreOutcome>();
  if (!rows.empty()) stored = context_.intake->Store(rows);
  if (!stored.ok()) {
    SeekBack(rk, batch);
    if (store_failures_ == 0) {
      log::Warn("Kafka source cannot store a batch; its records are fetched again",
                {{"source", settings_.name},
                 {"records", std::to_string(batch.items.size())},
                 {"error", SanitizeError(stored.status().message())}});
    }
    Sleep(ReconnectDelayMs(store_failures_++, kStoreBackoffInitialMs, kStoreBackoffCapMs));
    return;
  }
  if (store_failures_ > 0) {
    log::Info("Kafka source stores again", {{"source", settings_.name}});
    store_failures_ = 0;
  }
  intake_.Count(context_.observer, *stored, filtered);
  CommitStored(rk, batch);
}

void KafkaSource::SeekBack(rd_kafka_t* rk, const Records& batch) {
  PartitionOffsets first;
  for (const rd_kafka_message_t* m : batch.items) {
    first.emplace(std::make_pair(std::string(rd_kafka_topic_name(m->rkt)), m->partition),
                  m->offset);  // the batch holds each partition in offset order
  }
  PartitionList list(static_cast<int>(first.size()));
  for (const auto& [tp, offset] : first) {
    rd_kafka_topic_partition_list_add(list.list, tp.first.c_str(), tp.second)->offset = offset;
  }
  rd_kafka_error_t* error = rd_kafka_seek_partitions(rk, list.list, kSeekTimeoutMs);
  if (error != nullptr) {
    // A partition revoked meanwhile is read again by its next owner from the committed offset.
    WarnLimited("Kafka source cannot seek back", rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
  }
}

void KafkaSource::CommitStored(rd_kafka_t* rk, const Records& batch) {
  PartitionOffsets next;
  for (const rd_kafka_message_t* m : batch.items) {
    int64_t& o = next[{std::string(rd_kafka_topic_name(m->rkt)), m->partition}];
    o = std::max(o, m->offset + 1);
  }
  PartitionList list(static_cast<int>(next.size()));
  for (const auto& [tp, offset] : next) {
    rd_kafka_topic_partition_list_add(list.list, tp.first.c_str(), tp.second)->offset = offset;
    int64_t& mark = stored_.try_emplace(tp, offset).first->second;
    mark = std::max(mark, offset);
  }
  // A partition revoked during the fetch refuses the offset: its next owner reads it again, or
  // this replica resumes at stored_ when it gets the partition back.
  rd_kafka_offsets_store(rk, list.list);
  rd_kafka_resp_err_t err = rd_kafka_commit(rk, nullptr, 1);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR__NO_OFFSET) {
    WarnLimited(
        "Kafka source cannot commit offsets (the records are stored; a redelivery is "
        "deduplicated)",
        rd_kafka_err2str(err));
  }
}

PartitionList KafkaSource::ResumeStored(rd_kafka_t* rk, rd_kafka_topic_partition_list_t* assigned) {
  PartitionList ahead(0);
  PartitionList known(0);
  for (int i = 0; i < assigned->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = assigned->elems[i];
    if (stored_.count({tp.topic, tp.partition}) > 0) {
      rd_kafka_topic_partition_list_add(known.list, tp.topic, tp.partition);
    }
  }
  if (known.list->cnt == 0) return ahead;
  // A mark serves the one assignment that follows it: kept longer, it could outlive the records
  // it counts (a topic deleted and made again) and skip new ones.
  PartitionOffsets marks;
  for (int i = 0; i < known.list->cnt; ++i) {
    auto node = stored_.extract({known.list->elems[i].topic, known.list->elems[i].partition});
    marks.insert(std::move(node));
  }
  rd_kafka_resp_err_t err = rd_kafka_committed(rk, known.list, kSeekTimeoutMs);
  if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // The partitions start at the committed offsets: what was stored past them is read again
    // and deduplicated.
    WarnLimited("Kafka source cannot read the committed offsets", rd_kafka_err2str(err));
    return ahead;
  }
  for (int i = 0; i < known.list->cnt; ++i) {
    const rd_kafka_topic_partition_t& tp = known.list->elems[i];
    const int64_t mark = marks[{tp.topic, tp.partition}];
    // No committed offset (a partition new to the group, or a topic deleted and made again):
    // start as configured; the stored_ mark may belong to records that no longer exist.
    if (tp.err != RD_KAFKA_RESP_ERR_NO_ERROR || tp.offset < 0 || tp.offset >= mark) continue;
    rd_kafka_topic_partition_list_find(assigned, tp.topic, tp.partition)->offset = mark;
    rd_kafka_topic_partition_list_add(ahead.list, tp.topic, tp.partition)->offset = mark;
  }
  return ahead;
}

void KafkaSource::ProbeBrokers(rd_kafka_t* rk) {
  const auto now = Clock::now();
  if (now < next_probe_) return;
  next_probe_ = now + std::chrono::milliseconds(kProbeIntervalMs);
  if (!BrokerAnswers(rk, kProbeTimeoutMs)) return;
  up_ = true;
  failed_health_probes_ = 0;  // misses before the outage do not count towards the next one
  if (outage_) {
    outage_ = false;
    log::Info("Kafka source reaches a broker again", {{"source", settings_.name}});
  }
}

void KafkaSource::CheckBrokers(rd_kafka_t* rk) {
  const auto now = Clock::now();
  if (now < next_health_probe_) return;
  next_health_probe_ = now + std::chrono::milliseconds(kHealthProbeIntervalMs);
  if (BrokerAnswers(rk, kHealthProbeTimeoutMs)) {
    failed_health_probes_ = 0;
    return;
  }
  if (++failed_health_probes_ < kHealthProbeFailures) return;
  failed_health_probes_ = 0;
  NoteOutage("no broker answered " + std::to_string(kHealthProbeFailures) +
             " metadata requests in a row");
}

void KafkaSource::NoteOutage(const std::string& why) {
  up_ = false;
  if (outage_) return;
  outage_ = true;
  log::Warn("Kafka source reaches no broker; librdkafka keeps reconnecting",
            {{"source", settings_.name}, {"error", SanitizeError(why)}});
}

void KafkaSource::Close(rd_kafka_t* rk) {
  // Revokes the partitions (commits what was stored, CommitWithin) and leaves the group, within
  // kCloseTimeoutMs. When no broker answers, or the close does not finish in time, the handle
  // is destroyed without it: what was stored and not committed is fetched again and
  // deduplicated, and the group drops this member after session.timeout.ms.
  const bool closed = up_ && CloseWithin(rk, kCloseTimeoutMs);
  if (up_ && !closed) {
    log::Warn(
        "Kafka source left the consumer group without a clean close (it did not finish "
        "in time); the group drops this member after its session timeout",
        {{"source", settings_.name}, {"timeoutMs", std::to_string(kCloseTimeoutMs)}});
  }
  rd_kafka_destroy_flags(rk, closed ? 0 : RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
  log::Info("Kafka source stopped", {{"source", settings_.name}});
}

// ---- callbacks (served on the consumer thread by rd_kafka_consumer_poll) ---------------------

void KafkaSource::OnError(rd_kafka_t* /*rk*/, int err, const char* reason, void* opaque) {
  auto* self = static_cast<KafkaSource*>(opaque);
  const std::string text = reason ? reason : "";
  switch (err) {
    case RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN:
      self->NoteOutage(text);
      break;
    case RD_KAFKA_RESP_ERR__TRANSPORT:
    case RD_KAFKA_RESP_ERR__RESOLVE:
      // One broker's connection; the outage WARN covers losing all of them.
      log::Debug("Kafka source connection error",
                 {{"source", self->settings_.name}, {"error", SanitizeError(text)}});
      break;
    default:
      self->WarnLimited("Kafka client error", text);
  }
}

void KafkaSource::OnRebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err,
                              rd_kafka_topic_partition_list_t* partitions, void* opaque) {
  auto* self = static_cast<KafkaSource*>(opaque);
  const char* protocol = rd_kafka_rebalance_protocol(rk);  // "EAGER", "COOPERATIVE" or NULL
  const bool cooperative = protocol != nullptr && std::string_view(protocol) == "COOPERATIVE";
  rd_kafka_error_t* error = nullptr;
  if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
    log::Info("Kafka source assigned partitions",
              {{"source", self->settings_.name},
               {"partitions", std::to_string(partitions->cnt)},
               {"protocol", protocol != nullptr ? protocol : "NONE"}});
    PartitionList start(partitions);  // the callback's list is librdkafka's
    PartitionList ahead = self->ResumeStored(rk, start.list);
    if (cooperative) {
      error = rd_kafka_incremental_assign(rk, start.list);
    } else {
      rd_kafka_assign(rk, start.list);
    }
    if (error == nullptr && ahead.list->cnt > 0) {
      // Stored too, so a later offset-less commit (a revoke, the close) includes them.
      rd_kafka_offsets_store(rk, ahead.list);
      rd_kafka_resp_err_t c = CommitWithin(rk, ahead.list, kCommitTimeoutMs);
      if (c != RD_KAFKA_RESP_ERR_NO_ERROR) {
        self->WarnLimited(
            "Kafka source cannot commit what it stored before the rebalance (a later commit "
            "includes it)",
            rd_kafka_err2str(c));
      }
    }
  } else {
    log::Info("Kafka source partitions revoked",
              {{"source", self->settings_.name}, {"partitions", std::to_string(partitions->cnt)}});
    if (!rd_kafka_assignment_lost(rk)) {
      // Hand the next owner everything stored: a synchronous commit before letting go.
      rd_kafka_resp_err_t c = CommitWithin(rk, nullptr, kCommitTimeoutMs);
      if (c != RD_KAFKA_RESP_ERR_NO_ERROR && c != RD_KAFKA_RESP_ERR__NO_OFFSET) {
        self->WarnLimited(
            "Kafka source cannot commit before a rebalance (the next owner "
            "deduplicates what it reads again)",
            rd_kafka_err2str(c));
      } else {
        // The group has what was stored: nothing of these partitions to resume later.
        for (int i = 0; i < partitions->cnt; ++i) {
          self->stored_.erase({partitions->elems[i].topic, partitions->elems[i].partition});
        }
      }
    }
    if (cooperative) {
      error = rd_kafka_incremental_unassign(rk, partitions);
    } else {
      rd_kafka_assign(rk, nullptr);
    }
  }
  if (error != nullptr) {
    self->WarnLimited("Kafka source rebalance failed", rd_kafka_error_string(error));
    rd_kafka_error_destroy(error);
  }
}

void KafkaSource::OnLog(const rd_kafka_t* /*rk*/, int level, const char* fac, const char* buf) {
  if (level <= 3) {
    log::Debug("librdkafka", {{"facility", fac ? fac : ""}, {"text", SanitizeError(buf)}});
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> KafkaHeaderStrings(
    std::span<const KafkaHeaderBytes> headers) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(headers.size());
  for (const KafkaHeaderBytes& h : headers) {
    out.emplace_back(HeaderText(h.name), h.value ? HeaderText(*h.value) : std::string());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> KafkaHeaderStrings(
    const rd_kafka_headers_t* headers) {
  return KafkaHeaderStrings(HeaderBytes(headers));
}

BrokerMessage KafkaBrokerMessage(const KafkaRecordView& record) {
  BrokerMessage out;
  if (record.value) out.body.assign(record.value->data(), record.value->size());
  out.headers = KafkaHeaderStrings(record.headers);
  if (record.key) out.record_key = HeaderText(*record.key);
  out.broker_time_ms = record.timestamp_ms;
  return out;
}

Result<std::unique_ptr<BrokerSource>> CreateKafkaSource(KafkaSourceSettings settings,
                                                        const BrokerSourceContext& context) {
  const std::string prefix = "sources." + settings.name + ".";
  if (context.intake == nullptr)
    return InvalidArgument(prefix + "type: the source needs the inbox");
  std::vector<std::string> problems;
  if (Blank(settings.bootstrap_servers)) problems.push_back("bootstrapServers: required");
  if (settings.topics.empty()) problems.push_back("topics: required (a non-empty list)");
  for (size_t i = 0; i < settings.topics.size(); ++i) {
    if (Blank(settings.topics[i])) {
      problems.push_back("topics: entry " + std::to_string(i) + " is blank");
    }
  }
  if (Blank(settings.group_id)) problems.push_back("groupId: required");
  if (settings.auto_offset_reset != "earliest" && settings.auto_offset_reset != "latest") {
    problems.push_back("autoOffsetReset: '" + settings.auto_offset_reset +
                       "' is not one of earliest, latest");
  }
  if (settings.max_poll_records < 1) {
    problems.push_back("maxPollRecords: must be at least 1 (got " +
                       std::to_string(settings.max_poll_records) + ")");
  }
  for (std::string& p : KafkaSecurityProblems({settings.security_protocol, settings.sasl_mechanism,
                                               settings.sasl_username, settings.sasl_password})) {
    problems.push_back(std::move(p));
  }
  if (!problems.empty()) return InvalidArgument(prefix + problems.front());
  Result<BrokerIntake> intake = BrokerIntake::Create("kafka", settings.name, settings.broker,
                                                     context.transforms, context.observer);
  if (!intake.ok()) return intake.status();
  return std::unique_ptr<BrokerSource>(
      new KafkaSource(std::move(settings), std::move(intake).value(), context));
}

}  // namespace queuebox::sources
