// http_auth.h: the `auth` block of an http destination (QueueBox reference §7.1) and the OAuth2
// token cache.
//
//   auth: {type: oauth2, clientId, clientSecret, tokenUrl, scope?, extraParams?}
//     Client-credentials grant: a form POST of grant_type=client_credentials, client_id,
//     client_secret, scope (when set) and every extraParams entry to tokenUrl; the answer is a
//     JSON object {access_token, token_type, expires_in?}. Sends `Authorization: Bearer <token>`.
//     Tokens are cached per `clientId@tokenUrl` (shared by every destination with that pair),
//     refreshed once within 30 s of expiry (3600 s when the answer has no expires_in), one
//     request per key at a time: callers that arrive during a request wait for its token.
//   auth: {type: basic, username, password}         `Authorization: Basic base64(user:password)`
//   auth: {type: header, headerName?, headerValue}  `<headerName>: <headerValue>` (Authorization)
// The auth header goes after the destination's static headers and before the row's headers
// (a row header of the same name wins, as in QueueBox).
//
// Failures: a token endpoint that cannot be reached, answers a non-2xx status, or answers
// something that is not a JSON object with a string access_token (or has an expires_in that is
// not a positive number) is kUnavailable with the reason: the batch is retried, never a crash.
// Reasons never hold a secret (clientSecret, password, headerValue, tokens): Scrub() removes
// them and the text is redacted (core/redaction.h).
//
// Thread-safety: HttpAuth and OAuth2TokenCache may be used from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "queuebox/options.h"
#include "queuebox/status.h"

namespace queuebox {

// destinations.<name>.auth: `type` and the validated keys of that type.
struct DestinationAuthConfig {
  std::string type;  // oauth2 | basic | header
  nlohmann::json options = nlohmann::json::object();
};

struct OAuth2AuthSettings {
  std::string client_id;
  std::string client_secret;  // secret
  std::string token_url;      // absolute http/https URL, no userinfo (as baseUrl)
  std::optional<std::string> scope;
  std::map<std::string, std::string> extra_params;  // more form fields of the token request
};

struct BasicAuthSettings {
  std::string username;
  std::string password;  // secret
};

struct HeaderAuthSettings {
  std::string header_name = "Authorization";
  std::string header_value;  // secret
};

const OptionTable<OAuth2AuthSettings>& OAuth2AuthOptions();
const OptionTable<BasicAuthSettings>& BasicAuthOptions();
const OptionTable<HeaderAuthSettings>& HeaderAuthOptions();
// The three types as variants of the http table's `auth` row (oauth2 checks tokenUrl).
std::vector<BlockVariant> HttpAuthVariants();

// OAuth2 access tokens by key (clientId@tokenUrl), with an injectable clock (tests).
class OAuth2TokenCache {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // How long before its expiry a token is refreshed, and the lifetime of a token whose answer
  // has no expires_in (QueueBox's TokenManager).
  static constexpr std::chrono::seconds kRefreshBefore{30};
  static constexpr std::chrono::seconds kDefaultLifetime{3600};

  struct Token {
    std::string access_token;
    std::optional<int64_t> expires_in_s;  // seconds; nullopt: kDefaultLifetime
  };
  using Fetch = std::function<Result<Token>()>;

  explicit OAuth2TokenCache(Clock now = [] { return std::chrono::steady_clock::now(); });
  OAuth2TokenCache(const OAuth2TokenCache&) = delete;
  OAuth2TokenCache& operator=(const OAuth2TokenCache&) = delete;

  // The cache of this process (what destinations use unless a test gives its own).
  static OAuth2TokenCache& Shared();

  // The cached token of `key` while it is more than kRefreshBefore from its expiry; otherwise
  // calls `fetch` and caches its answer. One fetch per key at a time: other callers of the key
  // wait for it and take its token (or its error; the next call fetches again).
  Result<std::string> Get(const std::string& key, const Fetch& fetch);
  // Forgets `token` of `key` (the receiver refused it with 401), so the next Get fetches a new
  // one. A newer token of the key is kept.
  void Invalidate(const std::string& key, const std::string& token);

 private:
  struct Entry {
    std::mutex fetch_mu;  // held while fetching: one request per key
    std::mutex mu;        // guards the two fields below
    std::string token;
    std::chrono::steady_clock::time_point expires_at{};
  };
  Entry& EntryOf(const std::string& key);

  Clock now_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Entry>> entries_;  // guarded by mu_; entries live on
};

class HttpAuth {
 public:
  // `config` is a validated auth block; `path` ("destinations.<name>.auth") prefixes errors.
  // `timeout_ms` bounds a token request (connect: half of it). `cache` must outlive this object.
  // kInvalidArgument for a block that does not bind.
  static Result<std::unique_ptr<HttpAuth>> Create(const DestinationAuthConfig& config,
                                                  const std::string& path, int64_t timeout_ms,
                                                  OAuth2TokenCache* cache);

  const std::string& type() const { return type_; }
  // The token endpoint (oauth2), for the start-up address check; nullopt for basic and header.
  std::optional<std::string> token_url() const;

  // The header to add to a request: {name, value}. For oauth2 a cached token or a token
  // request (blocking up to timeout_ms). kUnavailable with a scrubbed reason otherwise.
  Result<std::pair<std::string, std::string>> Header();
  // The receiver answered 401 to a request that carried `value` (from Header()): an oauth2
  // token is dropped so the next Header() asks for a new one. No-op for basic and header.
  void Rejected(const std::string& value);
  // `text` with every secret this auth knows (client secret, password, header value, the
  // tokens and encodings it sent) replaced by [REDACTED].
  std::string Scrub(std::string text) const;

 private:
  HttpAuth() = default;
  Result<OAuth2TokenCache::Token> FetchToken() const;

  std::string type_;
  OAuth2AuthSettings oauth2_;
  std::string key_;  // clientId@tokenUrl
  int64_t timeout_ms_ = 30000;
  OAuth2TokenCache* cache_ = nullptr;
  std::pair<std::string, std::string> fixed_;  // basic, header
  std::vector<std::string> secrets_;           // fixed secrets to scrub
  mutable std::mutex mu_;
  std::vector<std::string> tokens_sent_;  // guarded by mu_; the recent tokens, to scrub
};

}  // namespace queuebox
