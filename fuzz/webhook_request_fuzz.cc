// webhook_request_fuzz: a whole webhook request through the data port's route of the HTTP
// sources (sources/http_source.h, WebhookSources::Serve, what the registered POST route runs),
// with sources of every auth kind (hmac over the body and over "<timestamp>.<body>", bearer,
// api-key), a header filter, a rate limit, idempotency keys from a header and from JSON paths,
// and an in-memory InboxIntake that keeps (source, idempotency key) unique.
// Input: "METHOD /path?query" on the first line, "Name: value" header lines up to an empty line,
// then the body (read in chunks of 300 bytes, as a chunked body). In header values {sig}, {ts},
// {token} and {key} become the addressed source's right signature, the clock's time, the bearer
// token and the API key, so the fuzzer gets past the auth.
// Properties: Serve answers exactly POST to a source's route; the status is one the sources give
// (200, 202, 400, 401, 413, 429); a body over inbox.maxBodyBytes is 413 and only it; a request
// without its credential is 401 and one with exactly the right credential is not; anything but
// 202 {"messageId"} stores nothing, and that one stores one row with that id, the source, the
// request's idempotency key, and no credential header; the same request again is 200 duplicate
// (429 on the rate-limited source) and stores nothing; no response carries a configured secret.
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "auth/request_auth.h"
#include "config/load.h"
#include "fuzz_util.h"
#include "queuebox/inbox.h"
#include "sources/http/http_source.h"
#include "sources/intake_parts.h"

using nlohmann::json;
using queuebox::fuzz::Require;

namespace {

constexpr int64_t kNowMs = 1767225600000;  // the HMAC clock: 2026-01-01T00:00:00Z
constexpr size_t kMaxBody = 1024;          // inbox.maxBodyBytes
constexpr size_t kChunk = 300;             // bytes per read of the body

constexpr char kSignedSecret[] = "whsec_Fz8signedSecret";
constexpr char kGithubSecret[] = "gh_Fz8githubSecret";
constexpr char kShopSecret[] = "shop_Fz8sha512Secret";
constexpr char kToken[] = "tok_Fz8bearerToken";
constexpr char kApiKey[] = "key_Fz8apiKeySecret";

constexpr const char* kConfig = R"(
database:
  type: sqlite
  url: /nonexistent/webhook_request_fuzz.db
inbox:
  basePath: /inbox
  maxBodyBytes: 1024
sources:
  open:
    path: /open
    idempotencyKeyPath: [$.id, $.data.id]
    eventTypePath: $.type
    aggregateIdPath: [$.data.object.customer, $.account]
    initialDelay: 1s
    scheduledAtPath: $.created
  signed:
    path: /signed
    topic: "{{ source }}"
    idempotencyKeyHeader: X-Delivery-Id
    auth:
      type: hmac
      secret: whsec_Fz8signedSecret
      headerName: X-Signature
      timestampHeader: X-Timestamp
  github:
    path: /github
    idempotencyKeyHeader: X-GitHub-Delivery
    eventTypeHeader: X-GitHub-Event
    aggregateIdPath: $.repository.full_name
    auth:
      type: hmac
      secret: gh_Fz8githubSecret
      headerName: X-Hub-Signature-256
      signaturePrefix: "sha256="
      signaturePayloadFormat: BODY
  shop:
    path: /shop
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    auth:
      type: hmac
      secret: shop_Fz8sha512Secret
      headerName: X-Shop-Hmac
      algorithm: HmacSHA512
      signaturePrefix: ""
      signaturePayloadFormat: BODY
  bearer:
    path: /bearer
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    auth:
      type: bearer
      token: tok_Fz8bearerToken
  apikeyed:
    path: /apikeyed
    topic: "{{ source }}"
    idempotencyKeyHeader: Idempotency-Key
    idempotencyKeyPath: $.id
    auth:
      type: api-key
      key: key_Fz8apiKeySecret
      headerName: X-Api-Key
  prod:
    path: /prod
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    filter:
      require:
        - header: X-Env
          equals: prod
  limited:
    path: /limited
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    rateLimit:
      requestsPerMinute: 1
  published:
    path: /published
    topic: "{{ source }}"
    idempotencyKeyPath: $.id
    initialDelay: 10s
    scheduledAtHeader: X-Published-At
    scheduledAtPath: $.created
)";

// What the fuzzer knows of each source, as kConfig says.
struct Expect {
  std::string name;
  std::string auth;  // "", hmac, bearer, api-key
  std::string credential_header;
  std::string secret;  // hmac secret, token or key
  std::string algorithm = "HmacSHA256";
  std::string prefix;
  std::string timestamp_header;  // hmac over "<ts>.<body>" when set
  std::string key_header;        // idempotencyKeyHeader
  bool key_path_id = false;      // $.id is the (first) idempotencyKeyPath
};

