#include "sources/http_source.h"

#include <httplib.h>
#include <strings.h>

#include <algorithm>
#include <future>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "admin/metrics.h"
#include "auth/request_auth.h"
#include "auth/request_headers.h"
#include "config/sources.h"
#include "core/header_filter.h"
#include "core/json_path.h"
#include "core/log.h"
#include "core/redaction.h"
#include "sources/inbox_writer.h"
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
bool ConnectionHeader(const std::string& name) {
  static const char* const kNames[] = {
      "host",        "content-length", "transfer-encoding", "connection", "keep-alive",
      "te",          "trailer",        "upgrade",           "expect",     "remote_addr",
      "remote_port", "local_addr",     "local_port"};
  for (const char* n : kNames) {
    if (strcasecmp(name.c_str(), n) == 0) return true;
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

std::string Describe(const std::vector<JsonPath>& paths) {
  std::string out;
  for (const JsonPath& p : paths) out += (out.empty() ? "" : ", ") + p.text();
  return out;
}

}  // namespace

struct WebhookSources::Source {
  HttpSourceSettings settings;
  std::string route;
  std::unique_ptr<RequestAuth> auth;
  std::string credential_header;
  HeaderFilter filter;
  std::vector<JsonPath> key_paths, aggregate_paths, event_type_paths, publish_paths;
  std::unique_ptr<RateLimiter> limiter;
  InboxConsumption consumption = InboxConsumption::kPush;
  Metrics* metrics = nullptr;
  const SourceTransforms* transforms = nullptr;
  InboxWriter* writer = nullptr;
  std::function<int64_t()> now_ms;
  size_t max_body_bytes = 1048576;  // inbox.maxBodyBytes

  // The per-request lines: at most one per source per second each, so a flood of bad requests
  // (or an outage under load) cannot flood the log; the next line written says how many were
  // suppressed. `refusal_log`: 401, 422, an unreadable publish time; `storage_log`: 500.
  std::unique_ptr<log::RateLimiter> refusal_log, storage_log;

  void Reject(const char* reason) const {
    if (metrics != nullptr) metrics->OnInboxRejection(reason);
  }

  // A key from `header` (when set), then the expression's value, then `paths`: trimmed, empty =
  // missing.
  std::optional<std::string> Read(const httplib::Request& req,
                                  const std::optional<std::string>& header,
                                  const std::optional<std::string>& expressed,
                                  const std::vector<JsonPath>& paths, const json& body) const {
    if (header) {
      std::string v = Trimmed(HeaderValue(req, *header));
      if (!v.empty()) return v;
    }
    if (expressed) {
      std::string v = Trimmed(*expressed);
      if (!v.empty()) return v;
    }
    return FirstText(paths, body);
  }

  // Steps 1-8 of the processing order (http_source.h) for a body already read under the cap.
  Answer Handle(const httplib::Request& req, std::string body_text) const {
    // 1. Rate limit: no body, Retry-After in seconds.
    if (limiter) {
      if (int64_t wait_s = limiter->TryAcquire(); wait_s > 0) {
        Reject("rate_limited");
        Answer a{429, "", {}};
        a.headers.emplace_back("Retry-After", std::to_string(wait_s));
        return a;
      }
    }
    // 2. Auth over the raw bytes.
    if (auth) {
      Status s =
          auth->Check([&req](std::string_view name) { return HeaderValue(req, std::string(name)); },
                      body_text, now_ms());
      if (!s.ok()) {
        Reject("auth_failed");
        log::WriteLimited(*refusal_log, log::Level::kWarn, "A webhook was refused.",
                          {{"source", settings.name}, {"status", "401"}, {"reason", s.message()}});
        return Error(401, s.message());
      }
    }
    // 3. Header filter.
    if (!filter.empty()) {
      auto failed =
          filter.FirstFailure([&req](std::string_view name) -> std::optional<std::string> {
            std::string n(name);
            if (!req.has_header(n.c_str())) return std::nullopt;
            return HeaderValue(req, n);
          });
      if (failed) {
        if (metrics != nullptr) metrics->OnInboxFiltered(settings.name);
        log::Debug("A webhook was filtered out.", {{"source", settings.name}, {"rule", *failed}});
        return Answer{202, R"({"status":"filtered"})", {}};
      }
    }
    // 4. Correlation id, echoed on every answer from here on.
    std::string correlation = SanitizeCorrelationId(HeaderValue(req, "X-Correlation-Id"));
    if (correlation.empty()) correlation = NewUuid();
    auto answer = [&correlation](Answer a) {
      a.headers.emplace_back("X-Correlation-Id", correlation);
      return a;
    };
    // 5. JSON, whatever Content-Type says; the depth guard runs first so the parser never
    // recurses past it. No NUL: nlohmann's lexer ends its input there (`{}\0junk` is `{}`).
    if (body_text.find('\0') != std::string::npos ||
        JsonDepth(body_text, kMaxJsonDepth) > kMaxJsonDepth) {
      Reject("invalid_json");
      return answer(Error(400, "Invalid JSON"));
    }
    json body = json::parse(body_text, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
      Reject("invalid_json");
      return answer(Error(400, "Invalid JSON"));
    }
    // 6. Keys, from the original body and the headers.
    NewInboxMessage m;
    m.source = settings.name;
    ExpressionValues expressed;
    if (transforms != nullptr && transforms->HasKeyExpressions(settings.name)) {
      expressed = transforms->EvaluateKeys(settings.name, body_text);
    }
    std::optional<std::string> key =
        Read(req, settings.idempotency_key_header, expressed.idempotency_key, key_paths, body);
    if (!key) {
      Reject("extraction_failed");
      std::string where;
      if (settings.idempotency_key_header) where = "header " + *settings.idempotency_key_header;
      if (settings.keys.idempotency_key_expression) {
        where += (where.empty() ? "" : " or ") + std::string("idempotencyKeyExpression");
      }
      if (!key_paths.empty()) where += (where.empty() ? "" : " or ") + Describe(key_paths);
      return answer(Error(400, "No idempotency key: " + where + " gave no value"));
    }
    m.idempotency_key = std::move(*key);
    m.aggregate_id =
        Read(req, settings.aggregate_id_header, expressed.aggregate_id, aggregate_paths, body);
    m.event_type =
        Read(req, settings.event_type_header, expressed.event_type, event_type_paths, body);
    auto too_long = [](const std::optional<std::string>& v) {
      return v && CodePoints(*v) > kMaxKeyChars;
    };
    const char* long_key = CodePoints(m.idempotency_key) > kMaxKeyChars ? "idempotency key"
                           : too_long(m.aggregate_id)                   ? "aggregate id"
                           : too_long(m.event_type)                     ? "event type"
                                                                        : nullptr;
    if (long_key != nullptr) {
      Reject("extraction_failed");
      return answer(Error(400, std::string("The ") + long_key + " is longer than 255 characters"));
    }
    if (settings.keys.initial_delay_ms) m.delay_ms = *settings.keys.initial_delay_ms;
    if (settings.keys.scheduled_at_header || !publish_paths.empty()) {
      std::optional<std::string> raw;
      if (settings.keys.scheduled_at_header) {
        std::string v = Trimmed(HeaderValue(req, *settings.keys.scheduled_at_header));
        if (!v.empty()) raw = v;
      }
      if (!raw) raw = FirstText(publish_paths, body);
      if (raw) {
        m.publish_time_ms = ParsePublishTime(*raw);
        if (!m.publish_time_ms) {
          log::WriteLimited(*refusal_log, log::Level::kWarn,
                            "The publish time of a message of source '" + settings.name +
                                "' is not a time, so it is ignored.",
                            {{"source", settings.name}});
        }
      }
    }
    m.correlation_id = correlation;
    m.payload = std::move(body_text);
    std::vector<std::pair<std::string, std::string>> headers;
    for (const auto& [name, value] : req.headers) {
      if (!ConnectionHeader(name)) headers.emplace_back(name, value);
    }
    m.headers = StoredHeaders(headers, credential_header);
    m.consumption = consumption;
    // 7. The source transform, on the original body; the row gets the id it saw.
    if (transforms != nullptr && transforms->HasTransform(settings.name)) {
      TransformInput input;
      input.message_id = NewUuid();
      input.received_at = NowIso();
      input.idempotency_key = m.idempotency_key;
      input.event_type = m.event_type;
      input.headers = StoredHeaderPairs(m.headers);
      TransformOutput out = transforms->Apply(settings.name, m.payload, input);
      if (out.rejected) {
        Reject("transform_failed");
        log::WriteLimited(*refusal_log, log::Level::kWarn, "A webhook failed its source transform.",
                          {{"source", settings.name}, {"reason", out.reason}});
        return answer(Error(422, "Transform failed: " + out.reason));
      }
      m.id = std::move(input.message_id);
      m.payload = std::move(out.payload);
    }
    // 8. Store, group-committed with the requests arriving meanwhile; this thread waits for its
    // outcome.
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
      return answer(Error(500, "Storage failed"));
    }
    switch (outcome->kind) {
      case InboxStoreOutcome::Kind::kStored:
        if (metrics != nullptr) metrics->OnInboxMessages("new", 1);
        return answer(Answer{202, json{{"messageId", outcome->id}}.dump(), {}});
      case InboxStoreOutcome::Kind::kDuplicate:
        if (metrics != nullptr) metrics->OnInboxMessages("duplicate", 1);
        return answer(Answer{200, R"({"status":"duplicate"})", {}});
      case InboxStoreOutcome::Kind::kRejected:
        break;
    }
    Reject("invalid_message");
    return answer(Error(400, outcome->error.message()));
  }
};

