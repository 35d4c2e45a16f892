// http_destination.h: the `http` destination (QueueBox reference §7.1, §9.1). POSTs each message
// to baseUrl + path: a batch's requests are sent at once, up to max_in_flight requests to this
// destination in all batches together (`maxInFlight`), and connections are kept alive and reused
// between batches. Transport: http:// receivers through the HTTP/1.1 client of our own
// (http1_client.h: one buffer a request, no generic header machinery); https:// through
// libcurl's multi interface (TLS). Both give the same outcomes and texts below.
//
// Request: method POST, body = the row's payload bytes verbatim, headers in this order:
//   Content-Type: application/json, X-Message-Id, X-Topic, X-Attempt, X-Message-Key (only when
//   the row's key is non-null, as QueueBox; an empty key is sent as an empty value), then the
//   static `headers` of the destination, then the row's `headers` JSON object (a row header
//   replaces a static header of the same name, compared case-insensitively). The standard X-*
//   headers are never removed: a row header of the same name is sent as a second value.
// Signing (`signing`, http_signing.h): the signature headers go last, computed per attempt at
//   send time over the exact body sent.
// Auth (`auth`, http_auth.h): oauth2, basic or header; its header goes after the static headers
//   (a row header of the same name still wins). One header per batch: a token endpoint that
//   fails fails the batch with Retry and the reason; a 401 drops the OAuth2 token it carried.
// Outcomes: any 2xx => Delivered. Any other status (redirects are not followed), a timeout or a
//   connection error => Retry with the reason (below). A row that can never be sent => Reject (no
//   request is made; the row goes dead at once and the batch goes on): `headers` not a JSON
//   object of strings, a header name or value that cannot be sent (empty name, line break, NUL),
//   a topic or key with CR, LF or NUL (X-Topic, X-Message-Key), a payload that is not JSON.
// Reasons (already redacted, cut to max_error_body_bytes):
//   "HTTP <code>: <reason phrase>" [+ " - <body>"] (the body cut, redacted, then the whole cut),
//   "Request timeout after <timeoutMs>ms", "Connect timeout after <ms>ms", "Publish failed:
//   <transport error>" (http1_client.h's texts, or curl's for https).
// Timeouts: request = timeoutMs, connect = timeoutMs / 2 (at least 1 ms).
// Cancellation (OutboundMessage::cancel, a lost claim): a message not yet started (waiting for a
//   maxInFlight permit) or whose connection is still being set up is never sent and is reported
//   Cancelled; the check runs right before the request is written (CURLOPT_PREREQFUNCTION, or
//   the plain transport's cancel check). A request already written is not called back: it
//   finishes and is reported as usual.
//
// Memory: each https request in flight costs about 12 KiB in libcurl (easy handle, receive
// buffer, request buffers); an http one its request head and a kept socket. max_in_flight bounds
// the destination's memory; bench/README.md "Memory".
//
// Thread-safety: PublishBatch may be called from several threads at once; each call borrows its
// own worker from a pool (https: a curl multi handle, whose connections are cached per handle;
// http: an Http1Exchanges over the destination's one pool of kept connections). The calls share
// the max_in_flight permits (a call that holds none waits for one) and one pool of easy handles.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "destinations/http/http_auth.h"
#include "destinations/http/http_signing.h"
#include "destinations/registry.h"
#include "queuebox/destination.h"

