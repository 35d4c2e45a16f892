// http_destination.cc: option table, URL rules and the libcurl multi publisher.
#include "destinations/http/http_destination.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "core/redaction.h"
#include "destinations/broker_common.h"
#include "destinations/http/http1_client.h"
#include "telemetry/trace_context.h"

namespace queuebox {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string_view> Segments(std::string_view path) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    if (end > start) out.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// True when a segment is `.` or `..`, also percent-encoded (%2e).
bool IsDotSegment(std::string_view segment) {
  std::string s = Lower(segment);
  for (size_t p = s.find("%2e"); p != std::string::npos; p = s.find("%2e")) s.replace(p, 3, ".");
  return s == "." || s == "..";
}

bool HasDotSegment(std::string_view path) {
  for (std::string_view seg : Segments(path)) {
    if (IsDotSegment(seg)) return true;
  }
  return false;
}

struct CurlUrlDeleter {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using CurlUrl = std::unique_ptr<CURLU, CurlUrlDeleter>;

// Reads one part of a parsed URL; nullopt when absent.
std::optional<std::string> UrlPart(CURLU* u, CURLUPart part) {
  char* value = nullptr;
  if (curl_url_get(u, part, &value, 0) != CURLUE_OK || value == nullptr) return std::nullopt;
  std::string out(value);
  curl_free(value);
  return out;
}

// The authority of an absolute URL text ("user:pw@host:1" of "http://user:pw@host:1/p").
std::string_view Authority(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  std::string_view rest = url.substr(scheme_end + 3);
  return rest.substr(0, rest.find_first_of("/?#"));
}

// Parses baseUrl with the rules of QueueBox §7.1. Messages never repeat the URL (it may hold a
// password).
Result<CurlUrl> ParseBaseUrl(std::string_view base_url) {
  CurlUrl u(curl_url());
  if (!u) return Internal("out of memory parsing baseUrl");
  // Checked on the text first: a password may hold characters that make the URL unparsable.
  if (Authority(base_url).find('@') != std::string_view::npos) {
    return InvalidArgument(
        "must not contain credentials (user:password@); use headers or auth instead");
  }
  std::string text(base_url);
  if (curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0) != CURLUE_OK) {
    return InvalidArgument("must be an absolute http or https URL with a host");
  }
  std::string scheme = Lower(UrlPart(u.get(), CURLUPART_SCHEME).value_or(""));
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("must be an absolute http or https URL with a host");
  }
  if (UrlPart(u.get(), CURLUPART_HOST).value_or("").empty()) {
    return InvalidArgument("must be an absolute http or https URL with a host");
  }
  if (UrlPart(u.get(), CURLUPART_USER) || UrlPart(u.get(), CURLUPART_PASSWORD)) {
    return InvalidArgument(
        "must not contain credentials (user:password@); use headers or auth instead");
  }
  // Checked on the raw text: curl would silently remove dot segments.
  std::string_view after_authority = base_url.substr(base_url.find("://") + 3);
  size_t path_start = after_authority.find('/');
  if (path_start != std::string_view::npos) {
    std::string_view raw_path = after_authority.substr(path_start);
    raw_path = raw_path.substr(0, raw_path.find_first_of("?#"));
    if (HasDotSegment(raw_path)) return InvalidArgument("must not contain '.' or '..' segments");
  }
  return u;
}

}  // namespace

std::vector<std::string> ValidateHttpBlock(const nlohmann::json& block) {
  std::vector<std::string> problems;
  auto base = block.find("baseUrl");
  if (base != block.end() && base->is_string()) {
    Result<CurlUrl> parsed = ParseBaseUrl(base->get_ref<const std::string&>());
    if (!parsed.ok()) problems.push_back("baseUrl: " + parsed.status().message());
  }
  auto path = block.find("path");
  if (path != block.end() && path->is_string() &&
      HasDotSegment(path->get_ref<const std::string&>())) {
    problems.push_back("path: must not contain '.' or '..' segments");
  }
  return problems;
}

Status ValidateHttpUrl(std::string_view url) {
  Result<CurlUrl> parsed = ParseBaseUrl(url);
  return parsed.ok() ? Status::Ok() : parsed.status();
}

namespace {

// The kind of a non-public address (QueueBox's isLoopback/isLinkLocal/isSiteLocal/
// isAnyLocal, plus IPv6 fc00::/7), or nullptr for a public one.
const char* PrivateKind(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in*>(sa)->sin_addr.s_addr);
    if ((a >> 24) == 127) return "a loopback address";
    if ((a >> 16) == 0xA9FE) return "a link-local address";
    if ((a >> 24) == 10 || (a >> 20) == 0xAC1 || (a >> 16) == 0xC0A8) return "a site-local address";
    if (a == 0) return "the any-local address";
    return nullptr;
  }
  if (sa->sa_family != AF_INET6) return nullptr;
  const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    sockaddr_in v4{};
    v4.sin_family = AF_INET;
    std::memcpy(&v4.sin_addr, &a6.s6_addr[12], 4);
    return PrivateKind(reinterpret_cast<const sockaddr*>(&v4));
  }
  if (IN6_IS_ADDR_LOOPBACK(&a6)) return "a loopback address";
  if (IN6_IS_ADDR_UNSPECIFIED(&a6)) return "the any-local address";
  if (IN6_IS_ADDR_LINKLOCAL(&a6)) return "a link-local address";
  if (IN6_IS_ADDR_SITELOCAL(&a6)) return "a site-local address";
  if ((a6.s6_addr[0] & 0xFE) == 0xFC) return "a unique local address (fc00::/7)";
  return nullptr;
}

}  // namespace