const std::map<std::string, Expect>& Sources() {
  static const auto* const sources = new std::map<std::string, Expect>{
      {"/inbox/open", {"open", "", "", "", "", "", "", "", true}},
      {"/inbox/signed",
       {"signed", "hmac", "X-Signature", kSignedSecret, "HmacSHA256", "sha256=", "X-Timestamp",
        "X-Delivery-Id", false}},
      {"/inbox/github",
       {"github", "hmac", "X-Hub-Signature-256", kGithubSecret, "HmacSHA256", "sha256=", "",
        "X-GitHub-Delivery", false}},
      {"/inbox/shop", {"shop", "hmac", "X-Shop-Hmac", kShopSecret, "HmacSHA512", "", "", "", true}},
      {"/inbox/bearer", {"bearer", "bearer", "Authorization", kToken, "", "", "", "", true}},
      {"/inbox/apikeyed",
       {"apikeyed", "api-key", "X-Api-Key", kApiKey, "", "", "", "Idempotency-Key", true}},
      {"/inbox/prod", {"prod", "", "", "", "", "", "", "", true}},
      {"/inbox/limited", {"limited", "", "", "", "", "", "", "", true}},
      {"/inbox/published", {"published", "", "", "", "", "", "", "", true}},
  };
  return *sources;
}

// The inbox in memory: (source, idempotency key) unique, and the refusals of InboxIntake::Store
// (queuebox/inbox.h) that a webhook can reach.
class MemoryInbox final : public queuebox::InboxIntake {
 public:
  queuebox::Result<std::vector<queuebox::InboxStoreOutcome>> Store(
      std::span<const queuebox::NewInboxMessage> messages) override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<queuebox::InboxStoreOutcome> out;
    for (const queuebox::NewInboxMessage& m : messages) {
      queuebox::InboxStoreOutcome o;
      if (const char* bad = Refusal(m)) {
        o.kind = queuebox::InboxStoreOutcome::Kind::kRejected;
        o.error = queuebox::InvalidArgument(bad);
      } else if (rows_.count({m.source, m.idempotency_key}) != 0) {
        o.kind = queuebox::InboxStoreOutcome::Kind::kDuplicate;
      } else {
        char id[40];
        std::snprintf(id, sizeof id, "00000000-0000-4000-8000-%012llu",
                      static_cast<unsigned long long>(++next_id_));
        o.id = m.id.empty() ? id : m.id;
        rows_[{m.source, m.idempotency_key}] = Row{o.id, m.headers};
      }
      out.push_back(std::move(o));
    }
    return out;
  }

  struct Row {
    std::string id, headers;
    bool operator==(const Row&) const = default;
  };
  std::map<std::pair<std::string, std::string>, Row> Rows() {
    std::lock_guard<std::mutex> lock(mu_);
    return rows_;
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    rows_.clear();
  }

 private:
  static bool Text(const std::string& s, size_t max) {
    return queuebox::fuzz::ValidUtf8(s) && s.find('\0') == std::string::npos &&
           queuebox::fuzz::CodePoints(s) <= max;
  }
  static const char* Refusal(const queuebox::NewInboxMessage& m) {
    if (m.source.empty() || m.idempotency_key.empty()) return "empty source or key";
    if (!Text(m.source, 255) || !Text(m.idempotency_key, 255)) return "bad source or key";
    if ((m.aggregate_id && !Text(*m.aggregate_id, 255)) ||
        (m.event_type && !Text(*m.event_type, 255))) {
      return "bad aggregate id or event type";
    }
    if (m.correlation_id && !Text(*m.correlation_id, 128)) return "bad correlation id";
    if (!queuebox::fuzz::ValidUtf8(m.payload) || !json::accept(m.payload)) return "bad payload";
    json h = json::parse(m.headers, nullptr, false);
    if (!h.is_object()) return "bad headers";
    for (const auto& [name, value] : h.items()) {
      if (!value.is_string() || !Text(name, 1 << 20) || !Text(value.get<std::string>(), 1 << 20)) {
        return "bad headers";
      }
    }
    if (m.delay_ms < 0) return "negative delay";
    return nullptr;
  }

  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, Row> rows_;
  uint64_t next_id_ = 0;
};

std::chrono::steady_clock::time_point g_steady{};

struct World {
  MemoryInbox inbox;
  std::unique_ptr<queuebox::sources::WebhookSources> sources;
};

