#include "destinations/nats/nats_destination.h"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/log.h"
#include "destinations/nats/nats_connect.h"
#include "destinations/nats/nats_headers.h"

namespace queuebox {
namespace {

using Clock = std::chrono::steady_clock;
// How long past timeoutMs a batch still waits for nats.c's per-message timeouts.
constexpr std::chrono::milliseconds kPubAckGrace{1000};

std::string StatusText(natsStatus s) { return natsStatus_GetText(s); }

// Whose fault a failed NATS call is (issue 17 item 1; docs/guarantees.md §8). The destination's
// (Outcome::Unavailable: the row is released, no attempt spent) when the client has no working
// connection: closed, disconnected or reconnecting, no server reachable, not connected yet, an
// I/O, TLS or authentication failure, a stale connection, a full reconnect buffer, draining.
// Everything else is the message's (Outcome::Retry: an attempt spent, dead at maxAttempts):
// NATS_MAX_PAYLOAD (larger than the server's max_payload), NATS_INVALID_SUBJECT, NATS_INVALID_ARG,
// NATS_NOT_PERMITTED (the account may not publish to that subject), and any other status.
// NATS_TIMEOUT and NATS_NO_RESPONDERS depend on more than the status: the PubAck wait and the
// flush check the connection, JetStreamOut asks JetStream.
bool IsOutageStatus(natsStatus s) {
  switch (s) {
    case NATS_IO_ERROR:
    case NATS_CONNECTION_CLOSED:
    case NATS_NO_SERVER:
    case NATS_STALE_CONNECTION:
    case NATS_SECURE_CONNECTION_WANTED:
    case NATS_SECURE_CONNECTION_REQUIRED:
    case NATS_CONNECTION_DISCONNECTED:
    case NATS_CONNECTION_AUTH_FAILED:
    case NATS_INSUFFICIENT_BUFFER:
    case NATS_SSL_ERROR:
    case NATS_NOT_YET_CONNECTED:
    case NATS_DRAINING:
      return true;
    default:
      return false;
  }
}

// An error PubAck (the stream's leader answered -ERR with a JetStream error code). The
// destination's fault: JetStream unavailable, not enabled, without a leader or peers, the stream
// offline, the server out of storage, memory or resources. The message's fault: every rule of
// the stream (10054 message larger than max_msg_size, 10077 store failed, e.g. "maximum
// messages exceeded" with discard new, 10053 limits, 10109 sealed, 10060/10063/10070/10071
// expectations not met) and any code not listed here.
bool IsOutageJsError(int code) {
  switch (code) {
    case JSClusterNoPeersErr:            // 10005
    case JSClusterNotAvailErr:           // 10008
    case JSClusterNotLeaderErr:          // 10009
    case JSInsufficientResourcesErr:     // 10023
    case JSMemoryResourcesExceededErr:   // 10028
    case JSNotEnabledForAccountErr:      // 10039
    case JSRaftGeneralErr:               // 10041
    case JSStorageResourcesExceededErr:  // 10047
    case JSNotEnabledErr:                // 10076
    case JSStreamOfflineErr:             // 10118
      return true;
    default:
      return false;
  }
}

}  // namespace

// What nats.c's callbacks touch. They run on the library's callback thread, after
// natsConnection_Close has returned (a Close posts "disconnected", then "closed", last), so this
// outlives the Connection until the closed callback ran (issue 17: a destination torn down while
// its disconnected callback was still queued wrote into freed memory).
struct NatsConnectionSignals {
  // False until a server answered once: nats.c then buffers publishes through a reconnect; before
  // that, batches fail at once instead of waiting timeoutMs for acks that cannot come.
  std::atomic<bool> connected_once{false};
  // Connections lost so far: a PubAck or flush that timed out across a loss is an outage.
  std::atomic<uint64_t> disconnects{0};
  std::mutex mu;
  std::condition_variable cv;
  bool closed = false;     // guarded by mu: the closed callback ran (no callback comes after it)
  std::string last_error;  // guarded by mu: why the connection last failed, nats.c's text

