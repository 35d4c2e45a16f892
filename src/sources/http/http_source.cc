// http_source.cc: the routes of the HTTP sources: body cap, rate limit, auth, then the intake
// pipeline under the refusal policy, then the group-committed store and the answer.
#include "sources/http/http_source.h"

#include <httplib.h>
#include <strings.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "auth/request_auth.h"
#include "auth/request_headers.h"
#include "core/log.h"
#include "core/redaction.h"
#include "sources/http/http_settings.h"
#include "sources/http/inbox_writer.h"
#include "sources/intake.h"
#include "sources/intake_parts.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

// One answer of a source route: status, JSON body (empty: none) and extra headers.
struct Answer {
  int status = 500;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

Answer Error(int status, const std::string& error) {
  return Answer{
      status, json{{"error", error}}.dump(-1, ' ', false, json::error_handler_t::replace), {}};
}

// Headers about this connection, not the message: the framing and hop-by-hop headers (the
// relay's HTTP destination would otherwise resend a stale Content-Length or Host) and the
// server's own REMOTE_*/LOCAL_* entries. They are not stored with the row.
bool ConnectionHeader(std::string_view name) {
  static const char* const kNames[] = {
      "host",        "content-length", "transfer-encoding", "connection", "keep-alive",
      "te",          "trailer",        "upgrade",           "expect",     "remote_addr",
      "remote_port", "local_addr",     "local_port"};
  for (const char* n : kNames) {
    if (name.size() == std::char_traits<char>::length(n) &&
        strncasecmp(name.data(), n, name.size()) == 0) {
      return true;
    }
  }
  return false;
}

// cpp-httplib matches route patterns as regular expressions: the route, matched literally.
std::string RegexLiteral(const std::string& route) {
  std::string out;
  for (char c : route) {
    if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

// The request as the intake pipeline reads it: every header in the server's order (a repeated
// name: the first value is read, as HeaderValue does), the body as read.
Arrival ArrivalOf(const httplib::Request& req, std::string body) {
  Arrival a;
  a.body = std::move(body);
  a.headers.reserve(req.headers.size());
  for (const auto& h : req.headers) a.headers.emplace_back(h.first, h.second);
  return a;
}

// The pipeline's rules of an http source: a fault is refused; keys from the header, then the
// expression, then the path(s) (QueueBox reference §11.1); with none of those, the provider's
// message id that `auth` names (the source's Arrival::message_id, or a path of the body).
Result<IntakeRules> HttpRules(const HttpSourceSettings& s, const RequestAuth* auth) {
  QB_ASSIGN_OR_RETURN(IntakeRules r, RulesFromKeys(s.name, s.keys, s.idempotency_key_path));
  r.policy = RefusalPolicy::kRefuse;
  r.repeated = RepeatedHeader::kFirstWins;
  r.unstored = &ConnectionHeader;
  auto plan = [](KeyPlan& p, const std::optional<std::string>& header, bool expression) {
    p.order.clear();
    if (header) {
      p.header = *header;
      p.order.push_back(KeyFrom::kHeader);
    }
    if (expression) p.order.push_back(KeyFrom::kExpression);
    if (!p.paths.empty()) p.order.push_back(KeyFrom::kPaths);
  };
  plan(r.idempotency_key, s.idempotency_key_header, s.keys.idempotency_key_expression.has_value());
  plan(r.aggregate_id, s.aggregate_id_header, true);
  plan(r.event_type, s.event_type_header, true);
  if (r.idempotency_key.paths.empty() && !s.idempotency_key_header &&
      !s.keys.idempotency_key_expression && auth != nullptr) {
    const RequestAuth::MessageIdSource provider = auth->message_id_source();
    if (!provider.headers.empty()) {
      r.idempotency_key.order = {KeyFrom::kMessageId};
    } else if (!provider.json_path.empty()) {
      QB_ASSIGN_OR_RETURN(JsonPath path, JsonPath::Compile(provider.json_path));
      r.idempotency_key.paths = {std::move(path)};
      r.idempotency_key.order = {KeyFrom::kPaths};
    }
  }
  if (r.idempotency_key.paths.empty() && !s.idempotency_key_header &&
      r.idempotency_key.order != std::vector<KeyFrom>{KeyFrom::kMessageId}) {
    return InvalidArgument("sources." + s.name +
                           ".idempotencyKeyPath: required (or idempotencyKeyHeader)");
  }
  return r;
}

}  // namespace

struct WebhookSources::Source {
  HttpSourceSettings settings;
  std::string route;
  std::unique_ptr<RequestAuth> auth;
  // The headers of the provider's message id (the idempotency key when none is configured).
  std::vector<std::string> message_id_headers;
  std::unique_ptr<RateLimiter> limiter;
  std::optional<Intake> intake;
  IntakeObserver* observer = nullptr;
  InboxWriter* writer = nullptr;
  std::function<int64_t()> now_ms;
  size_t max_body_bytes = 1048576;  // inbox.maxBodyBytes

  // The per-request lines: at most one per source per second each, so a flood of bad requests
  // (or an outage under load) cannot flood the log; the next line written says how many were
  // suppressed. `refusal_log`: 401, 422, an unreadable publish time; `storage_log`: 500.
  std::unique_ptr<log::RateLimiter> refusal_log, storage_log;

  void Reject(const char* reason) const {
    if (observer != nullptr) observer->OnInboxRejection(reason);
  }

  // Steps 1-2: the rate limit and the auth over the raw bytes; nullopt when admitted.
  std::optional<Answer> Admit(const httplib::Request& req, const std::string& body) const {
    if (limiter) {
      if (int64_t wait_s = limiter->TryAcquire(); wait_s > 0) {
        Reject("rate_limited");
        Answer a{429, "", {}};
        a.headers.emplace_back("Retry-After", std::to_string(wait_s));
        return a;
      }
    }
    if (!auth) return std::nullopt;
    Status s =
        auth->Check([&req](std::string_view name) { return HeaderValue(req, std::string(name)); },
                    body, now_ms());
    if (s.ok()) return std::nullopt;
    Reject("auth_failed");
    log::WriteLimited(*refusal_log, log::Level::kWarn, "A webhook was refused.",
                      {{"source", settings.name}, {"status", "401"}, {"reason", s.message()}});
    return Error(401, s.message());
  }

  // Step 8: stored, group-committed with the requests arriving meanwhile; this thread waits for
  // its outcome.
  Answer Store(NewInboxMessage m) const {
    std::promise<Result<InboxStoreOutcome>> promise;
    std::future<Result<InboxStoreOutcome>> future = promise.get_future();
    writer->Submit(std::move(m), [&promise](Result<InboxStoreOutcome> outcome) {
      promise.set_value(std::move(outcome));
    });
    Result<InboxStoreOutcome> outcome = future.get();
    if (!outcome.ok()) {
      Reject("storage_failed");
      log::WriteLimited(
          *storage_log, log::Level::kError, "A webhook could not be stored.",
          {{"source", settings.name}, {"reason", SanitizeError(outcome.status().ToString())}});
      return Error(500, "Storage failed");
    }
    switch (outcome->kind) {
      case InboxStoreOutcome::Kind::kStored:
        if (observer != nullptr) observer->OnInboxMessages("new", 1);
        return Answer{202, json{{"messageId", outcome->id}}.dump(), {}};
      case InboxStoreOutcome::Kind::kDuplicate:
        if (observer != nullptr) observer->OnInboxMessages("duplicate", 1);
        return Answer{200, R"({"status":"duplicate"})", {}};
      case InboxStoreOutcome::Kind::kRejected:
        break;
    }
    Reject("invalid_message");
    return Error(400, outcome->error.message());
  }

  // Steps 1-8 of the processing order (http_source.h) for a body already read under the cap.
  Answer Handle(const httplib::Request& req, std::string body) const {
    if (std::optional<Answer> refused = Admit(req, body)) return std::move(*refused);
    Arrival arrival = ArrivalOf(req, std::move(body));
    for (const std::string& name : message_id_headers) {
      if (std::string id = HeaderValue(req, name); !id.empty()) {
        arrival.message_id = std::move(id);
        break;
      }
    }
    Intaken in = intake->Receive(std::move(arrival));
    if (in.kind == Intaken::Kind::kFiltered) {
      if (observer != nullptr) observer->OnInboxFiltered(settings.name);
      return Answer{202, R"({"status":"filtered"})", {}};
    }
    // The correlation id is echoed on every answer from here on.
    const std::string correlation = in.row.correlation_id.value_or("");
    Answer a =
        in.kind == Intaken::Kind::kRefused ? Error(in.status, in.error) : Store(std::move(in.row));
    a.headers.emplace_back("X-Correlation-Id", correlation);
    return a;
  }
};

WebhookSources::~WebhookSources() { Stop(); }

Result<std::unique_ptr<WebhookSources>> WebhookSources::Create(const Config& config,
                                                               InboxIntake* intake,
                                                               IntakeObserver* observer,
                                                               WebhookOptions options) {
  std::unique_ptr<WebhookSources> out(new WebhookSources());
  bool any = false;
  for (const auto& [name, sc] : config.sources) any = any || sc.type == "http";
  if (any && intake == nullptr) return InvalidArgument("the HTTP sources need the inbox store");
  if (!options.now_ms) {
    options.now_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
  }
  if (any) {
    out->writer_ = std::make_unique<InboxWriter>(intake, options.writers, options.max_batch);
  }
  for (const auto& [name, sc] : config.sources) {
    if (sc.type != "http") continue;
    QB_ASSIGN_OR_RETURN(HttpSourceSettings s, BindHttpSource(sc));
    auto src = std::make_unique<Source>();
    src->route = config.inbox.base_path + s.path;
    src->max_body_bytes = static_cast<size_t>(config.inbox.max_body_bytes);
    if (s.auth) {
      QB_ASSIGN_OR_RETURN(src->auth, RequestAuth::Create(*s.auth, "sources." + name + ".auth"));
    }
    QB_ASSIGN_OR_RETURN(IntakeRules rules, HttpRules(s, src->auth.get()));
    if (rules.idempotency_key.order == std::vector<KeyFrom>{KeyFrom::kMessageId}) {
      src->message_id_headers = src->auth->message_id_source().headers;
    }
    if (s.requests_per_minute) {
      src->limiter = std::make_unique<RateLimiter>(*s.requests_per_minute, std::chrono::seconds(60),
                                                   options.steady_now);
    }
    src->refusal_log =
        std::make_unique<log::RateLimiter>(std::chrono::seconds(1), options.steady_now);
    src->storage_log =
        std::make_unique<log::RateLimiter>(std::chrono::seconds(1), options.steady_now);
    if (src->auth) rules.credential_headers = src->auth->credential_headers();
    rules.transforms = options.transforms;
    rules.observer = observer;
    rules.refusal_log = src->refusal_log.get();
    src->intake.emplace(std::move(rules));
    src->observer = observer;
    src->writer = out->writer_.get();
    src->now_ms = options.now_ms;
    src->settings = std::move(s);
    out->sources_.push_back(std::move(src));
  }
  return out;
}

namespace {

// One request to `s`'s route: the body under the cap, then Source::Handle.
void ServeSource(const WebhookSources::Source& s, const httplib::Request& req,
                 const WebhookSources::BodyReader& read_body, httplib::Response& res) {
  Answer a;
  try {
    // The body, counted while it is read (a chunked body declares no length). Past the cap
    // the rest is read and dropped up to as much again (at least 64 KiB), so a sender still
    // writing gets the 413 rather than a reset connection; beyond that reading stops.
    std::string body;
    bool too_large = false;
    size_t dropped = 0;
    const size_t drop_limit = std::max<size_t>(s.max_body_bytes, 65536);
    read_body([&](const char* data, size_t n) {
      if (!too_large && body.size() + n <= s.max_body_bytes) {
        body.append(data, n);
        return true;
      }
      too_large = true;
      body.clear();
      dropped += n;
      return dropped <= drop_limit;
    });
    if (too_large) {
      s.Reject("body_too_large");
      a = Error(413, "Request body exceeds " + std::to_string(s.max_body_bytes) + " bytes");
      a.headers.emplace_back("Connection", "close");
    } else {
      a = s.Handle(req, std::move(body));
    }
  } catch (const std::exception& e) {
    log::Error("A webhook failed.",
               {{"source", s.settings.name}, {"reason", SanitizeError(e.what())}});
    a = Error(500, "Internal error");
  }
  res.status = a.status;
  for (const auto& [name, value] : a.headers) res.set_header(name.c_str(), value);
  if (!a.body.empty()) res.set_content(a.body, "application/json");
}

}  // namespace

void WebhookSources::Register(httplib::Server& server) {
  for (const auto& src : sources_) {
    const Source* s = src.get();
    server.Post(RegexLiteral(s->route), [s](const httplib::Request& req, httplib::Response& res,
                                            const httplib::ContentReader& reader) {
      ServeSource(
          *s, req, [&reader](const auto& receive) { return reader(receive); }, res);
    });
  }
}

bool WebhookSources::Serve(const httplib::Request& req, const BodyReader& read_body,
                           httplib::Response& res) const {
  if (req.method != "POST") return false;
  for (const auto& s : sources_) {
    if (s->route == req.path) {
      ServeSource(*s, req, read_body, res);
      return true;
    }
  }
  return false;
}

bool WebhookSources::Serves(std::string_view path) const {
  for (const auto& s : sources_) {
    if (s->route == path) return true;
  }
  return false;
}

std::vector<std::string> WebhookSources::Routes() const {
  std::vector<std::string> out;
  for (const auto& s : sources_) out.push_back("POST " + s->route + " (" + s->settings.name + ")");
  return out;
}

void WebhookSources::Stop() {
  if (writer_) writer_->Stop();
}

}  // namespace queuebox::sources