Status CheckPublicHost(std::string_view url, const std::string& key) {
  Result<CurlUrl> parsed = ParseBaseUrl(url);
  if (!parsed.ok()) return InvalidArgument(key + ": " + parsed.status().message());
  std::string host = UrlPart(parsed->get(), CURLUPART_HOST).value_or("");
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // an IPv6 literal
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return Status::Ok();  // passes
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(found, freeaddrinfo);
  for (addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    const char* kind = PrivateKind(ai->ai_addr);
    if (kind == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        ai->ai_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(ai->ai_addr)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(ai->ai_addr)->sin6_addr);
    inet_ntop(ai->ai_family, raw, text, sizeof text);
    return PermissionDenied(key + ": host '" + host + "' resolves to " + text + ", " + kind +
                            ", and http.blockPrivateAddresses is true");
  }
  return Status::Ok();
}

Result<std::string> JoinHttpUrl(std::string_view base_url, std::string_view path) {
  Result<CurlUrl> parsed = ParseBaseUrl(base_url);
  if (!parsed.ok()) return InvalidArgument("baseUrl: " + parsed.status().message());
  if (HasDotSegment(path)) return InvalidArgument("path: must not contain '.' or '..' segments");
  CURLU* u = parsed->get();
  std::string base_path = UrlPart(u, CURLUPART_PATH).value_or("/");
  std::string joined;
  for (std::string_view seg : Segments(base_path)) (joined += '/') += seg;
  for (std::string_view seg : Segments(path)) (joined += '/') += seg;
  // The last component given keeps its trailing slash ("/hooks/" stays "/hooks/").
  std::string_view last = Segments(path).empty() ? std::string_view(base_path) : path;
  if (joined.empty() || (last.size() > 1 && last.back() == '/')) joined += '/';
  if (curl_url_set(u, CURLUPART_PATH, joined.c_str(), 0) != CURLUE_OK) {
    return InvalidArgument("path: not a valid URL path");
  }
  std::optional<std::string> url = UrlPart(u, CURLUPART_URL);
  if (!url) return InvalidArgument("path: not a valid URL path");
  return *url;
}

DestinationType HttpDestinationType() {
  using S = HttpDestinationSettings;
  OptionTable<S> options = {
      opt::Text("baseUrl", &S::base_url, nullptr,
                "Absolute http/https URL of the receiver, without credentials")
          .Required(),
      opt::Text("path", &S::path, "/", "Path joined to baseUrl (no '.' or '..' segments)"),
      opt::Millis("timeoutMs", &S::timeout_ms, 30000,
                  "Request timeout in ms; the connect timeout is half of it")
          .Min(1),
      opt::Int("maxInFlight", &S::max_in_flight, 256,
               "Requests in flight to this receiver at once, all batches together (per "
               "replica); each costs about 12 KiB")
          .Range(1, 100000),
      opt::TypedBlock("auth", &S::auth, HttpAuthVariants(),
                      "Authentication of the requests: oauth2 (client credentials), basic or "
                      "header (described below)"),
      opt::TypedBlock("signing", &S::signing, HttpSigningVariants(),
                      "Signature of each request: standard-webhooks (webhook-id, "
                      "webhook-timestamp, webhook-signature) or hmac (described below)"),
  };
  return MakeDestinationType<S>(
      "http", options, ValidateHttpBlock,
      [](S s, const DestinationConfig& config,
         const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
        s.static_headers = config.headers;
        s.max_error_body_bytes = context.max_error_body_bytes;
        s.on_response = context.on_http_response;
        s.block_private_addresses = context.block_private_addresses;
        Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
        if (!d.ok()) return d.status();
        return std::unique_ptr<Destination>(std::move(d).value());
      });
}

// ---- Request building -----------------------------------------------------------------------

namespace {

// CR, LF or NUL: bytes a header line cannot carry (NUL would also cut curl's C string).
bool HasLineBreak(std::string_view s) {
  // One pass (find_first_of calls memchr once per byte of s): this runs per header and message.
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return c == '\r' || c == '\n' || c == '\0'; });
}

// Not a header name the relay sends: empty, or holding ':', ';', a space or a line break.
bool BadHeaderName(std::string_view name) {
  return name.empty() || std::any_of(name.begin(), name.end(), [](char c) {
           return c == ':' || c == ';' || c == ' ' || c == '\r' || c == '\n' || c == '\0';
         });
}

// "Name: value"; an empty value needs curl's "Name;" form (curl drops "Name:"), and so does one
// of blanks only (curl drops "Name:" followed by blanks; a receiver strips them anyway).
std::string HeaderLine(std::string_view name, std::string_view value) {
  std::string line(name);
  if (value.find_first_not_of(" \t\v\f") == std::string_view::npos) return line + ";";
  line += ": ";
  line += value;
  return line;
}

struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

}  // namespace