  // Keeps what nats.c last saw go wrong on `nc` (refused credentials, a refused connection),
  // with nats.c's own text. Only on nats.c's callback thread: elsewhere its threads may rewrite
  // that text's buffer after natsConnection_GetLastError returns.
  void NoteError(natsConnection* nc) {
    const char* text = nullptr;
    natsStatus s = natsConnection_GetLastError(nc, &text);
    Note(s, text != nullptr && *text != '\0' ? text : natsStatus_GetText(s),
         /*over_known=*/s != NATS_NO_SERVER);
  }
  // The same from any thread, with the status's static text: it replaces a known cause only
  // with refused credentials, the most specific one.
  void NoteStatus(natsConnection* nc) {
    const char* ignored = nullptr;
    natsStatus s = natsConnection_GetLastError(nc, &ignored);
    Note(s, natsStatus_GetText(s), /*over_known=*/s == NATS_CONNECTION_AUTH_FAILED);
  }
  // nats.c keeps either the server's -ERR ("Authorization Violation") or, when it read the close
  // before the -ERR, its own status text: one cause, one wording for the operator.
  void Note(natsStatus s, std::string why, bool over_known) {
    if (s == NATS_OK) return;
    if (s == NATS_CONNECTION_AUTH_FAILED) why = "the server refused the credentials (" + why + ")";
    std::lock_guard<std::mutex> lock(mu);
    if (!over_known && !last_error.empty()) return;
    last_error = std::move(why);
  }
  std::string LastError() {
    std::lock_guard<std::mutex> lock(mu);
    return last_error;
  }
  // ": <why>" for a message about a connection that is down, or "" when nothing was seen.
  std::string Why() {
    std::string e = LastError();
    return e.empty() ? e : ": " + e;
  }
};

struct NatsDestination::Connection {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  std::shared_ptr<NatsConnectionSignals> signals = std::make_shared<NatsConnectionSignals>();
  bool connected() const { return natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED; }
  // ": <why>" for a connection that is down. Asks nats.c first: while a connection that never
  // came up retries in the background, no callback reports the attempts that failed.
  std::string Why() {
    if (nc != nullptr) signals->NoteStatus(nc);
    return signals->Why();
  }
  ~Connection() {
    if (js != nullptr) jsCtx_Destroy(js);
    if (nc == nullptr) return;  // never created: no callback was registered with nats.c
    natsConnection_Close(nc);
    bool closed = false;
    {
      std::unique_lock<std::mutex> lock(signals->mu);
      closed =
          signals->cv.wait_for(lock, std::chrono::seconds(10), [&] { return signals->closed; });
    }
    // A callback thread stuck for 10 s: keep the signals alive for ever rather than let a late
    // callback write into freed memory (a few bytes, once per such teardown).
    if (!closed) new std::shared_ptr<NatsConnectionSignals>(signals);  // NOLINT: deliberate leak
    natsConnection_Destroy(nc);
  }
};

// What a PubAck handler call said beside its outcome; PublishJetStream decides after the wait.
enum class AckNote {
  kNone,
  kNoResponders,  // no responders: no stream covers the subject, or JetStream is out
  kTimedOut,      // nats.c's per-message timeout (MaxWait): an outage if the connection was lost
};

struct NatsDestination::Batch {
  explicit Batch(size_t n) : outcomes(n), notes(n, AckNote::kNone) {}
  std::condition_variable cv;
  std::vector<std::optional<Outcome>> outcomes;  // guarded by AckRegistry::mu
  std::vector<AckNote> notes;                    // guarded by AckRegistry::mu
  size_t pending = 0;                            // guarded by AckRegistry::mu
};

struct NatsDestination::AckRegistry {
  std::mutex mu;                                         // guards inflight and every Batch's fields
  std::map<std::string, std::deque<InFlight>> inflight;  // Nats-Msg-Id -> waiting messages

  // Settles the oldest in-flight message with this Nats-Msg-Id (none: its batch gave up on it).
  void Settle(const std::string& msg_id, Outcome outcome, AckNote note = AckNote::kNone) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = inflight.find(msg_id);
    if (it == inflight.end() || it->second.empty()) return;
    InFlight f = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) inflight.erase(it);
    if (!f.batch->outcomes[f.index]) {
      f.batch->outcomes[f.index] = std::move(outcome);
      f.batch->notes[f.index] = note;
      --f.batch->pending;
    }
    // The publishing worker waits for the whole batch: wake it once, not once per PubAck.
    if (f.batch->pending == 0) f.batch->cv.notify_all();
  }
};