namespace queuebox {

struct HttpDestinationSettings {
  std::string name;                                   // destinations.<name>
  std::string base_url;                               // absolute http/https URL, no userinfo
  std::string path = "/";                             // joined to base_url's path
  int64_t timeout_ms = 30000;                         // request timeout (ms), > 0
  std::map<std::string, std::string> static_headers;  // destinations.<name>.headers
  int max_error_body_bytes = 2048;                    // http.maxErrorBodyBytes (bytes, > 0)
  int max_in_flight = 256;  // requests in flight to this destination, all batches together (> 0)
  std::function<void(int status)> on_response;      // each response status; 0 = none (optional)
  std::optional<DestinationAuthConfig> auth;        // destinations.<name>.auth (http_auth.h)
  std::optional<DestinationSigningConfig> signing;  // destinations.<name>.signing (http_signing.h)
  // Where OAuth2 tokens are cached; nullptr: the process-wide OAuth2TokenCache::Shared().
  OAuth2TokenCache* token_cache = nullptr;
  // http.blockPrivateAddresses: Start() refuses a baseUrl or tokenUrl host that resolves to a
  // loopback, link-local, site-local, any-local or fc00::/7 address (an unresolvable host
  // passes), as QueueBox.
  bool block_private_addresses = false;
};

// The registry entry for `type: http`: option table (baseUrl, path, timeoutMs, maxInFlight), block
// validator and factory.
DestinationType HttpDestinationType();

// Checks an http block (defaults filled): baseUrl is an absolute http/https URL with a host and
// no userinfo; path has no `.` / `..` segment. Returns "key: reason" problems (empty = valid).
std::vector<std::string> ValidateHttpBlock(const nlohmann::json& block);

// The rules of baseUrl (also tokenUrl): absolute http/https with a host, no userinfo, no
// `.`/`..` path segment. kInvalidArgument with the reason (never the URL).
Status ValidateHttpUrl(std::string_view url);

// http.blockPrivateAddresses (QueueBox reference §7.1): resolves the host of `url` and returns
// kPermissionDenied naming `key`, the host, the address and its kind when an address is
// loopback, link-local, site-local (10/8, 172.16/12, 192.168/16, fec0::/10), any-local or in
// fc00::/7. A host that does not resolve passes (as QueueBox). Blocking (DNS).
Status CheckPublicHost(std::string_view url, const std::string& key);

// baseUrl + path, joined segment by segment (empty segments dropped, so slashes cannot change
// the target): ("http://h:1/api/", "//v1/events") -> "http://h:1/api/v1/events". The query of
// base_url is kept. kInvalidArgument when base_url does not parse.
Result<std::string> JoinHttpUrl(std::string_view base_url, std::string_view path);

// The header lines ("Name: value", or "Name;" for an empty value) of the request for `row`, in
// the order above; `auth` is the auth header of the batch, if any. kInvalidArgument when they can
// never be sent: the row's headers are not a JSON object of strings, a name is empty or holds
// ':', ';', a space, a line break or NUL, a value or the row's topic or key holds a line break or
// NUL, a row header would frame the request or the connection (FramesTheRequest). Pure
// (fuzz/http_request_fuzz.cc).
// True for the lower-case names of the headers that frame an HTTP/1.1 request or its connection
// (Content-Length, Transfer-Encoding, Connection, Expect, Upgrade, TE, Trailer, Keep-Alive,
// Proxy-Connection): curl's to send, never a row's. Host is not one (a row may name a virtual
// host).
bool FramesTheRequest(std::string_view lower_name);

// The same headers as text for the wire: "Name: value\r\n" each ("Name:\r\n" for an empty value),
// appended to `out` (which is left as it was on an error). What the http:// transport sends.
Status AppendHttpRequestHeaderText(std::string& out, const OutboxRow& row,
                                   const std::map<std::string, std::string>& statics,
                                   const std::optional<std::pair<std::string, std::string>>& auth,
                                   const TraceHeaders* trace = nullptr);

Result<std::vector<std::string>> HttpRequestHeaders(
    const OutboxRow& row, const std::map<std::string, std::string>& statics,
    const std::optional<std::pair<std::string, std::string>>& auth,
    const TraceHeaders* trace = nullptr);

// Signs a request: drops the lines of `lines` that name a header `signer` sets (a row header of
// that name) and appends the signing headers of message `id` with `body`, sent now.
Status AppendSignature(const HttpSigner& signer, std::string_view id, std::string_view body,
                       std::vector<std::string>& lines);

class Http1Client;

class HttpDestination final : public Destination {
 public:
  // kInvalidArgument when the URL is not valid (same rules as ValidateHttpBlock).
  static Result<std::unique_ptr<HttpDestination>> Create(HttpDestinationSettings settings);
  ~HttpDestination() override;

  const std::string& name() const override { return settings_.name; }
  std::string_view type() const override { return "http"; }
  // Validates the URL again and, with block_private_addresses, resolves the baseUrl and tokenUrl
  // hosts (kPermissionDenied); does not contact the receiver (it may be down at start).
  Status Start() override;
  void PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) override;
  void Stop() override;

  // The URL every message is posted to (no credentials: userinfo is refused).
  const std::string& url() const { return url_; }

 private:
  class Worker;  // one curl multi handle and its reusable easy handles

  HttpDestination(HttpDestinationSettings settings, std::string url);
  std::unique_ptr<Worker> Borrow();
  void Return(std::unique_ptr<Worker> worker);
  // One permit per request in flight. wait: block until one is free (only a caller holding none
  // may wait, so permits are always released by someone); otherwise false when none is free.
  bool TakePermit(bool wait);
  void ReleasePermit();
  // The shared pool of easy handles, configured once (TakeEasy). nullptr when curl_easy_init fails.
  void* TakeEasy();
  void GiveBackEasy(void* easy);

  HttpDestinationSettings settings_;
  std::string url_;
  std::unique_ptr<HttpAuth> auth_;      // nullptr without an auth block
  std::unique_ptr<HttpSigner> signer_;  // nullptr without a signing block
  std::unique_ptr<Http1Client> plain_;  // http:// receivers; nullptr for https:// (curl)
  std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> idle_;  // guarded by mu_
  std::vector<void*> free_easy_;               // CURL*, guarded by mu_
  std::mutex permits_mu_;
  std::condition_variable permits_cv_;
  int permits_free_ = 0;  // guarded by permits_mu_
};

}  // namespace queuebox