bool FramesTheRequest(std::string_view lower_name) {
  static constexpr std::string_view kFraming[] = {"connection", "content-length",    "expect",
                                                  "keep-alive", "proxy-connection",  "te",
                                                  "trailer",    "transfer-encoding", "upgrade"};
  return std::find(std::begin(kFraming), std::end(kFraming), lower_name) != std::end(kFraming);
}

namespace {

struct HeaderView {
  std::string_view name;
  std::string_view value;
};

bool SameHeaderName(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](unsigned char x, unsigned char y) {
           return std::tolower(x) == std::tolower(y);
         });
}

bool FramesTheRequestAnyCase(std::string_view name) {
  static constexpr std::string_view kFraming[] = {"connection", "content-length",    "expect",
                                                  "keep-alive", "proxy-connection",  "te",
                                                  "trailer",    "transfer-encoding", "upgrade"};
  return std::any_of(std::begin(kFraming), std::end(kFraming),
                     [&](std::string_view f) { return SameHeaderName(f, name); });
}

// Drops the headers named like h (any letter case), then appends h.
void ReplaceHeader(std::vector<HeaderView>& merged, HeaderView h) {
  std::erase_if(merged, [&](const HeaderView& m) { return SameHeaderName(m.name, h.name); });
  merged.push_back(h);
}

// "Name: value\r\n", or "Name:\r\n" for a value of blanks only.
void AppendHeaderText(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  if (value.find_first_not_of(" \t\v\f") == std::string_view::npos) {
    out += ":\r\n";
    return;
  }
  out += ": ";
  out += value;
  out += "\r\n";
}

}  // namespace

Status AppendHttpRequestHeaderText(std::string& out, const OutboxRow& row,
                                   const std::map<std::string, std::string>& statics,
                                   const std::optional<std::pair<std::string, std::string>>& auth,
                                   const TraceHeaders* trace) {
  // The standard headers carry the row's topic and key as they are.
  if (Status s = CheckHeaderText("topic", row.topic); !s.ok()) return s;
  if (row.key.has_value()) {
    if (Status s = CheckHeaderText("key", *row.key); !s.ok()) return s;
  }
  // The row's headers, in their order; "{}" (the common case) needs no parse.
  nlohmann::ordered_json row_headers;
  const std::string_view text = row.headers;
  if (!text.empty() && text != "{}") {
    row_headers = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (row_headers.is_discarded() || !row_headers.is_object()) {
      return InvalidArgument("invalid row headers: expected a JSON object of string values");
    }
  }
  std::vector<HeaderView> merged;
  merged.reserve(statics.size() + row_headers.size() + 3);
  for (const auto& [name, value] : statics) merged.push_back({name, value});
  if (auth) ReplaceHeader(merged, {auth->first, auth->second});
  for (const auto& [name, value] : row_headers.items()) {
    if (!value.is_string()) {
      return InvalidArgument("invalid row headers: the value of \"" + Truncate(name, 64) +
                             "\" is not a string (expected a JSON object of string values)");
    }
    // A row's Content-Length or Transfer-Encoding would make the receiver cut the body (or read
    // the next request) wrongly.
    if (FramesTheRequestAnyCase(name)) {
      return InvalidArgument("invalid row header \"" + Truncate(name, 64) +
                             "\": it frames the request or the connection, which the relay "
                             "does itself");
    }
    ReplaceHeader(merged, {name, value.get_ref<const std::string&>()});
  }
  if (trace != nullptr) {  // as ApplyTraceHeaders (broker_common.h)
    std::erase_if(merged, [](const HeaderView& h) { return telemetry::IsTraceHeader(h.name); });
    if (!trace->traceparent.empty()) {
      merged.push_back({telemetry::kTraceparent, trace->traceparent});
      if (!trace->tracestate.empty()) merged.push_back({telemetry::kTracestate, trace->tracestate});
    }
  }
  for (const HeaderView& h : merged) {
    if (BadHeaderName(h.name)) {
      return InvalidArgument("invalid header name \"" + Truncate(h.name, 64) +
                             "\": it must be a non-empty token without ':', ';', spaces or "
                             "line breaks");
    }
    if (HasLineBreak(h.value)) {
      return InvalidArgument(
          "invalid value of header \"" + std::string(h.name) + "\": it contains a " +
          (h.value.find('\0') != std::string_view::npos ? "NUL byte" : "line break"));
    }
  }
  out += "Content-Type: application/json\r\n";
  AppendHeaderText(out, "X-Message-Id", row.id);
  AppendHeaderText(out, "X-Topic", row.topic);
  char attempt[24];
  auto [attempt_end, ec] = std::to_chars(attempt, attempt + sizeof attempt, row.attempt);
  (void)ec;
  AppendHeaderText(out, "X-Attempt", std::string_view(attempt, attempt_end - attempt));
  if (row.key.has_value()) AppendHeaderText(out, "X-Message-Key", *row.key);
  for (const HeaderView& h : merged) AppendHeaderText(out, h.name, h.value);
  return Status::Ok();
}

Result<std::vector<std::string>> HttpRequestHeaders(
    const OutboxRow& row, const std::map<std::string, std::string>& statics,
    const std::optional<std::pair<std::string, std::string>>& auth, const TraceHeaders* trace) {
  std::string text;
  QB_RETURN_IF_ERROR(AppendHttpRequestHeaderText(text, row, statics, auth, trace));
  // One line each; an empty value in curl's "Name;" form (curl drops "Name:").
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find("\r\n", at);
    std::string line = text.substr(at, end - at);
    if (line.find(':') == line.size() - 1) line.back() = ';';
    lines.push_back(std::move(line));
    at = end + 2;
  }
  return lines;
}