// The PubAck handler's closure. nats.c runs the handler on the reply subscription's thread, and
// destroying the subscription does not wait for a handler already running, so no closure is ever
// freed (one small object per connection made); the handler reaches the registry only while the
// destination still holds it.
struct NatsDestination::AckTarget {
  std::weak_ptr<AckRegistry> registry;
  int max_error_body_bytes = 0;
  int64_t timeout_ms = 0;

  static AckTarget* New(std::weak_ptr<AckRegistry> registry, int max_chars, int64_t timeout_ms) {
    static std::mutex mu;
    static auto* all = new std::vector<std::unique_ptr<AckTarget>>();  // reachable: not a leak
    auto target = std::make_unique<AckTarget>();
    target->registry = std::move(registry);
    target->max_error_body_bytes = max_chars;
    target->timeout_ms = timeout_ms;
    std::lock_guard<std::mutex> lock(mu);
    all->push_back(std::move(target));
    return all->back().get();
  }

  void OnPubAck(natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae) const {
    std::shared_ptr<AckRegistry> acks = registry.lock();
    if (!acks) return;  // the destination is gone
    // The id this destination set, by exact name (nats_headers.h: not nats.c's prefix lookup).
    const std::vector<NatsHeader> headers = ReadNatsHeaders(msg);
    const NatsHeader* id = FindNatsHeader(headers, "Nats-Msg-Id");
    const std::string msg_id = id != nullptr ? id->values.back() : "";
    if (pa != nullptr) {
      acks->Settle(msg_id, Outcome::Delivered());
      return;
    }
    const std::string subject = natsMsg_GetSubject(msg) ? natsMsg_GetSubject(msg) : "";
    const int max_chars = max_error_body_bytes;
    if (pae != nullptr && pae->Err == NATS_NO_RESPONDERS) {
      acks->Settle(
          msg_id,
          Outcome::Retry(FailureReason(
              "no JetStream stream covers subject '" + subject + "' (no responders)", max_chars)),
          AckNote::kNoResponders);
      return;
    }
    if (pae != nullptr && pae->Err == NATS_TIMEOUT) {
      acks->Settle(
          msg_id, Outcome::Retry("no JetStream PubAck within " + std::to_string(timeout_ms) + "ms"),
          AckNote::kTimedOut);
      return;
    }
    std::string reason = "JetStream publish to subject '" + subject + "' failed";
    bool outage = false;
    if (pae != nullptr) {
      outage = IsOutageStatus(pae->Err) || IsOutageJsError(pae->ErrCode);
      reason += ": " + StatusText(pae->Err);
      if (pae->ErrText != nullptr) reason += std::string(" (") + pae->ErrText + ")";
      if (pae->ErrCode != 0) reason += " [jerr " + std::to_string(pae->ErrCode) + "]";
    }
    reason = FailureReason(reason, max_chars);
    acks->Settle(msg_id, outage ? Outcome::Unavailable(std::move(reason))
                                : Outcome::Retry(std::move(reason)));
  }
};

// ---- option table ------------------------------------------------------------------------------

std::vector<std::string> ValidateNatsBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  ValidateAddressKeys(block, "subject", "subjectFrom", &problems);
  bool user = OptionalString(block, "username").has_value();
  bool password = OptionalString(block, "password").has_value();
  bool token = OptionalString(block, "token").has_value();
  if (user && !password) problems.push_back("password: required when username is set");
  if (password && !user) problems.push_back("username: required when password is set");
  if (token && (user || password)) {
    problems.push_back("token: use either token or username and password, not both");
  }
  if (auto servers = OptionalString(block, "servers");
      servers && SplitNatsServers(*servers).empty()) {
    problems.push_back("servers: needs at least one nats:// URL");
  }
  return problems;
}

DestinationType NatsDestinationType() {
  using S = NatsDestinationSettings;
  OptionTable<S> options = {
      opt::Text("servers", &S::servers, nullptr, "Comma-separated nats:// server URLs").Required(),
  };
  AddAddressOptions(options, "subject", "subjectFrom", "NATS subject", &S::subject,
                    &S::subject_from);
  options.Add(opt::Flag("jetStream", &S::jet_stream, true,
                        "Publish to JetStream and wait for the PubAck (false: core NATS + flush)"));
  options.Add(
      opt::Millis("timeoutMs", &S::timeout_ms, 30000, "PubAck (or flush) wait in ms").Min(1));
  options.Add(opt::Text("username", &S::username, nullptr, "User name (with password)"));
  options.Add(opt::Secret("password", &S::password, "Password (with username; secret)"));
  options.Add(opt::Secret("token", &S::token, "Token (instead of username/password; secret)"));
  return MakeDestinationType<S>(
      "nats", options, ValidateNatsBlock,
      [](S s, const DestinationConfig& config,
         const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
        s.static_headers = config.headers;
        s.max_error_body_bytes = context.max_error_body_bytes;
        return AsDestination(NatsDestination::Create(std::move(s)));
      });
}