World& TheWorld() {
  static World* const world = [] {
    auto* w = new World();
    const std::string path = std::string(::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
                             "/queuebox_webhook_request_fuzz." + std::to_string(::getpid()) +
                             ".yml";
    std::FILE* f = std::fopen(path.c_str(), "wb");
    Require(f != nullptr, "the config file opens");
    std::fputs(kConfig, f);
    std::fclose(f);
    queuebox::ConfigSource source;
    source.file = path;
    source.default_file = "/nonexistent/queuebox.yml";
    auto config = queuebox::LoadConfig(source);
    std::remove(path.c_str());
    if (!config.ok()) std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    Require(config.ok(), "the fuzz configuration loads");
    queuebox::sources::WebhookOptions options;
    options.now_ms = [] { return kNowMs; };
    options.steady_now = [] { return g_steady; };
    auto created = queuebox::sources::WebhookSources::Create(*config, &w->inbox, nullptr, options);
    Require(created.ok(), "the fuzz sources bind");
    w->sources = std::move(created).value();
    Require(w->sources->Routes().size() == Sources().size(), "every fuzz source has a route");
    return w;
  }();
  return *world;
}

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string LowerText(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = Lower(c);
  return out;
}

std::string Replace(std::string s, std::string_view what, const std::string& with) {
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + with.size())) {
    s.replace(at, what.size(), with);
  }
  return s;
}

// The values of header `name` (any case), in request order.
std::vector<std::string> Values(const std::vector<std::pair<std::string, std::string>>& headers,
                                std::string_view name) {
  std::vector<std::string> out;
  for (const auto& [n, v] : headers) {
    if (LowerText(n) == LowerText(name)) out.push_back(v);
  }
  return out;
}

struct Request {
  std::string method, path, query;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

Request Parse(std::string_view text) {
  Request r;
  auto line = [&text]() {
    size_t nl = text.find('\n');
    std::string_view l = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    return l;
  };
  std::string_view first = line();
  size_t sp = first.find(' ');
  r.method = std::string(first.substr(0, sp));
  std::string_view target = sp == std::string_view::npos ? "" : first.substr(sp + 1);
  size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) r.query = std::string(target.substr(q + 1));
  while (!text.empty() && r.headers.size() < 64) {
    std::string_view l = line();
    if (l.empty()) break;
    size_t colon = l.find(':');
    std::string_view name = l.substr(0, colon);
    std::string_view value = colon == std::string_view::npos ? "" : l.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    r.headers.emplace_back(std::string(name), std::string(value));
  }
  r.body = std::string(text);
  return r;
}

// The right credential of `e` for `body` (the signature without its prefix for hmac).
std::string Signature(const Expect& e, const std::string& body) {
  const std::string payload =
      e.timestamp_header.empty() ? body : std::to_string(kNowMs) + "." + body;
  auto mac = queuebox::HmacHex(e.algorithm, e.secret, payload);
  Require(mac.ok(), "the fuzz HMAC algorithms exist");
  return *mac;
}

struct Answer {
  bool served = false;
  int status = 0;
  std::string body;
  httplib::Headers headers;
};

Answer Send(const Request& r) {
  httplib::Request req;
  req.method = r.method;
  req.path = r.path;
  req.target = r.query.empty() ? r.path : r.path + "?" + r.query;
  for (std::string_view rest = r.query; !rest.empty();) {
    size_t amp = rest.find('&');
    std::string_view kv = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    size_t eq = kv.find('=');
    req.params.emplace(std::string(kv.substr(0, eq)),
                       eq == std::string_view::npos ? "" : std::string(kv.substr(eq + 1)));
  }
  for (const auto& [n, v] : r.headers) req.headers.emplace(n, v);
  const std::string& body = r.body;
  httplib::Response res;
  Answer a;
  a.served = TheWorld().sources->Serve(
      req,
      [&body](const std::function<bool(const char*, size_t)>& receive) {
        for (size_t at = 0; at < body.size(); at += kChunk) {
          if (!receive(body.data() + at, std::min(kChunk, body.size() - at))) return false;
        }
        return true;
      },
      res);
  a.status = res.status;
  a.body = res.body;
  a.headers = res.headers;
  return a;
}