Status AppendSignature(const HttpSigner& signer, std::string_view id, std::string_view body,
                       std::vector<std::string>& lines) {
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  Result<std::vector<std::pair<std::string, std::string>>> headers = signer.Sign(id, body, now_s);
  if (!headers.ok()) return headers.status();
  const std::vector<std::string>& names = signer.header_names();
  std::erase_if(lines, [&](const std::string& line) {
    std::string lower = Lower(std::string_view(line).substr(0, line.find_first_of(":;")));
    return std::find(names.begin(), names.end(), lower) != names.end();
  });
  for (const auto& [name, value] : *headers) lines.push_back(HeaderLine(name, value));
  return Status::Ok();
}

namespace {

std::string_view StandardReason(long code) {
  switch (code) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 303:
      return "See Other";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 410:
      return "Gone";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "Unknown Status";
  }
}

bool IsBlankText(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// One request in flight. Owned by Worker::Run; curl holds a pointer through CURLOPT_PRIVATE.
struct Request {
  size_t index = 0;
  CURL* easy = nullptr;
  Slist headers;
  std::string body;  // the response body, first body_cap bytes
  size_t body_cap = 0;
  std::string reason;  // reason phrase of the last status line
  char error[CURL_ERROR_SIZE] = {};
  const OutboundMessage* message = nullptr;
  bool cancelled = false;  // OnPrereq stopped it before the request was written
};

// Runs once the connection is ready, right before the request is written: the last moment a
// lost claim can still stop the send (OutboundMessage::cancel).
int OnPrereq(void* user, char* /*primary_ip*/, char* /*local_ip*/, int /*primary_port*/,
             int /*local_port*/) {
  auto* r = static_cast<Request*>(user);
  if (!r->message->cancel_requested()) return CURL_PREREQFUNC_OK;
  r->cancelled = true;
  return CURL_PREREQFUNC_ABORT;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<Request*>(user);
  size_t n = size * count;
  if (r->body.size() < r->body_cap) r->body.append(data, std::min(n, r->body_cap - r->body.size()));
  return n;  // always take everything: a short count would abort the transfer
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* r = static_cast<Request*>(user);
  size_t n = size * count;
  std::string_view line(data, n);
  if (line.starts_with("HTTP/")) {
    // "HTTP/1.1 404 Not Found\r\n": the reason is after the second space (none on HTTP/2).
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    r->reason.clear();
    if (sp2 != std::string_view::npos) {
      std::string_view reason = line.substr(sp2 + 1);
      while (!reason.empty() && (reason.back() == '\r' || reason.back() == '\n')) {
        reason.remove_suffix(1);
      }
      r->reason = std::string(reason.substr(0, 200));
    }
  }
  return n;
}

std::once_flag curl_init_once;

// The connect timeout: half of timeoutMs (docs/configuration.md).
int64_t ConnectTimeoutMs(int64_t timeout_ms) { return std::max<int64_t>(1, timeout_ms / 2); }

// Transfer errors that mean the receiver is out, not that the message is bad: it cannot be
// resolved or reached, TLS cannot be set up, or the connection broke without an answer.
bool IsOutage(CURLcode result) {
  switch (result) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace

// ---- HttpDestination::Worker -----------------------------------------------------------------

// One curl multi handle (its connection cache keeps connections alive between batches). Used by
// one PublishBatch call at a time; easy handles and permits come from the destination.
class HttpDestination::Worker {
 public:
  explicit Worker(HttpDestination& owner) : owner_(owner), settings_(owner.settings_) {
    if (owner.plain_) {
      plain_ = std::make_unique<Http1Exchanges>(*owner.plain_);
      return;
    }
    multi_ = curl_multi_init();
    // Idle connections kept: by default 4 x the handles in the multi handle now, so as a batch's
    // last requests finish the cache shrinks and closes connections the next batch reopens.
    // The permits bound the requests (and so the connections) this handle ever has at once.
    if (multi_ != nullptr) {
      curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(settings_.max_in_flight));
    }
  }
  ~Worker() {
    if (multi_ != nullptr) curl_multi_cleanup(multi_);
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void Run(std::span<const OutboundMessage> batch, OutcomeSink& sink);

 private:
  // The state of one Run: the batch, its requests in flight and the next index to start.
  struct Pass {
    Pass(std::span<const OutboundMessage> b, OutcomeSink& s)
        : batch(b), sink(s), requests(b.size()) {}
    std::span<const OutboundMessage> batch;
    OutcomeSink& sink;
    std::vector<std::unique_ptr<Request>> requests;
    size_t next = 0;       // next batch index to start
    size_t in_flight = 0;  // handles in the multi handle, each holding a permit
    bool starved = false;  // a request is waiting for a permit that other batches hold
  };

  // Fails the whole batch (Retry) when it cannot be sent at all: no multi handle, or no auth
  // header. Sets auth_header_ otherwise. True when the batch may be sent.
  bool BeginBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink);
  void StartMore(Pass& pass);
  // Starts the request of pass.next (which holds a permit); reports it when it cannot start.
  void StartOne(Pass& pass);
  void StartPlain(Pass& pass);
  // Gives the permit back and reports request i, which can never start (`why`).
  void ReportUnsendable(Pass& pass, size_t i, const Status& why);
  // Reports every request curl finished.
  void CollectFinished(Pass& pass);
  // Reports the requests the plain HTTP/1.1 transport finished within wait_ms.
  void CollectPlain(Pass& pass, int wait_ms);
  // The multi handle is broken: fails what is in flight and what is left (retried later).
  void FailTheRest(Pass& pass, CURLMcode mc);

  CURL* TakeEasy() { return static_cast<CURL*>(owner_.TakeEasy()); }
  void GiveBack(CURL* e) { owner_.GiveBackEasy(e); }

  // The header lines of the request for `message` (signed when the destination signs);
  // kInvalidArgument when it can never be sent.
  Result<std::vector<std::string>> RequestLines(const OutboundMessage& message) const;
  Status Prepare(const OutboundMessage& message, Request& r);
  // What curl's transfer came to, as the plain transport says it.
  Http1Answer CurlAnswer(Request& r, CURLcode result) const;
  Outcome Finish(Http1Answer answer);
  // Removes the auth secrets from a failure text (no-op without auth).
  std::string Scrub(std::string text) const {
    return owner_.auth_ ? owner_.auth_->Scrub(std::move(text)) : text;
  }

  // The auth header of the batch being sent (set by Run).
  std::optional<std::pair<std::string, std::string>> auth_header_;

  HttpDestination& owner_;
  const HttpDestinationSettings& settings_;
  CURLM* multi_ = nullptr;                 // https:// (libcurl)
  std::unique_ptr<Http1Exchanges> plain_;  // http:// (http1_client.h)
  std::string head_;                       // the header text of the request being started
  std::vector<std::pair<size_t, Http1Answer>> finished_;
};

Result<std::vector<std::string>> HttpDestination::Worker::RequestLines(
    const OutboundMessage& message) const {
  const OutboxRow& row = *message.row;
  if (Status body = CheckBodyIsJson(message); !body.ok()) return body;
  Result<std::vector<std::string>> lines =
      HttpRequestHeaders(row, settings_.static_headers, auth_header_, message.trace);
  if (!lines.ok()) return lines.status();
  if (owner_.signer_) {
    QB_RETURN_IF_ERROR(AppendSignature(*owner_.signer_, row.id, message.body(), *lines));
  }
  return lines;
}

Status HttpDestination::Worker::Prepare(const OutboundMessage& message, Request& r) {
  Result<std::vector<std::string>> lines = RequestLines(message);
  if (!lines.ok()) return lines.status();
  curl_slist* list = nullptr;
  for (const std::string& line : *lines) {
    curl_slist* next = curl_slist_append(list, line.c_str());
    if (next == nullptr) {
      curl_slist_free_all(list);
      return Internal("out of memory building headers");
    }
    list = next;
  }
  // No "Expect: 100-continue" round trip for large bodies.
  list = curl_slist_append(list, "Expect:");
  r.headers.reset(list);
  r.body_cap = static_cast<size_t>(settings_.max_error_body_bytes) * 4;  // UTF-8: <= 4 bytes/char
  r.easy = TakeEasy();
  if (r.easy == nullptr) return Internal("curl_easy_init failed");
  CURL* e = r.easy;
  // The options every request shares (URL, timeouts, callbacks) were set when the handle was made
  // (HttpDestination::TakeEasy); these are this request's, over the previous request's.
  // Not copied: the message (and its body) outlives the request.
  const std::string_view body = message.body();
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r.headers.get());
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, &r);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r.error);
  curl_easy_setopt(e, CURLOPT_PRIVATE, &r);
  r.message = &message;
  curl_easy_setopt(e, CURLOPT_PREREQDATA, &r);
  return Status::Ok();
}