WebhookSources::~WebhookSources() { Stop(); }

Result<std::unique_ptr<WebhookSources>> WebhookSources::Create(const Config& config,
                                                               InboxIntake* intake,
                                                               Metrics* metrics,
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
    QB_ASSIGN_OR_RETURN(HttpSourceSettings s, cfg::BindHttpSource(sc));
    auto src = std::make_unique<Source>();
    const std::string key = "sources." + name;
    src->route = config.inbox.base_path + s.path;
    src->max_body_bytes = static_cast<size_t>(config.inbox.max_body_bytes);
    if (s.auth) {
      QB_ASSIGN_OR_RETURN(src->auth, RequestAuth::Create(*s.auth, key + ".auth"));
      src->credential_header = src->auth->credential_header();
    }
    auto filter = HeaderFilter::Parse(s.keys.filter);
    if (!filter.ok()) return InvalidArgument(key + ".filter: " + filter.status().message());
    src->filter = std::move(filter).value();
    QB_ASSIGN_OR_RETURN(src->key_paths,
                        CompilePaths(s.idempotency_key_path, key + ".idempotencyKeyPath"));
    QB_ASSIGN_OR_RETURN(src->aggregate_paths,
                        CompilePaths(s.keys.aggregate_id_path, key + ".aggregateIdPath"));
    QB_ASSIGN_OR_RETURN(src->event_type_paths,
                        CompilePaths(s.keys.event_type_path, key + ".eventTypePath"));
    QB_ASSIGN_OR_RETURN(src->publish_paths,
                        CompilePaths(s.keys.scheduled_at_path, key + ".scheduledAtPath"));
    if (src->key_paths.empty() && !s.idempotency_key_header) {
      return InvalidArgument(key + ".idempotencyKeyPath: required (or idempotencyKeyHeader)");
    }
    if (s.requests_per_minute) {
      src->limiter = std::make_unique<RateLimiter>(*s.requests_per_minute, std::chrono::seconds(60),
                                                   options.steady_now);
    }
    src->refusal_log =
        std::make_unique<log::RateLimiter>(std::chrono::seconds(1), options.steady_now);
    src->storage_log =
        std::make_unique<log::RateLimiter>(std::chrono::seconds(1), options.steady_now);
    src->consumption =
        s.keys.consumption == "pull" ? InboxConsumption::kPull : InboxConsumption::kPush;
    src->metrics = metrics;
    src->transforms = options.transforms;
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