void NoSecret(const Answer& a) {
  for (const char* secret : {kSignedSecret, kGithubSecret, kShopSecret, kToken, kApiKey}) {
    Require(a.body.find(secret) == std::string::npos, "no response body carries a secret");
    for (const auto& [name, value] : a.headers) {
      // X-Correlation-Id echoes the request's own header.
      if (LowerText(name) == "x-correlation-id") continue;
      Require(value.find(secret) == std::string::npos, "no response header carries a secret");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  World& world = TheWorld();
  world.inbox.Clear();
  g_steady += std::chrono::seconds(61);  // every input starts with a full rate-limit bucket

  Request r = Parse(std::string_view(reinterpret_cast<const char*>(data), size));
  const auto& sources = Sources();
  auto it = sources.find(r.path);
  const Expect* e = it == sources.end() ? nullptr : &it->second;
  if (e != nullptr && !e->auth.empty()) {
    const std::string sig = e->auth == "hmac" ? Signature(*e, r.body) : "";
    for (auto& [n, v] : r.headers) {
      v = Replace(std::move(v), "{sig}", sig);
      v = Replace(std::move(v), "{ts}", std::to_string(kNowMs));
      v = Replace(std::move(v), "{token}", kToken);
      v = Replace(std::move(v), "{key}", kApiKey);
    }
  }

  const auto before = world.inbox.Rows();
  Answer a = Send(r);
  Require(a.served == (r.method == "POST" && e != nullptr),
          "Serve answers exactly POST to a source's route");
  if (!a.served) {
    Require(world.inbox.Rows() == before, "an unserved request stores nothing");
    return 0;
  }
  NoSecret(a);
  const int s = a.status;
  Require(s == 200 || s == 202 || s == 400 || s == 401 || s == 413 || s == 429,
          "the status is one the sources give");
  Require((s == 413) == (r.body.size() > kMaxBody), "413 exactly for a body over the cap");
  Require(s != 200, "a first request is never a duplicate (the inbox was empty)");
  Require(s != 429, "a first request passes the rate limit");

  // The auth: no credential is 401; exactly the right one is not.
  if (!e->auth.empty() && s != 413) {
    std::string right = e->secret;
    if (e->auth == "hmac") right = e->prefix + Signature(*e, r.body);
    if (e->auth == "bearer") right = "Bearer " + right;
    const auto creds = Values(r.headers, e->credential_header);
    const auto stamps = e->timestamp_header.empty()
                            ? std::vector<std::string>{std::to_string(kNowMs)}
                            : Values(r.headers, e->timestamp_header);
    bool carried = false;
    const std::string needle = e->auth == "hmac" ? Signature(*e, r.body) : e->secret;
    for (const std::string& v : creds) carried = carried || v.find(needle) != std::string::npos;
    if (!carried || stamps.empty()) Require(s == 401, "a request without its credential is 401");
    if (creds.size() == 1 && creds[0] == right && stamps.size() == 1 &&
        stamps[0] == std::to_string(kNowMs)) {
      Require(s != 401, "a request with exactly the right credential passes the auth");
    }
  }
  if (e->name == "prod" && s != 413 && Values(r.headers, "X-Env").empty()) {
    Require(s == 202 && a.body == R"({"status":"filtered"})",
            "a request without a required header is filtered");
  }

  const auto after = world.inbox.Rows();
  json answer = json::parse(a.body, nullptr, false);
  const bool stored = s == 202 && answer.is_object() && answer.contains("messageId");
  if (!stored) {
    Require(after == before, "a request that is not 202 {messageId} stores nothing");
    if (s == 202) Require(a.body == R"({"status":"filtered"})", "a 202 without a row is filtered");
    return 0;
  }
  Require(after.size() == before.size() + 1, "a 202 stores exactly one row");
  const std::string id = answer["messageId"].get<std::string>();
  const std::pair<std::string, std::string>* key = nullptr;
  const MemoryInbox::Row* row = nullptr;
  for (const auto& [k, v] : after) {
    if (before.count(k) == 0) key = &k, row = &v;
  }
  Require(key != nullptr && row->id == id, "the 202's messageId is the new row's");
  Require(key->first == e->name, "the row belongs to the addressed source");
  // The idempotency key: the header's (trimmed) first, then $.id when it is a string.
  std::optional<std::string> expected;
  if (!e->key_header.empty()) {
    const auto v = Values(r.headers, e->key_header);
    if (!v.empty() && !queuebox::sources::Trimmed(v[0]).empty()) {
      expected = queuebox::sources::Trimmed(v[0]);
    }
  }
  if (!expected && e->key_path_id) {
    json body = json::parse(r.body, nullptr, false);
    if (body.is_object() && body.contains("id") && body["id"].is_string()) {
      std::string t = queuebox::sources::Trimmed(body["id"].get<std::string>());
      if (!t.empty()) expected = t;
    }
  }
  if (expected) Require(key->second == *expected, "the row's key is the request's idempotency key");
  json stored_headers = json::parse(row->headers, nullptr, false);
  Require(stored_headers.is_object(), "the stored headers are an object");
  for (const auto& [name, value] : stored_headers.items()) {
    const std::string n = LowerText(name);
    Require(n != "authorization" && n != "proxy-authorization" && n != "cookie" &&
                (e->credential_header.empty() || n != LowerText(e->credential_header)),
            "no credential header is stored");
  }

  // The same request again: a duplicate (the rate-limited source: 429), nothing stored.
  Answer again = Send(r);
  NoSecret(again);
  if (e->name == "limited") {
    Require(again.status == 429 && again.headers.count("Retry-After") == 1,
            "the second request within the minute is 429 with Retry-After");
  } else {
    Require(again.status == 200 && again.body == R"({"status":"duplicate"})",
            "the same request again is 200 duplicate");
  }
  Require(world.inbox.Rows() == after, "a replay stores nothing");
  return 0;
}