Http1Answer HttpDestination::Worker::CurlAnswer(Request& r, CURLcode result) const {
  Http1Answer a;
  if (r.cancelled && result == CURLE_ABORTED_BY_CALLBACK) {
    a.kind = Http1Answer::Kind::kCancelled;
  } else if (result == CURLE_OK) {
    long code = 0;
    curl_easy_getinfo(r.easy, CURLINFO_RESPONSE_CODE, &code);
    a.kind = Http1Answer::Kind::kAnswered;
    a.status = static_cast<int>(code);
    a.reason = std::move(r.reason);
    a.body = std::move(r.body);
    curl_off_t retry_after_s = 0;
    if (curl_easy_getinfo(r.easy, CURLINFO_RETRY_AFTER, &retry_after_s) == CURLE_OK) {
      a.retry_after_s = retry_after_s;
    }
  } else if (result == CURLE_OPERATION_TIMEDOUT) {
    // No connection within the time: the receiver is out.
    curl_off_t connect_us = 0;
    const bool connected =
        curl_easy_getinfo(r.easy, CURLINFO_CONNECT_TIME_T, &connect_us) != CURLE_OK ||
        connect_us != 0;
    a.kind = connected ? Http1Answer::Kind::kTimeout : Http1Answer::Kind::kConnectTimeout;
  } else {
    a.kind = Http1Answer::Kind::kFailed;
    a.error = r.error[0] != '\0' ? std::string(r.error) : curl_easy_strerror(result);
    a.outage = IsOutage(result);
  }
  return a;
}

