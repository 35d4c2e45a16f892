#include "sources/nats/nats_source.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"
#include "destinations/nats/nats_connect.h"
#include "destinations/nats/nats_headers.h"
#include "sources/broker_intake.h"

namespace queuebox::sources {

namespace {

std::vector<std::pair<std::string, std::string>> NatsPairs(const std::vector<NatsHeader>& headers) {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(headers.size());
  for (const NatsHeader& h : headers) {
    // Last value per name (QueueBox reference §11.3).
    if (!h.values.empty()) out.emplace_back(HeaderText(h.name), HeaderText(h.values.back()));
  }
  return out;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> NatsHeaderStrings(natsMsg* msg) {
  return NatsPairs(ReadNatsHeaders(msg));
}

namespace {

// How long one fetch waits for a first message: bounds how long Stop() waits for the thread.
constexpr int64_t kFetchWaitMs = 1000;
// The same while a batch's Store runs: bounds how long an idle stream delays that batch's acks.
constexpr int64_t kFetchWaitBehindStoreMs = 50;

std::string StatusText(natsStatus s) { return natsStatus_GetText(s); }

// The reason nats.c gives for a failed JetStream call: the status, and the JetStream error
// code when the server sent one.
std::string JsReason(natsStatus s, jsErrCode jerr) {
  std::string out = StatusText(s);
  const char* last = nats_GetLastError(nullptr);
  if (last != nullptr && *last != '\0' && out != last) out += std::string(" (") + last + ")";
  if (jerr != 0) out += " [jerr " + std::to_string(static_cast<int>(jerr)) + "]";
  return out;
}

// A stream or consumer name NATS accepts: not empty, no whitespace, no '.', '*' or '>'.
bool IsNatsName(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (c == '.' || c == '*' || c == '>' || static_cast<unsigned char>(c) <= ' ') return false;
  }
  return true;
}

// The next backoff delay after `failures` failures in a row (then one more).
int64_t NextDelayMs(int& failures) {
  int64_t delay = ReconnectDelayMs(failures, 250, 30000);
  if (failures < 30) ++failures;
  return delay;
}

// Takes a NATS message apart into what BrokerIntake reads.
BrokerMessage ToBrokerMessage(natsMsg* msg) {
  BrokerMessage out;
  const char* data = natsMsg_GetData(msg);
  int len = natsMsg_GetDataLength(msg);
  if (data != nullptr && len > 0) out.body.assign(data, static_cast<size_t>(len));
  const std::vector<NatsHeader> headers = ReadNatsHeaders(msg);
  out.headers = NatsPairs(headers);
  const NatsHeader* id = FindNatsHeader(headers, "Nats-Msg-Id");
  if (id != nullptr && !id->values.back().empty()) out.message_id = HeaderText(id->values.back());
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg) == NATS_OK) {
    out.broker_time_ms = meta->Timestamp / 1000000;  // stored time, ns since the epoch
    jsMsgMetaData_Destroy(meta);
  }
  return out;
}

class NatsSource final : public BrokerSource {
 public:
  NatsSource(NatsSourceSettings settings, BrokerSourceContext context, BrokerIntake intake)
      : settings_(std::move(settings)), context_(context), intake_(std::move(intake)) {}
  ~NatsSource() override { Stop(); }

  Status Start() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (thread_.joinable()) return Status::Ok();
    stopping_ = false;
    thread_ = std::thread([this] { Run(); });
    return Status::Ok();
  }

  void Stop() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::string component() const override { return "nats." + settings_.name; }
  bool healthy() const override { return healthy_.load(); }

 private:
  // What a round of the loop ended with.
  enum class Round { kConsumed, kBrokerDown, kStoreFailed };