// ---- destination -------------------------------------------------------------------------------

NatsDestination::NatsDestination(NatsDestinationSettings settings, AddressSpec subject)
    : settings_(std::move(settings)),
      subject_(std::move(subject)),
      acks_(std::make_shared<AckRegistry>()) {}

NatsDestination::~NatsDestination() { Stop(); }

Result<std::unique_ptr<NatsDestination>> NatsDestination::Create(NatsDestinationSettings s) {
  const std::string prefix = "destinations." + s.name + ".";
  nlohmann::json block = {{"servers", s.servers}, {"subject", s.subject}};
  if (s.subject_from) block["subjectFrom"] = *s.subject_from;
  if (s.username) block["username"] = *s.username;
  if (s.password) block["password"] = *s.password;
  if (s.token) block["token"] = *s.token;
  std::vector<std::string> problems = ValidateNatsBlock(block);
  if (s.timeout_ms <= 0) problems.push_back("timeoutMs: must be greater than 0");
  // Static headers travel as "name: value" lines as the row's do: one NATS cannot carry is a
  // configuration error at the start, not a dead row per message.
  const HeaderList statics(s.static_headers.begin(), s.static_headers.end());
  for (const Status& checked : {CheckHeaderNames(statics), CheckHeaderListText(statics)}) {
    if (!checked.ok()) problems.push_back(checked.message());
  }
  if (!problems.empty()) return InvalidArgument(prefix + problems.front());
  Result<AddressSpec> subject =
      AddressSpec::Create(s.name, "subject", s.subject, "subjectFrom", s.subject_from);
  if (!subject.ok()) return subject.status();
  return std::unique_ptr<NatsDestination>(
      new NatsDestination(std::move(s), std::move(subject).value()));
}

Result<std::shared_ptr<NatsDestination::Connection>> NatsDestination::Connect() {
  NatsConnectSettings connect;
  connect.client_name = "queuebox-" + settings_.name;
  connect.servers = settings_.servers;
  connect.connect_timeout_ms = std::min<int64_t>(settings_.timeout_ms, 10000);
  connect.username = settings_.username;
  connect.password = settings_.password;
  connect.token = settings_.token;
  Result<natsOptions*> made = NewNatsOptions(connect);
  if (!made.ok()) return made.status();
  natsOptions* opts = *made;
  natsStatus s = NATS_OK;
  auto conn = std::make_shared<Connection>();
  // A server that is not up yet does not fail the start: the connection keeps trying in the
  // background (same backoff) and the destination reports not ready meanwhile.
  if (s == NATS_OK) {
    s = natsOptions_SetRetryOnFailedConnect(
        opts, true,
        [](natsConnection*, void* closure) {
          static_cast<NatsConnectionSignals*>(closure)->connected_once = true;
        },
        conn->signals.get());
  }
  if (s == NATS_OK) {
    s = natsOptions_SetDisconnectedCB(
        opts,
        [](natsConnection* nc, void* closure) {
          auto* signals = static_cast<NatsConnectionSignals*>(closure);
          ++signals->disconnects;
          signals->NoteError(nc);
        },
        conn->signals.get());
  }
  if (s == NATS_OK) {
    s = natsOptions_SetClosedCB(
        opts,
        [](natsConnection*, void* closure) {
          auto* signals = static_cast<NatsConnectionSignals*>(closure);
          std::lock_guard<std::mutex> lock(signals->mu);
          signals->closed = true;
          signals->cv.notify_all();
        },
        conn->signals.get());
  }
  if (s == NATS_OK) s = natsConnection_Connect(&conn->nc, opts);
  natsOptions_Destroy(opts);
  if (s == NATS_OK) {
    conn->signals->connected_once = true;
    down_logged_ = false;
  } else if (s == NATS_NOT_YET_CONNECTED) {
    conn->signals->NoteStatus(conn->nc);
    s = NATS_OK;
  }
  // Once per outage, whether nats.c keeps trying in the background (NATS_NOT_YET_CONNECTED) or
  // gave up at once (a refused token may answer either way): the next batch connects again.
  if (!conn->signals->connected_once && !down_logged_) {
    down_logged_ = true;
    const std::string reason = s == NATS_OK ? conn->signals->LastError() : StatusText(s);
    log::Warn(
        "The NATS destination cannot connect yet; QueueBox starts without it and keeps "
        "connecting in the background",
        {{"destination", settings_.name},
         {"servers", FailureReason(settings_.servers, settings_.max_error_body_bytes)},
         {"reason", FailureReason(reason, settings_.max_error_body_bytes)}});
  }
  if (s != NATS_OK) {
    // The server list may hold credentials (nats://user:pass@host): the reason is redacted.
    return Unavailable(
        FailureReason("cannot connect to NATS (" + settings_.servers + "): " + StatusText(s),
                      settings_.max_error_body_bytes));
  }
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.PublishAsync.AckHandler = [](jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae,
                                  void* closure) {
    static_cast<const AckTarget*>(closure)->OnPubAck(msg, pa, pae);
    natsMsg_Destroy(msg);
  };
  jo.PublishAsync.AckHandlerClosure =
      AckTarget::New(acks_, settings_.max_error_body_bytes, settings_.timeout_ms);
  jo.PublishAsync.MaxPending = 8192;
  jo.Wait = settings_.timeout_ms;
  if (settings_.jet_stream) {
    s = natsConnection_JetStream(&conn->js, conn->nc, &jo);
    if (s != NATS_OK) return Unavailable("cannot create a JetStream context: " + StatusText(s));
  }
  return conn;
}