Outcome HttpDestination::Worker::Finish(Http1Answer a) {
  const size_t max = static_cast<size_t>(settings_.max_error_body_bytes);
  if (a.kind == Http1Answer::Kind::kCancelled) return Outcome::Cancelled();
  if (a.kind == Http1Answer::Kind::kAnswered) {
    const int code = a.status;
    if (settings_.on_response) settings_.on_response(code);
    std::string answer = "HTTP " + std::to_string(code);
    if (code >= 200 && code < 300) {
      Outcome delivered = Outcome::Delivered();
      delivered.answer = std::move(answer);
      return delivered;
    }
    // The receiver refused the credentials: an OAuth2 token is dropped, the retry gets a new one.
    if (code == 401 && auth_header_) owner_.auth_->Rejected(auth_header_->second);
    std::string text = "HTTP " + std::to_string(code) + ": " +
                       (a.reason.empty() ? std::string(StandardReason(code)) : a.reason);
    if (!IsBlankText(a.body)) text += " - " + SanitizeError(Scrub(a.body), max);
    std::string error = SanitizeError(Scrub(text), max);
    // The receiver is out or asks us to slow down (honouring Retry-After): an outage. Any other
    // answer is about the message and spends an attempt.
    if (code == 408 || code == 429 || code == 502 || code == 503 || code == 504) {
      Outcome out = Outcome::Unavailable(std::move(error),
                                         std::clamp<int64_t>(a.retry_after_s, 0, 24 * 3600) * 1000);
      out.answer = std::move(answer);
      return out;
    }
    Outcome out = Outcome::Retry(std::move(error));
    out.answer = std::move(answer);
    return out;
  }
  if (settings_.on_response) settings_.on_response(0);
  if (a.kind == Http1Answer::Kind::kConnectTimeout) {
    return Outcome::Unavailable(SanitizeError(
        "Connect timeout after " + std::to_string(ConnectTimeoutMs(settings_.timeout_ms)) + "ms",
        max));
  }
  if (a.kind == Http1Answer::Kind::kTimeout) {
    // Connected, then out of time: spends an attempt (the message may be what makes it slow).
    return Outcome::Retry(
        SanitizeError("Request timeout after " + std::to_string(settings_.timeout_ms) + "ms", max));
  }
  std::string error = SanitizeError(Scrub("Publish failed: " + a.error), max);
  if (a.outage) return Outcome::Unavailable(std::move(error));
  return Outcome::Retry(std::move(error));
}

bool HttpDestination::Worker::BeginBatch(std::span<const OutboundMessage> batch,
                                         OutcomeSink& sink) {
  if (multi_ == nullptr && !plain_) {
    for (size_t i = 0; i < batch.size(); ++i) {
      sink.Report(i, Outcome::Retry("Publish failed: curl_multi_init failed"));
    }
    return false;
  }
  // One auth header for the whole batch (an OAuth2 token is fetched at most once per key).
  auth_header_.reset();
  if (owner_.auth_) {
    Result<std::pair<std::string, std::string>> header = owner_.auth_->Header();
    if (!header.ok()) {
      std::string reason = SanitizeError(header.status().message(), settings_.max_error_body_bytes);
      for (size_t i = 0; i < batch.size(); ++i) sink.Report(i, Outcome::Retry(reason));
      return false;
    }
    auth_header_ = std::move(header).value();
  }
  return true;
}

// Starts requests while permits are free. With none in flight, waits for a permit (the other
// batches' requests release theirs as they finish).
void HttpDestination::Worker::StartMore(Pass& pass) {
  pass.starved = false;
  while (pass.next < pass.batch.size()) {
    const OutboundMessage& message = pass.batch[pass.next];
    if (message.row == nullptr) {
      pass.sink.Report(pass.next++, Outcome::Reject("Publish failed: no row"));
      continue;
    }
    // A message still waiting here whose claim was lost is never sent.
    if (message.cancel_requested()) {
      pass.sink.Report(pass.next++, Outcome::Cancelled());
      continue;
    }
    if (!owner_.TakePermit(/*wait=*/pass.in_flight == 0)) {
      pass.starved = true;
      return;
    }
    if (message.cancel_requested()) {  // lost while this call waited for the permit
      owner_.ReleasePermit();
      pass.sink.Report(pass.next++, Outcome::Cancelled());
      continue;
    }
    StartOne(pass);
  }
}

void HttpDestination::Worker::ReportUnsendable(Pass& pass, size_t i, const Status& why) {
  owner_.ReleasePermit();
  Outcome o = why.code() == StatusCode::kInvalidArgument
                  ? Outcome::Reject(SanitizeError(why.message(), settings_.max_error_body_bytes))
                  : Outcome::Retry("Publish failed: " + why.message());
  pass.sink.Report(i, std::move(o));
}

namespace {

bool CancelRequested(const void* message) {
  return static_cast<const OutboundMessage*>(message)->cancel_requested();
}

}  // namespace