  // The consuming thread: rounds until Stop(), then what was fetched is stored and settled.
  void Run();
  // Connects (when not connected) and binds the durable (when not bound); `closed`: the caller
  // saw the connection closed and settled everything fetched on it, so it is replaced.
  Status EnsureBound(bool closed);
  Status Connect();
  Status Bind();
  // A fetched batch whose Store runs on its own thread while the next batch is fetched.
  struct InFlight {
    std::vector<natsMsgList> lists;     // in stream order
    std::vector<NewInboxMessage> rows;  // read by the Store thread until `stored` is ready
    int64_t filtered = 0;
    std::future<Result<std::vector<InboxStoreOutcome>>> stored;  // invalid: no rows
    bool Storing() const {
      return stored.valid() &&
             stored.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
    }
  };
  // One fetch into `list` (empty when nothing came within `wait_ms`): kConsumed or kBrokerDown.
  Round Fetch(natsMsgList* list, int64_t wait_ms, Status* why);
  // Converts the fetched batches and starts their one Store.
  std::unique_ptr<InFlight> Begin(std::vector<natsMsgList> lists);
  // Waits for the batch's Store, then acks every message (kConsumed) or NAKs them all
  // (kStoreFailed, `why` the store's error).
  Round Settle(InFlight& batch, Status* why);
  // The consuming loop's state. One Store at a time, so stores (and acks) stay in stream order,
  // one after the other. While it runs, the loop fetches on, and what it fetched meanwhile (at
  // most max_batches_per_store batches) becomes the next Store: one commit for several batches
  // when commits are the bottleneck (fsync on), one batch per commit when they are not. Every
  // message fetched (in_flight, waiting) belongs to sub_ and nc_ and is settled through them:
  // nats.c's messages do not keep their subscription alive, so nothing may Unbind or Disconnect
  // while one is outstanding.
  struct Loop {
    std::unique_ptr<InFlight> in_flight;
    std::vector<natsMsgList> waiting;  // fetched behind in_flight, in stream order
    int waiting_count = 0;
    int broker_failures = 0, store_failures = 0;
  };
  // One fetch and what follows it; false when Stop() came during a pause.
  bool RunRound(Loop& loop);
  // Settles the batch in flight after a fetch gave `list`; false (and `list` NAKed and the
  // waiting batches dropped) when its Store failed: the caller backs off.
  bool SettleBehind(Loop& loop, natsMsgList& list, Status* store_why);
  // Stores and settles what waits behind the batch in flight (on the way down).
  void StoreWaiting(Loop& loop);
  // Destroys the waiting batches, NAKing their messages first when `nak`.
  void DropWaiting(Loop& loop, bool nak);
  // Settles the batch in flight whatever its outcome (a lost ack is redelivered).
  void SettleAnyway(Loop& loop);
  void Unbind();
  void Disconnect();
  // Waits `ms` or until Stop(); false when stopping.
  bool Pause(int64_t ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stopping_; });
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }
  std::string Reason(const std::string& text) const {
    return SanitizeError(text, static_cast<size_t>(std::max(1, context_.max_error_body_bytes)));
  }
  void BrokerDown(const Status& why);
  void BrokerUp();

  const NatsSourceSettings settings_;
  const BrokerSourceContext context_;
  const BrokerIntake intake_;

  std::mutex mu_;  // guards stopping_ and thread_ start/stop
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
  std::atomic<bool> healthy_{false};

  // Owned by the consuming thread.
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
  natsSubscription* sub_ = nullptr;
  jsAckPolicy ack_policy_ = js_AckExplicit;
  bool rebind_ = false;  // a fetch failed on a live connection: bind again once settled
  bool broker_outage_logged_ = false;
  bool store_outage_logged_ = false;
  bool ever_consumed_ = false;
  log::RateLimiter rejected_log_{std::chrono::seconds(10)};
};

void NatsSource::Run() {
  Loop loop;
  while (!stopping()) {
    if (!RunRound(loop)) break;
  }
  // Stopping: what was fetched is stored and acked (or NAKed) before the connection closes; what
  // waits behind the last Store is stored too, so nothing fetched waits for ackWait.
  SettleAnyway(loop);
  StoreWaiting(loop);
  healthy_ = false;
  Unbind();
  Disconnect();
}

