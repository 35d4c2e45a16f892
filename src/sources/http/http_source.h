// http_source.h: HTTP webhook sources on the data port (QueueBox reference §9.3, §9.4, §11.1,
// §11.2, §11.5). Each `sources.<name>` of type http (settings: sources/http/http_settings.h)
// answers POST <inbox.basePath><path>, in QueueBox's processing order, after the server's own
// rules (503 while draining; 413 for a body over inbox.maxBodyBytes, declared or counted). Steps
// 1-2 are the route's; 3-7 are the intake pipeline's (sources/intake.h) under its refusal policy
// (a fault is refused with its 4xx); 8 is the route's again:
//   1. rate limit (rateLimit.requestsPerMinute, one bucket per source): 429, no body, Retry-After
//   2. auth over the raw body: 401 {"error":"<reason naming the check>"}
//   3. header filter: 202 {"status":"filtered"}, no row
//   4. X-Correlation-Id: read (sanitised) or generated; echoed on every later answer
//   5. JSON parse (whatever Content-Type says): 400 {"error":"Invalid JSON"} (also for nesting
//      deeper than kMaxJsonDepth)
//   6. keys: idempotency key from idempotencyKeyHeader, then idempotencyKeyPath(s) (first
//      non-empty wins; a source with neither takes its auth's provider message id: webhook-id or
//      svix-id for standard-webhooks, $.id for stripe): none is 400 {"error":"<reason>"};
//      aggregate id and event type the same way (optional); a key over 255 characters is 400;
//      publish time (scheduledAtHeader, then scheduledAtPath) when configured
//   7. source transform (sources.<name>.transform): its output is stored; Fail or Dead answers
//      422 {"error":"Transform failed: <reason>"} and stores nothing (the keys of step 6 come from
//      the original body: header, then idempotencyKeyExpression etc., then the path)
//   8. store, group-committed (InboxWriter): 202 {"messageId":"<inbox id>"}, 200
//      {"status":"duplicate"}, 400 {"error":"<reason>"} for a message the store refuses, 500
//      {"error":"Storage failed"} when the database fails (nothing is written)
// Stored headers: the request's, one value per name, without Authorization, Proxy-Authorization,
// Cookie, the source auth's headers, and the connection's own (Host, Content-Length,
// Transfer-Encoding, Connection, Keep-Alive, TE, Trailer, Upgrade, Expect).
// Counted through the IntakeObserver: queuebox_inbox_messages_total{status=new|duplicate},
// queuebox_inbox_rejections_total{reason}, queuebox_inbox_filtered_total{source}. Logs name the
// source and the reason; never a credential, a header value or the body. The per-request lines
// (401, 422, 500) are limited to one per source per second, with the count suppressed.
//
// The server is the data port's cpp-httplib server (admin/admin_server.h, extra_data_routes): each
// request runs on a pool thread, which waits for its group commit.
//
// Thread-safety: handlers run on the server's threads, concurrently; WebhookSources::Stop from the
// controlling thread after the server stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "queuebox/config.h"
#include "queuebox/inbox.h"
#include "queuebox/status.h"
#include "sources/intake_observer.h"
#include "sources/source_transforms.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace queuebox::sources {

class InboxWriter;

struct WebhookOptions {
  // The source stage and key expressions; null: none configured. Borrowed; outlives Stop().
  const SourceTransforms* transforms = nullptr;
  int writers = 1;      // concurrent Store calls (1 for SQLite)
  int max_batch = 256;  // messages per Store call at most
  // Unix ms for HMAC timestamps; the system clock when unset (tests inject).
  std::function<int64_t()> now_ms;
  // For the rate limit's period; the steady clock when unset.
  std::function<std::chrono::steady_clock::time_point()> steady_now;
};

// Every http source of a configuration, ready to register on the data port.
class WebhookSources {
 public:
  // Binds and checks every http source of `config` (auth, paths, filters). `intake` and
  // `observer` (may be null) are borrowed and must outlive Stop(). kInvalidArgument naming the
  // source key on a bad block.
  static Result<std::unique_ptr<WebhookSources>> Create(const Config& config, InboxIntake* intake,
                                                        IntakeObserver* observer,
                                                        WebhookOptions options = {});
  ~WebhookSources();

  // Adds one POST route per http source. Bodies are read under `max_body_bytes`
  // (inbox.maxBodyBytes; a declared length over it is refused by the server before this).
  void Register(httplib::Server& server);
  // Reads the request body chunk by chunk: calls `receive` per chunk until it returns false or
  // the body ends; false when reading failed. The route passes its httplib::ContentReader.
  using BodyReader =
      std::function<bool(const std::function<bool(const char* data, size_t size)>& receive)>;
  // What the route of one source does with one request, callable without a server (the
  // webhook_request fuzz target): the body read through `read_body` under inbox.maxBodyBytes
  // (413 past it), then steps 1-8 above; fills `res` (status, headers, JSON body). False, `res`
  // untouched, when req.method is not POST or req.path (decoded) is no source's route: the
  // server's router answers those. Blocks until the store answered; never throws (500).
  bool Serve(const httplib::Request& req, const BodyReader& read_body,
             httplib::Response& res) const;
  // "POST /inbox/stripe (stripe)", one per source, for the start log.
  std::vector<std::string> Routes() const;
  // True when `path` is the route of one of these sources (the data port counts a declared
  // length over the cap there as queuebox_inbox_rejections_total{reason="body_too_large"}).
  bool Serves(std::string_view path) const;
  // Stores what is queued and joins the writers (after the server stopped). Idempotent.
  void Stop();

  struct Source;

 private:
  WebhookSources() = default;
  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<InboxWriter> writer_;
};

}  // namespace queuebox::sources