void HttpDestination::Worker::StartPlain(Pass& pass) {
  const size_t i = pass.next++;
  const OutboundMessage& message = pass.batch[i];
  head_.clear();
  if (owner_.signer_) {
    // Signing works on the lines (AppendSignature); an empty value is curl's "Name;" there.
    Result<std::vector<std::string>> lines = RequestLines(message);
    if (!lines.ok()) return ReportUnsendable(pass, i, lines.status());
    for (const std::string& line : *lines) {
      if (line.find(':') == std::string::npos && !line.empty() && line.back() == ';') {
        head_.append(line, 0, line.size() - 1);
        head_ += ':';
      } else {
        head_ += line;
      }
      head_ += "\r\n";
    }
  } else {
    Status body = CheckBodyIsJson(message);
    if (body.ok()) {
      body = AppendHttpRequestHeaderText(head_, *message.row, settings_.static_headers,
                                         auth_header_, message.trace);
    }
    if (!body.ok()) return ReportUnsendable(pass, i, body);
  }
  const size_t body_cap = static_cast<size_t>(settings_.max_error_body_bytes) * 4;
  plain_->Start(i, head_, message.body(), body_cap, CancelRequested, &message);
  ++pass.in_flight;
}

void HttpDestination::Worker::StartOne(Pass& pass) {
  if (plain_) return StartPlain(pass);
  size_t i = pass.next++;
  auto r = std::make_unique<Request>();
  r->index = i;
  Status prepared = Prepare(pass.batch[i], *r);
  if (!prepared.ok()) {
    if (r->easy != nullptr) GiveBack(r->easy);
    return ReportUnsendable(pass, i, prepared);
  }
  CURLMcode added = curl_multi_add_handle(multi_, r->easy);
  if (added != CURLM_OK) {
    GiveBack(r->easy);
    owner_.ReleasePermit();
    pass.sink.Report(i,
                     Outcome::Retry(std::string("Publish failed: ") + curl_multi_strerror(added)));
    return;
  }
  pass.requests[i] = std::move(r);
  ++pass.in_flight;
}

void HttpDestination::Worker::CollectFinished(Pass& pass) {
  int left = 0;
  while (CURLMsg* msg = curl_multi_info_read(multi_, &left)) {
    if (msg->msg != CURLMSG_DONE) continue;
    Request* r = nullptr;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &r);
    CURLcode result = msg->data.result;
    curl_multi_remove_handle(multi_, r->easy);
    --pass.in_flight;
    owner_.ReleasePermit();
    Outcome outcome = Finish(CurlAnswer(*r, result));
    GiveBack(r->easy);
    size_t index = r->index;
    pass.requests[index].reset();
    pass.sink.Report(index, std::move(outcome));
  }
}

void HttpDestination::Worker::FailTheRest(Pass& pass, CURLMcode mc) {
  std::string reason = std::string("Publish failed: ") + curl_multi_strerror(mc);
  for (auto& r : pass.requests) {
    if (!r) continue;
    curl_multi_remove_handle(multi_, r->easy);
    GiveBack(r->easy);
    owner_.ReleasePermit();
    pass.sink.Report(r->index, Outcome::Retry(reason));
    r.reset();
  }
  pass.in_flight = 0;
  while (pass.next < pass.batch.size()) pass.sink.Report(pass.next++, Outcome::Retry(reason));
}

void HttpDestination::Worker::CollectPlain(Pass& pass, int wait_ms) {
  finished_.clear();
  plain_->Poll(wait_ms, finished_);
  for (auto& [index, answer] : finished_) {
    --pass.in_flight;
    owner_.ReleasePermit();
    pass.sink.Report(index, Finish(std::move(answer)));
  }
}

void HttpDestination::Worker::Run(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  if (!BeginBatch(batch, sink)) return;
  Pass pass(batch, sink);
  StartMore(pass);
  if (plain_) {
    while (pass.in_flight > 0) {
      // A starved batch looks for freed permits every 5 ms (other batches do not wake it).
      CollectPlain(pass, pass.starved ? 5 : 1000);
      StartMore(pass);
    }
    return;
  }
  while (pass.in_flight > 0) {
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi_, &running);
    if (mc == CURLM_OK) {
      CollectFinished(pass);
      StartMore(pass);
      // A starved batch looks for freed permits every 5 ms (other batches do not wake it).
      if (pass.in_flight > 0) {
        mc = curl_multi_poll(multi_, nullptr, 0, pass.starved ? 5 : 1000, nullptr);
      }
    }
    if (mc != CURLM_OK) FailTheRest(pass, mc);
  }
}

// ---- HttpDestination -------------------------------------------------------------------------

HttpDestination::HttpDestination(HttpDestinationSettings settings, std::string url)
    : settings_(std::move(settings)), url_(std::move(url)) {
  permits_free_ = settings_.max_in_flight;
}

HttpDestination::~HttpDestination() {
  idle_.clear();
  for (void* e : free_easy_) curl_easy_cleanup(static_cast<CURL*>(e));
}