bool NatsSource::RunRound(Loop& loop) {
  // Read once per round: EnsureBound tears down only a connection seen closed here, after what
  // was fetched on it is settled.
  const bool closed = nc_ != nullptr && natsConnection_Status(nc_) == NATS_CONN_STATUS_CLOSED;
  if (closed) {
    // What waited behind the store is redelivered after ackWait (its acks would go nowhere).
    SettleAnyway(loop);
    DropWaiting(loop, false);
  }
  Status bound = EnsureBound(closed);
  if (!bound.ok()) {
    SettleAnyway(loop);  // stored or NAKed; a lost ack is redelivered
    DropWaiting(loop, true);
    BrokerDown(bound);
    return Pause(NextDelayMs(loop.broker_failures));
  }
  natsMsgList list{};
  Status fetch_why;
  Round fetched = Fetch(&list, loop.in_flight ? kFetchWaitBehindStoreMs : kFetchWaitMs, &fetch_why);
  const int max_waiting = settings_.batch_size * std::max(1, settings_.max_batches_per_store);
  if (loop.in_flight && fetched == Round::kConsumed && list.Count > 0 &&
      loop.in_flight->Storing() && loop.waiting_count + list.Count < max_waiting) {
    loop.waiting_count += list.Count;
    loop.waiting.push_back(list);
    return true;  // the store still runs: fetch on
  }
  Status store_why;
  if (!SettleBehind(loop, list, &store_why)) {
    if (!store_outage_logged_) {
      store_outage_logged_ = true;
      log::Warn(
          "The NATS source cannot store into the inbox; the batch is NAKed (redelivered) "
          "and the source backs off until the database answers",
          {{"source", settings_.name}, {"reason", Reason(store_why.message())}});
    }
    return Pause(NextDelayMs(loop.store_failures));
  }
  if (fetched == Round::kBrokerDown) {
    natsMsgList_Destroy(&list);
    // Fetched on the subscription a rebind replaces: stored and acked through it first.
    StoreWaiting(loop);
    if (rebind_) {
      rebind_ = false;
      Unbind();
    }
    BrokerDown(fetch_why);
    return Pause(NextDelayMs(loop.broker_failures));
  }
  loop.broker_failures = 0;
  BrokerUp();
  if (list.Count > 0) {
    loop.waiting.push_back(list);
  } else {
    natsMsgList_Destroy(&list);
  }
  if (!loop.waiting.empty()) loop.in_flight = Begin(std::move(loop.waiting));
  loop.waiting.clear();
  loop.waiting_count = 0;
  return true;
}

bool NatsSource::SettleBehind(Loop& loop, natsMsgList& list, Status* store_why) {
  if (!loop.in_flight) return true;
  Round settled = Settle(*loop.in_flight, store_why);
  loop.in_flight.reset();
  if (settled == Round::kStoreFailed) {
    // The database is away: what was fetched behind it goes back too.
    for (int i = 0; i < list.Count; ++i) natsMsg_Nak(list.Msgs[i], nullptr);
    natsMsgList_Destroy(&list);
    DropWaiting(loop, true);
    return false;
  }
  if (loop.store_failures > 0) {
    loop.store_failures = 0;
    if (store_outage_logged_) {
      store_outage_logged_ = false;
      log::Info("The NATS source stores into the inbox again", {{"source", settings_.name}});
    }
  }
  return true;
}

void NatsSource::StoreWaiting(Loop& loop) {
  if (loop.waiting.empty()) return;
  loop.in_flight = Begin(std::move(loop.waiting));
  loop.waiting.clear();
  loop.waiting_count = 0;
  SettleAnyway(loop);
}

void NatsSource::DropWaiting(Loop& loop, bool nak) {
  for (natsMsgList& l : loop.waiting) {
    if (nak) {
      for (int i = 0; i < l.Count; ++i) natsMsg_Nak(l.Msgs[i], nullptr);
    }
    natsMsgList_Destroy(&l);
  }
  loop.waiting.clear();
  loop.waiting_count = 0;
}

void NatsSource::SettleAnyway(Loop& loop) {
  Status ignored;
  if (loop.in_flight) Settle(*loop.in_flight, &ignored);
  loop.in_flight.reset();
}

void NatsSource::BrokerDown(const Status& why) {
  healthy_ = false;
  if (broker_outage_logged_) return;
  broker_outage_logged_ = true;
  log::Warn(ever_consumed_ ? "The NATS source lost its broker; it keeps reconnecting"
                           : "The NATS source cannot consume yet; it keeps retrying",
            {{"source", settings_.name}, {"reason", Reason(why.message())}});
}