Status NatsDestination::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_) return Status::Ok();
  Result<std::shared_ptr<Connection>> c = Connect();
  if (!c.ok()) {
    return Unavailable("destinations." + settings_.name + ": " + c.status().message());
  }
  conn_ = std::move(c).value();
  return Status::Ok();
}

Result<std::shared_ptr<NatsDestination::Connection>> NatsDestination::CurrentConnection() {
  std::lock_guard<std::mutex> lock(mu_);
  // A connection that came up ended the outage (closed since or not): the next one logs again.
  if (conn_ && conn_->signals->connected_once) down_logged_ = false;
  if (conn_ && natsConnection_Status(conn_->nc) != NATS_CONN_STATUS_CLOSED) {
    if (!conn_->signals->connected_once) {
      return Unavailable(FailureReason("NATS destination '" + settings_.name +
                                           "' is not connected yet (connecting to " +
                                           settings_.servers + " in the background)" + conn_->Why(),
                                       settings_.max_error_body_bytes));
    }
    return conn_;
  }
  // Never started, or closed for good: connect again (the reconnect loop covers the rest).
  conn_.reset();
  Result<std::shared_ptr<Connection>> c = Connect();
  if (!c.ok()) return c.status();
  conn_ = std::move(c).value();
  return conn_;
}

namespace {

// Why a message can never be published (NATS headers are lines of text), or OK: the caller
// rejects it, so it goes dead at once and the rest of the batch is published.
Status Unsendable(const std::string& subject, const OutboundMessage& message,
                  const HeaderList& headers) {
  Status s = CheckNatsSubject(subject);
  if (s.ok()) s = CheckHeaderListText(headers);
  if (s.ok()) s = CheckHeaderNames(headers);
  if (s.ok()) s = CheckHeaderText("topic", message.row->topic);
  if (s.ok() && message.row->key) s = CheckHeaderText("key", *message.row->key);
  if (s.ok()) s = CheckBodyIsJson(message);
  return s;
}

}  // namespace

natsStatus SetNatsHeaders(natsMsg* m, const HeaderList& headers, const OutboxRow& row,
                          bool jet_stream) {
  natsStatus s = NATS_OK;
  for (const auto& [k, v] : headers) {
    if (s == NATS_OK) s = natsMsgHeader_Set(m, k.c_str(), v.c_str());
  }
  if (s == NATS_OK) s = natsMsgHeader_Set(m, "x-message-id", row.id.c_str());
  if (s == NATS_OK) s = natsMsgHeader_Set(m, "x-topic", row.topic.c_str());
  if (s == NATS_OK) s = natsMsgHeader_Set(m, "x-attempt", std::to_string(row.attempt).c_str());
  if (s == NATS_OK && row.key) s = natsMsgHeader_Set(m, "x-message-key", row.key->c_str());
  if (s == NATS_OK && jet_stream) s = natsMsgHeader_Set(m, "Nats-Msg-Id", row.id.c_str());
  return s;
}