Result<std::unique_ptr<HttpDestination>> HttpDestination::Create(HttpDestinationSettings settings) {
  std::call_once(curl_init_once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (settings.timeout_ms <= 0) {
    return InvalidArgument("destinations." + settings.name + ".timeoutMs: must be > 0");
  }
  if (settings.max_error_body_bytes <= 0) {
    return InvalidArgument("http.maxErrorBodyBytes: must be > 0");
  }
  if (settings.max_in_flight <= 0) {
    return InvalidArgument("destinations." + settings.name + ".maxInFlight: must be > 0");
  }
  Result<std::string> url = JoinHttpUrl(settings.base_url, settings.path);
  if (!url.ok()) {
    return InvalidArgument("destinations." + settings.name + "." + url.status().message());
  }
  std::unique_ptr<HttpAuth> auth;
  if (settings.auth) {
    OAuth2TokenCache* cache =
        settings.token_cache != nullptr ? settings.token_cache : &OAuth2TokenCache::Shared();
    Result<std::unique_ptr<HttpAuth>> made = HttpAuth::Create(
        *settings.auth, "destinations." + settings.name + ".auth", settings.timeout_ms, cache);
    if (!made.ok()) return made.status();
    auth = std::move(made).value();
  }
  std::unique_ptr<HttpSigner> signer;
  if (settings.signing) {
    Result<std::unique_ptr<HttpSigner>> made =
        HttpSigner::Create(*settings.signing, "destinations." + settings.name + ".signing");
    if (!made.ok()) return made.status();
    signer = std::move(made).value();
  }
  std::unique_ptr<HttpDestination> d(
      new HttpDestination(std::move(settings), std::move(url).value()));
  d->auth_ = std::move(auth);
  d->signer_ = std::move(signer);
  // http://: the HTTP/1.1 transport of our own (http1_client.h); https:// stays on libcurl.
  if (Result<Http1Endpoint> endpoint = ParseHttp1Endpoint(d->url_); endpoint.ok()) {
    Http1Client::Options o;
    o.endpoint = std::move(endpoint).value();
    o.user_agent = "queuebox-cpp/" QUEUEBOX_VERSION;
    o.timeout_ms = d->settings_.timeout_ms;
    o.connect_timeout_ms = ConnectTimeoutMs(d->settings_.timeout_ms);
    o.max_idle = static_cast<size_t>(d->settings_.max_in_flight);
    d->plain_ = std::make_unique<Http1Client>(std::move(o));
  }
  return d;
}

Status HttpDestination::Start() {
  const std::string prefix = "destinations." + settings_.name + ".";
  Result<std::string> url = JoinHttpUrl(settings_.base_url, settings_.path);
  if (!url.ok()) return InvalidArgument(prefix + url.status().message());
  // http.blockPrivateAddresses: the hosts are resolved once, here (not per request).
  if (settings_.block_private_addresses) {
    QB_RETURN_IF_ERROR(CheckPublicHost(settings_.base_url, prefix + "baseUrl"));
    if (auth_ && auth_->token_url()) {
      QB_RETURN_IF_ERROR(CheckPublicHost(*auth_->token_url(), prefix + "auth.tokenUrl"));
    }
  }
  return Status::Ok();
}

std::unique_ptr<HttpDestination::Worker> HttpDestination::Borrow() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Worker> w = std::move(idle_.back());
      idle_.pop_back();
      return w;
    }
  }
  return std::make_unique<Worker>(*this);
}

void HttpDestination::Return(std::unique_ptr<Worker> worker) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(worker));
}

bool HttpDestination::TakePermit(bool wait) {
  std::unique_lock<std::mutex> lock(permits_mu_);
  if (wait) permits_cv_.wait(lock, [&] { return permits_free_ > 0; });
  if (permits_free_ == 0) return false;
  --permits_free_;
  return true;
}

void HttpDestination::ReleasePermit() {
  {
    std::lock_guard<std::mutex> lock(permits_mu_);
    ++permits_free_;
  }
  permits_cv_.notify_one();
}

void* HttpDestination::TakeEasy() {
  CURL* e = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_easy_.empty()) {
      e = static_cast<CURL*>(free_easy_.back());
      free_easy_.pop_back();
    }
  }
  // A handle from the pool keeps the shared options: each request sets its own over the last
  // one's (Worker::Prepare), with no curl_easy_reset and ~20 options set again per request.
  if (e != nullptr) return e;
  e = curl_easy_init();
  if (e == nullptr) return nullptr;
  curl_easy_setopt(e, CURLOPT_URL, url_.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "queuebox-cpp/" QUEUEBOX_VERSION);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, static_cast<long>(settings_.timeout_ms));
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(ConnectTimeoutMs(settings_.timeout_ms)));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  // The receive buffer of each request in flight (16 KiB by default): answers are read for their
  // status and at most a short error body, which the callbacks collect across reads, so curl's
  // minimum, 1 KiB, is enough (headers are buffered apart). bench/README.md "Memory".
  curl_easy_setopt(e, CURLOPT_BUFFERSIZE, 1024L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, OnPrereq);
  return e;
}

void HttpDestination::GiveBackEasy(void* easy) {
  std::lock_guard<std::mutex> lock(mu_);
  free_easy_.push_back(easy);
}

void HttpDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  if (batch.empty()) return;
  std::unique_ptr<Worker> worker = Borrow();
  worker->Run(batch, sink);
  Return(std::move(worker));
}

void HttpDestination::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.clear();
  if (plain_) plain_->CloseIdle();
  for (void* e : free_easy_) curl_easy_cleanup(static_cast<CURL*>(e));
  free_easy_.clear();
}

}  // namespace queuebox