void NatsSource::BrokerUp() {
  healthy_ = true;
  if (broker_outage_logged_) {
    broker_outage_logged_ = false;
    log::Info(
        "The NATS source consumes again",
        {{"source", settings_.name}, {"stream", settings_.stream}, {"durable", settings_.durable}});
  }
  ever_consumed_ = true;
}

Status NatsSource::EnsureBound(bool closed) {
  if (closed) {
    Unbind();
    Disconnect();
  }
  if (nc_ == nullptr) {
    Status s = Connect();
    if (!s.ok()) return s;
  }
  if (sub_ == nullptr) {
    if (natsConnection_Status(nc_) != NATS_CONN_STATUS_CONNECTED) {
      return Unavailable("the NATS connection is reconnecting");
    }
    return Bind();
  }
  return Status::Ok();
}

Status NatsSource::Connect() {
  NatsConnectSettings connect;
  connect.client_name = "queuebox-source-" + settings_.name;
  connect.servers = settings_.servers;
  connect.connect_timeout_ms = 5000;
  connect.username = settings_.username;
  connect.password = settings_.password;
  connect.token = settings_.token;
  Result<natsOptions*> opts = NewNatsOptions(connect);
  if (!opts.ok()) return opts.status();
  natsStatus s = natsConnection_Connect(&nc_, *opts);
  natsOptions_Destroy(*opts);
  if (s != NATS_OK) {
    nc_ = nullptr;
    // The server list may hold credentials (nats://user:pass@host): Reason redacts.
    return Unavailable(
        Reason("cannot connect to NATS (" + settings_.servers + "): " + StatusText(s)));
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = 5000;
  s = natsConnection_JetStream(&js_, nc_, &jo);
  if (s != NATS_OK) {
    Disconnect();
    return Unavailable("cannot create a JetStream context: " + StatusText(s));
  }
  return Status::Ok();
}

Status NatsSource::Bind() {
  const std::string& stream = settings_.stream;
  const std::string& durable = settings_.durable;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  jsStreamInfo* si = nullptr;
  natsStatus s = js_GetStreamInfo(&si, js_, stream.c_str(), nullptr, &jerr);
  jsStreamInfo_Destroy(si);
  if (s == NATS_NOT_FOUND || jerr == JSStreamNotFoundErr) {
    return NotFound("sources." + settings_.name + ".stream: the JetStream stream '" + stream +
                    "' does not exist; QueueBox never creates streams, create it first");
  }
  if (s != NATS_OK) {
    return Unavailable("cannot read the JetStream stream '" + stream + "': " + JsReason(s, jerr));
  }

  jsConsumerInfo* ci = nullptr;
  jerr = static_cast<jsErrCode>(0);
  s = js_GetConsumerInfo(&ci, js_, stream.c_str(), durable.c_str(), nullptr, &jerr);
  if (s == NATS_NOT_FOUND || jerr == JSConsumerNotFoundErr) {
    jsConsumerConfig cc;
    jsConsumerConfig_Init(&cc);
    cc.Durable = durable.c_str();
    cc.AckPolicy = js_AckExplicit;
    cc.AckWait = settings_.ack_wait_ms * 1000000;  // ns
    cc.DeliverPolicy = js_DeliverAll;
    // Room for a full batch per replica (the server's default is 1000 unacknowledged).
    cc.MaxAckPending = std::max<int64_t>(1000, 4 * static_cast<int64_t>(settings_.batch_size));
    if (settings_.filter_subject) cc.FilterSubject = settings_.filter_subject->c_str();
    jerr = static_cast<jsErrCode>(0);
    s = js_AddConsumer(&ci, js_, stream.c_str(), &cc, nullptr, &jerr);
    if (s != NATS_OK) {
      // Another replica may have created it meanwhile: bind to that one.
      jsErrCode again = static_cast<jsErrCode>(0);
      if (js_GetConsumerInfo(&ci, js_, stream.c_str(), durable.c_str(), nullptr, &again) !=
          NATS_OK) {
        return Unavailable("cannot create the durable consumer '" + durable +
                           "' on the JetStream stream '" + stream + "': " + JsReason(s, jerr));
      }
    } else {
      log::Info("The NATS source created its durable pull consumer",
                {{"source", settings_.name}, {"stream", stream}, {"durable", durable}});
    }
  } else if (s != NATS_OK) {
    return Unavailable("cannot read the durable consumer '" + durable +
                       "' of the JetStream stream '" + stream + "': " + JsReason(s, jerr));
  }
  std::string filter;
  if (ci->Config != nullptr) {
    if (ci->Config->DeliverSubject != nullptr && *ci->Config->DeliverSubject != '\0') {
      jsConsumerInfo_Destroy(ci);
      return FailedPrecondition("sources." + settings_.name + ".durable: the consumer '" + durable +
                                "' of the JetStream stream '" + stream +
                                "' is a push consumer; QueueBox needs a pull consumer");
    }
    ack_policy_ = ci->Config->AckPolicy;
    if (ci->Config->FilterSubject != nullptr) filter = ci->Config->FilterSubject;
  }
  jsConsumerInfo_Destroy(ci);
  if (settings_.filter_subject && *settings_.filter_subject != filter) {
    log::Warn(
        "The durable consumer exists with another filter subject; its own configuration "
        "is used",
        {{"source", settings_.name}, {"durable", durable}, {"filterSubject", filter}});
  }

  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Consumer = durable.c_str();
  jerr = static_cast<jsErrCode>(0);
  s = js_PullSubscribe(&sub_, js_, filter.empty() ? nullptr : filter.c_str(), durable.c_str(),
                       nullptr, &so, &jerr);
  if (s != NATS_OK) {
    sub_ = nullptr;
    return Unavailable("cannot bind to the durable consumer '" + durable +
                       "' of the JetStream stream '" + stream + "': " + JsReason(s, jerr));
  }
  return Status::Ok();
}

NatsSource::Round NatsSource::Fetch(natsMsgList* list, int64_t wait_ms, Status* why) {
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = natsSubscription_Fetch(list, sub_, settings_.batch_size, wait_ms, &jerr);
  if (s == NATS_TIMEOUT) {
    natsMsgList_Destroy(list);
    *list = natsMsgList{};
    if (natsConnection_Status(nc_) != NATS_CONN_STATUS_CONNECTED) {
      *why = Unavailable("the NATS connection is reconnecting");
      return Round::kBrokerDown;
    }
    return Round::kConsumed;  // nothing to consume
  }
  if (s != NATS_OK) {
    natsMsgList_Destroy(list);
    *list = natsMsgList{};
    *why = Unavailable("fetching from the durable consumer '" + settings_.durable +
                       "' of the JetStream stream '" + settings_.stream +
                       "' failed: " + JsReason(s, jerr));
    // Bind again next round: it checks the stream and the consumer (a deleted one is created).
    // Not here: the batch in flight still acks through this subscription.
    if (natsConnection_Status(nc_) == NATS_CONN_STATUS_CONNECTED) rebind_ = true;
    return Round::kBrokerDown;
  }
  return Round::kConsumed;
}

std::unique_ptr<NatsSource::InFlight> NatsSource::Begin(std::vector<natsMsgList> lists) {
  auto batch = std::make_unique<InFlight>();
  batch->lists = std::move(lists);
  size_t count = 0;
  for (const natsMsgList& list : batch->lists) count += static_cast<size_t>(list.Count);
  batch->rows.reserve(count);
  for (const natsMsgList& list : batch->lists) {
    for (int i = 0; i < list.Count; ++i) {
      std::optional<NewInboxMessage> row = intake_.Receive(ToBrokerMessage(list.Msgs[i]));
      if (row) {
        batch->rows.push_back(std::move(*row));
      } else {
        ++batch->filtered;
      }
    }
  }
  if (!batch->rows.empty()) {
    InboxIntake* intake = context_.intake;
    const std::vector<NewInboxMessage>* rows = &batch->rows;
    batch->stored = std::async(std::launch::async, [intake, rows] { return intake->Store(*rows); });
  }
  return batch;
}

NatsSource::Round NatsSource::Settle(InFlight& batch, Status* why) {
  auto each_message = [&batch](auto&& f) {
    for (natsMsgList& list : batch.lists) {
      for (int i = 0; i < list.Count; ++i) f(list.Msgs[i]);
    }
  };
  auto destroy = [&batch] {
    for (natsMsgList& list : batch.lists) natsMsgList_Destroy(&list);
    batch.lists.clear();
  };
  if (batch.stored.valid()) {
    Result<std::vector<InboxStoreOutcome>> stored = batch.stored.get();
    if (!stored.ok()) {
      // Nothing was stored: redeliver the whole batch at once.
      if (context_.observer != nullptr) {
        for (size_t i = 0; i < batch.rows.size(); ++i) {
          context_.observer->OnInboxRejection("storage_failed");
        }
      }
      each_message([](natsMsg* m) { natsMsg_Nak(m, nullptr); });
      destroy();
      *why = stored.status();
      return Round::kStoreFailed;
    }
    for (const InboxStoreOutcome& o : *stored) {
      if (o.kind != InboxStoreOutcome::Kind::kRejected) continue;
      int64_t suppressed = 0;
      if (rejected_log_.Allow(&suppressed)) {
        log::Warn("The inbox refused a NATS message; it is acknowledged and dropped",
                  {{"source", settings_.name},
                   {"reason", Reason(o.error.message())},
                   {"suppressed", std::to_string(suppressed)}});
      }
    }
    intake_.Count(context_.observer, *stored, batch.filtered);
  } else {
    intake_.Count(context_.observer, {}, batch.filtered);
  }

  // Acknowledge only now: every row (or its duplicate/filtered/rejected outcome) committed. A
  // lost ack means a redelivery after ackWait, which the inbox key drops.
  if (ack_policy_ == js_AckAll) {
    natsMsg* last = nullptr;
    each_message([&last](natsMsg* m) { last = m; });
    if (last != nullptr) natsMsg_Ack(last, nullptr);
  } else if (ack_policy_ == js_AckExplicit) {
    each_message([](natsMsg* m) { natsMsg_Ack(m, nullptr); });
  }
  destroy();
  return Round::kConsumed;
}

void NatsSource::Unbind() {
  // Destroy only: Unsubscribe would delete a consumer the library created (never ours, but the
  // durable is shared by replicas and must outlive every one of them).
  if (sub_ != nullptr) natsSubscription_Destroy(sub_);
  sub_ = nullptr;
}

void NatsSource::Disconnect() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  js_ = nullptr;
  if (nc_ != nullptr) {
    natsConnection_Close(nc_);
    natsConnection_Destroy(nc_);
  }
  nc_ = nullptr;
}

}  // namespace