namespace {

// A message with the headers of §9.1; nullptr + reason on failure.
natsMsg* BuildMessage(const std::string& subject, const OutboundMessage& message,
                      const HeaderList& headers, bool jet_stream, std::string* reason) {
  const OutboxRow& row = *message.row;
  const std::string_view body = message.body();
  natsMsg* m = nullptr;
  natsStatus s =
      natsMsg_Create(&m, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
  if (s == NATS_OK) s = SetNatsHeaders(m, headers, row, jet_stream);
  if (s != NATS_OK) {
    *reason = "cannot build the NATS message: " + StatusText(s);
    natsMsg_Destroy(m);
    return nullptr;
  }
  return m;
}

}  // namespace

void NatsDestination::PublishJetStream(Connection& conn, std::span<const OutboundMessage> batch,
                                       std::vector<std::optional<Outcome>>& outcomes) {
  auto state = std::make_shared<Batch>(batch.size());
  {
    std::lock_guard<std::mutex> lock(acks_->mu);
    for (size_t i = 0; i < batch.size(); ++i) state->outcomes[i] = outcomes[i];
  }
  const uint64_t disconnects = conn.signals->disconnects.load();
  bool queued = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!outcomes[i]) {
      PublishAsync(conn, batch[i], i, state);
      queued = true;
    }
  }
  // nats.c's flusher thread waits 1 ms before each write, and this batch waits for its PubAcks:
  // a PING writes the queued messages now, in one write. Its result is not the batch's: each
  // message is settled by its own PubAck (or its timeout) below.
  if (queued && conn.connected()) (void)natsConnection_FlushTimeout(conn.nc, settings_.timeout_ms);
  // A PubAck that did not come while the connection was lost (or lost meanwhile) is an outage;
  // one that did not come over a connection that stayed up is not known to be (Retry).
  auto lost = [&] { return !conn.connected() || conn.signals->disconnects.load() != disconnects; };
  AwaitPubAcks(state, outcomes, lost);
  std::vector<AckNote> notes;
  {
    std::lock_guard<std::mutex> lock(acks_->mu);
    notes = state->notes;
  }
  const bool any_no_responders =
      std::find(notes.begin(), notes.end(), AckNote::kNoResponders) != notes.end();
  const bool any_timed_out =
      std::find(notes.begin(), notes.end(), AckNote::kTimedOut) != notes.end();
  const bool jetstream_out = any_no_responders && JetStreamOut(conn);
  const bool connection_lost = any_timed_out && lost();
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (!outcomes[i]) continue;
    if (notes[i] == AckNote::kNoResponders && jetstream_out) {
      // No responders because JetStream itself does not answer (the server restarting,
      // JetStream or the stream's leader down): the destination's fault, not a subject without
      // a stream.
      outcomes[i] = Outcome::Unavailable(
          FailureReason("JetStream does not answer (no responders for subject of message " +
                            batch[i].row->id + ")",
                        settings_.max_error_body_bytes));
    } else if (notes[i] == AckNote::kTimedOut && connection_lost) {
      outcomes[i] = Outcome::Unavailable(outcomes[i]->error + " (the NATS connection is lost)");
    }
  }
}