Result<std::unique_ptr<BrokerSource>> CreateNatsSource(NatsSourceSettings settings,
                                                       const BrokerSourceContext& context) {
  const std::string prefix = "sources." + settings.name + ".";
  if (context.intake == nullptr) return InvalidArgument(prefix + "type: the inbox is required");
  if (SplitNatsServers(settings.servers).empty()) {
    return InvalidArgument(prefix + "servers: needs at least one nats:// URL");
  }
  if (!IsNatsName(settings.stream)) {
    return InvalidArgument(prefix +
                           "stream: a JetStream stream name is required (no spaces, "
                           "'.', '*' or '>')");
  }
  if (!IsNatsName(settings.durable)) {
    return InvalidArgument(prefix +
                           "durable: a consumer name is required (no spaces, '.', '*' "
                           "or '>')");
  }
  if (settings.filter_subject && settings.filter_subject->empty()) {
    return InvalidArgument(prefix + "filterSubject: must not be empty");
  }
  if (settings.batch_size <= 0) return InvalidArgument(prefix + "batchSize: must be at least 1");
  if (settings.ack_wait_ms <= 0) {
    return InvalidArgument(prefix + "ackWaitMs: must be greater than 0");
  }
  if (settings.username.has_value() != settings.password.has_value()) {
    return InvalidArgument(prefix + (settings.username ? "password" : "username") +
                           ": username and password go together");
  }
  if (settings.token && settings.username) {
    return InvalidArgument(prefix + "token: use either token or username and password, not both");
  }
  Result<BrokerIntake> intake = BrokerIntake::Create("nats", settings.name, settings.broker,
                                                     context.transforms, context.observer);
  if (!intake.ok()) return intake.status();
  return std::unique_ptr<BrokerSource>(
      new NatsSource(std::move(settings), context, std::move(intake).value()));
}

}  // namespace queuebox::sources