void NatsDestination::PublishAsync(Connection& conn, const OutboundMessage& message, size_t index,
                                   const std::shared_ptr<Batch>& state) {
  const int max_chars = settings_.max_error_body_bytes;
  const OutboxRow& row = *message.row;
  if (message.cancel_requested()) {  // lost while the messages before it were handed over
    std::lock_guard<std::mutex> lock(acks_->mu);
    state->outcomes[index] = Outcome::Cancelled();
    return;
  }
  TemplateContext ctx = TemplateContext::ForRow(row);
  std::string subject = subject_.Render(row, ctx);
  std::optional<Outcome> failed;
  if (subject.empty()) {
    failed = Outcome::Retry("NATS destination '" + settings_.name + "' rendered an empty subject");
  }
  Result<HeaderList> headers = MergeMessageHeaders(settings_.static_headers, message);
  if (!failed) {
    Status sendable = headers.ok() ? Unsendable(subject, message, *headers) : headers.status();
    if (!sendable.ok()) failed = Outcome::Reject(FailureReason(sendable.message(), max_chars));
  }
  std::string reason;
  natsMsg* m = failed ? nullptr : BuildMessage(subject, message, *headers, true, &reason);
  if (!failed && m == nullptr) failed = Outcome::Retry(FailureReason(reason, max_chars));
  if (failed) {
    std::lock_guard<std::mutex> lock(acks_->mu);
    state->outcomes[index] = std::move(failed);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(acks_->mu);
    acks_->inflight[row.id].push_back(InFlight{state, index});
    ++state->pending;
  }
  // The PubAck deadline is per message (nats.c settles it with NATS_TIMEOUT): a slow PubAck
  // costs only its own message, never the other batches in flight on this connection.
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MaxWait = settings_.timeout_ms;
  natsStatus s = js_PublishMsgAsync(conn.js, &m, &po);
  natsMsg_Destroy(m);  // no-op when the library took it
  if (s != NATS_OK) {
    std::string why = FailureReason(
        "JetStream publish to subject '" + subject + "' failed: " + StatusText(s), max_chars);
    acks_->Settle(row.id, IsOutageStatus(s) ? Outcome::Unavailable(std::move(why))
                                            : Outcome::Retry(std::move(why)));
  }
}

bool NatsDestination::AwaitPubAcks(const std::shared_ptr<Batch>& state,
                                   std::vector<std::optional<Outcome>>& outcomes,
                                   const std::function<bool()>& connection_lost) {
  // nats.c's own timeout settles each message after timeoutMs; the grace covers its timer.
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(settings_.timeout_ms) + kPubAckGrace;
  std::unique_lock<std::mutex> lock(acks_->mu);
  state->cv.wait_until(lock, deadline, [&] { return state->pending == 0; });
  bool timed_out = state->pending > 0;
  if (timed_out) {
    // Give up on the rest: drop them from the registry so a late PubAck is ignored.
    for (auto it = acks_->inflight.begin(); it != acks_->inflight.end();) {
      auto& q = it->second;
      q.erase(
          std::remove_if(q.begin(), q.end(), [&](const InFlight& f) { return f.batch == state; }),
          q.end());
      it = q.empty() ? acks_->inflight.erase(it) : std::next(it);
    }
    const bool lost = connection_lost();
    std::string why = "no JetStream PubAck within " + std::to_string(settings_.timeout_ms) +
                      "ms (gave up waiting)";
    if (lost) why += " (the NATS connection is lost)";
    for (auto& outcome : state->outcomes) {
      if (!outcome) outcome = lost ? Outcome::Unavailable(why) : Outcome::Retry(why);
    }
    state->pending = 0;
  }
  outcomes = state->outcomes;
  return timed_out;
}

void NatsDestination::PublishCore(Connection& conn, std::span<const OutboundMessage> batch,
                                  std::vector<std::optional<Outcome>>& outcomes) {
  const int max_chars = settings_.max_error_body_bytes;
  const uint64_t disconnects = conn.signals->disconnects.load();
  std::vector<size_t> published;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (outcomes[i]) continue;
    if (batch[i].cancel_requested()) {
      outcomes[i] = Outcome::Cancelled();
      continue;
    }
    const OutboxRow& row = *batch[i].row;
    TemplateContext ctx = TemplateContext::ForRow(row);
    std::string subject = subject_.Render(row, ctx);
    if (subject.empty()) {
      outcomes[i] =
          Outcome::Retry("NATS destination '" + settings_.name + "' rendered an empty subject");
      continue;
    }
    Result<HeaderList> headers = MergeMessageHeaders(settings_.static_headers, batch[i]);
    Status sendable = headers.ok() ? Unsendable(subject, batch[i], *headers) : headers.status();
    if (!sendable.ok()) {
      outcomes[i] = Outcome::Reject(FailureReason(sendable.message(), max_chars));
      continue;
    }
    std::string reason;
    natsMsg* m = BuildMessage(subject, batch[i], *headers, false, &reason);
    natsStatus s = m ? natsConnection_PublishMsg(conn.nc, m) : NATS_ERR;
    natsMsg_Destroy(m);
    if (s != NATS_OK) {
      std::string why = FailureReason(
          reason.empty() ? "NATS publish to subject '" + subject + "' failed: " + StatusText(s)
                         : reason,
          max_chars);
      outcomes[i] =
          IsOutageStatus(s) ? Outcome::Unavailable(std::move(why)) : Outcome::Retry(std::move(why));
      continue;
    }
    published.push_back(i);
  }
  if (published.empty()) return;
  natsStatus s = natsConnection_FlushTimeout(conn.nc, settings_.timeout_ms);
  // A flush that failed because the connection is gone (or timed out while it was) is an outage.
  const bool outage = s != NATS_OK && (IsOutageStatus(s) || !conn.connected() ||
                                       conn.signals->disconnects.load() != disconnects);
  for (size_t i : published) {
    if (s == NATS_OK) {
      outcomes[i] = Outcome::Delivered();
      continue;
    }
    std::string why = "NATS flush failed: " + StatusText(s) + " (within " +
                      std::to_string(settings_.timeout_ms) + "ms)";
    outcomes[i] = outage ? Outcome::Unavailable(std::move(why)) : Outcome::Retry(std::move(why));
  }
}

void NatsDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  std::vector<std::optional<Outcome>> outcomes(batch.size());
  Result<std::shared_ptr<Connection>> conn = CurrentConnection();
  if (!conn.ok()) {
    // Not connected yet, or no connection could be made: the destination's fault.
    for (auto& o : outcomes) o = Outcome::Unavailable(conn.status().message());
  } else if (!(*conn)->connected()) {
    // Reconnecting: nothing is handed to nats.c (it would buffer the messages and send them
    // after the reconnect, while their rows are pending again).
    for (auto& o : outcomes) {
      o = Outcome::Unavailable(FailureReason("NATS destination '" + settings_.name +
                                                 "' is not connected (reconnecting)" +
                                                 (*conn)->Why(),
                                             settings_.max_error_body_bytes));
    }
  } else if (settings_.jet_stream) {
    PublishJetStream(**conn, batch, outcomes);
  } else {
    PublishCore(**conn, batch, outcomes);
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    sink.Report(i, outcomes[i] ? std::move(*outcomes[i])
                               : Outcome::Retry("NATS publish was not attempted"));
  }
}

bool NatsDestination::JetStreamOut(Connection& conn) {
  if (!conn.connected()) return true;
  jsOptions o;
  jsOptions_Init(&o);
  o.Wait = std::min<int64_t>(settings_.timeout_ms, 5000);
  jsAccountInfo* info = nullptr;
  jsErrCode jerr = static_cast<jsErrCode>(0);
  natsStatus s = js_GetAccountInfo(&info, conn.js, &o, &jerr);
  if (info != nullptr) jsAccountInfo_Destroy(info);
  // Answered (even with an error such as "not enabled for account" 10039, an outage by
  // IsOutageJsError): JetStream is reachable only when the call succeeded.
  if (s == NATS_OK) return false;
  return s == NATS_NO_RESPONDERS || s == NATS_TIMEOUT || IsOutageStatus(s) || IsOutageJsError(jerr);
}

Status NatsDestination::Health() {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = conn_;
  }
  if (!c) return Unavailable("NATS destination '" + settings_.name + "' is not connected");
  natsConnStatus st = natsConnection_Status(c->nc);
  if (st == NATS_CONN_STATUS_CONNECTED) return Status::Ok();
  if (!c->signals->connected_once) {
    return Unavailable(
        FailureReason("NATS destination '" + settings_.name + "' is not connected yet" + c->Why(),
                      settings_.max_error_body_bytes));
  }
  // Closed: nats.c gave up (the server refused the credentials twice); the next batch makes a
  // new connection.
  const char* state = st == NATS_CONN_STATUS_RECONNECTING ? "reconnecting"
                      : st == NATS_CONN_STATUS_CLOSED
                          ? "not connected (closed; the next batch connects again)"
                          : "not connected";
  return Unavailable(
      FailureReason("NATS destination '" + settings_.name + "' is " + state + c->Why(),
                    settings_.max_error_body_bytes));
}

void NatsDestination::Stop() {
  std::shared_ptr<Connection> c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = std::move(conn_);
  }
}

}  // namespace queuebox
