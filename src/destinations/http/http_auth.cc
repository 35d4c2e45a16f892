// http_auth.cc: option tables of the auth types, the OAuth2 token cache and token requests.
#include "destinations/http/http_auth.h"

#include <curl/curl.h>

#include <algorithm>
#include <cstdlib>

#include "core/redaction.h"
#include "destinations/http/http_destination.h"

namespace queuebox {
namespace {

constexpr char kRedacted[] = "[REDACTED]";

std::string Base64(std::string_view in) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8) |
                 static_cast<uint8_t>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t n = static_cast<uint8_t>(in[i]) << 16;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t n = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += '=';
  }
  return out;
}

void ReplaceAll(std::string& text, const std::string& secret) {
  if (secret.empty()) return;
  for (size_t p = text.find(secret); p != std::string::npos;
       p = text.find(secret, p + sizeof(kRedacted) - 1)) {
    text.replace(p, secret.size(), kRedacted);
  }
}

struct EasyDeleter {
  void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct AuthSlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// application/x-www-form-urlencoded "k=v&k=v" (curl_easy_escape encodes everything but
// unreserved characters, which the form encoding allows).
std::string FormEncode(CURL* easy, const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string out;
  for (const auto& [k, v] : fields) {
    char* ek = curl_easy_escape(easy, k.data(), static_cast<int>(k.size()));
    char* ev = curl_easy_escape(easy, v.data(), static_cast<int>(v.size()));
    if (!out.empty()) out += '&';
    out += ek != nullptr ? ek : "";
    out += '=';
    out += ev != nullptr ? ev : "";
    curl_free(ek);
    curl_free(ev);
  }
  return out;
}

size_t CollectBody(char* data, size_t size, size_t count, void* user) {
  auto* body = static_cast<std::string*>(user);
  size_t n = size * count;
  if (body->size() < 64 * 1024) body->append(data, std::min(n, 64 * 1024 - body->size()));
  return n;
}

}  // namespace

// ---- option tables -----------------------------------------------------------------------------

const OptionTable<OAuth2AuthSettings>& OAuth2AuthOptions() {
  using S = OAuth2AuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Text("clientId", &S::client_id, nullptr, "OAuth2 client id").Required(),
      opt::Secret("clientSecret", &S::client_secret, "OAuth2 client secret").Required(),
      opt::Text("tokenUrl", &S::token_url, nullptr,
                "Token endpoint: absolute http/https URL without credentials")
          .Required(),
      opt::Text("scope", &S::scope, nullptr, "Scope of the token request (sent when set)"),
      opt::TextMap("extraParams", &S::extra_params,
                   "More form fields of the token request (audience, resource, ...)"),
  };
  return *table;
}

const OptionTable<BasicAuthSettings>& BasicAuthOptions() {
  using S = BasicAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Text("username", &S::username, nullptr, "User name").Required(),
      opt::Secret("password", &S::password, "Password").Required(),
  };
  return *table;
}

const OptionTable<HeaderAuthSettings>& HeaderAuthOptions() {
  using S = HeaderAuthSettings;
  static const OptionTable<S>* const table = new OptionTable<S>{
      opt::Text("headerName", &S::header_name, "Authorization", "Name of the header"),
      opt::Secret("headerValue", &S::header_value, "Value of the header").Required(),
  };
  return *table;
}

std::vector<BlockVariant> HttpAuthVariants() {
  BlockVariant oauth2{"oauth2", OAuth2AuthOptions().specs(), nullptr, nullptr};
  oauth2.validate = [](const nlohmann::json& block) {
    std::vector<std::string> problems;
    auto url = block.find("tokenUrl");
    if (url != block.end() && url->is_string()) {
      Status s = ValidateHttpUrl(url->get_ref<const std::string&>());
      if (!s.ok()) problems.push_back("tokenUrl: " + s.message());
    }
    return problems;
  };
  BlockVariant basic{"basic", BasicAuthOptions().specs(), nullptr, nullptr};
  BlockVariant header{"header", HeaderAuthOptions().specs(), nullptr, nullptr};
  header.validate = [](const nlohmann::json& block) {
    std::vector<std::string> problems;
    auto name = block.find("headerName");
    if (name != block.end() && name->is_string()) {
      const std::string& n = name->get_ref<const std::string&>();
      if (n.empty() || n.find_first_of(":; \t\r\n") != std::string::npos) {
        problems.push_back("headerName: must be a header name (no ':', ';', spaces or breaks)");
      }
    }
    return problems;
  };
  return {basic, header, oauth2};
}

// ---- OAuth2TokenCache --------------------------------------------------------------------------

OAuth2TokenCache::OAuth2TokenCache(Clock now) : now_(std::move(now)) {}

OAuth2TokenCache& OAuth2TokenCache::Shared() {
  static OAuth2TokenCache* const cache = new OAuth2TokenCache();
  return *cache;
}

OAuth2TokenCache::Entry& OAuth2TokenCache::EntryOf(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Entry>& e = entries_[key];
  if (!e) e = std::make_unique<Entry>();
  return *e;
}

Result<std::string> OAuth2TokenCache::Get(const std::string& key, const Fetch& fetch) {
  Entry& e = EntryOf(key);
  auto fresh = [&]() -> std::optional<std::string> {
    std::lock_guard<std::mutex> lock(e.mu);
    if (!e.token.empty() && now_() + kRefreshBefore < e.expires_at) return e.token;
    return std::nullopt;
  };
  if (std::optional<std::string> t = fresh()) return *t;
  std::lock_guard<std::mutex> one_fetch(e.fetch_mu);
  // A caller that waited here takes the token the fetch before it brought.
  if (std::optional<std::string> t = fresh()) return *t;
  Result<Token> token = fetch();
  if (!token.ok()) return token.status();
  std::chrono::seconds lifetime =
      token->expires_in_s ? std::chrono::seconds(*token->expires_in_s) : kDefaultLifetime;
  std::lock_guard<std::mutex> lock(e.mu);
  e.token = token->access_token;
  e.expires_at = now_() + lifetime;
  return e.token;
}

void OAuth2TokenCache::Invalidate(const std::string& key, const std::string& token) {
  Entry& e = EntryOf(key);
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.token == token) e.token.clear();
}

// ---- HttpAuth ----------------------------------------------------------------------------------

Result<std::unique_ptr<HttpAuth>> HttpAuth::Create(const DestinationAuthConfig& config,
                                                   const std::string& path, int64_t timeout_ms,
                                                   OAuth2TokenCache* cache) {
  std::unique_ptr<HttpAuth> a(new HttpAuth());
  a->type_ = config.type;
  a->timeout_ms_ = timeout_ms > 0 ? timeout_ms : 30000;
  a->cache_ = cache;
  if (config.type == "oauth2") {
    QB_RETURN_IF_ERROR(OAuth2AuthOptions().Bind(config.options, a->oauth2_, path));
    if (Status url = ValidateHttpUrl(a->oauth2_.token_url); !url.ok()) {
      return InvalidArgument(path + ".tokenUrl: " + url.message());
    }
    if (cache == nullptr) return InvalidArgument(path + ": no token cache");
    a->key_ = a->oauth2_.client_id + "@" + a->oauth2_.token_url;
    a->secrets_ = {a->oauth2_.client_secret};
  } else if (config.type == "basic") {
    BasicAuthSettings s;
    QB_RETURN_IF_ERROR(BasicAuthOptions().Bind(config.options, s, path));
    std::string encoded = Base64(s.username + ":" + s.password);
    a->fixed_ = {"Authorization", "Basic " + encoded};
    a->secrets_ = {s.password, encoded};
  } else if (config.type == "header") {
    HeaderAuthSettings s;
    QB_RETURN_IF_ERROR(HeaderAuthOptions().Bind(config.options, s, path));
    a->fixed_ = {s.header_name, s.header_value};
    a->secrets_ = {s.header_value};
  } else {
    return InvalidArgument(path + ".type: '" + config.type +
                           "' is not one of basic, header, oauth2");
  }
  // Longest first, so a secret that contains another is replaced whole.
  std::sort(a->secrets_.begin(), a->secrets_.end(),
            [](const std::string& x, const std::string& y) { return x.size() > y.size(); });
  return a;
}

std::optional<std::string> HttpAuth::token_url() const {
  if (type_ != "oauth2") return std::nullopt;
  return oauth2_.token_url;
}

Result<std::pair<std::string, std::string>> HttpAuth::Header() {
  if (type_ != "oauth2") return fixed_;
  Result<std::string> token = cache_->Get(key_, [this] { return FetchToken(); });
  if (!token.ok()) return token.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(tokens_sent_.begin(), tokens_sent_.end(), *token) == tokens_sent_.end()) {
      tokens_sent_.push_back(*token);
      if (tokens_sent_.size() > 4) tokens_sent_.erase(tokens_sent_.begin());
    }
  }
  return std::make_pair(std::string("Authorization"), "Bearer " + *token);
}

void HttpAuth::Rejected(const std::string& value) {
  if (type_ != "oauth2") return;
  constexpr std::string_view kBearer = "Bearer ";
  if (value.rfind(kBearer, 0) != 0) return;
  cache_->Invalidate(key_, value.substr(kBearer.size()));
}

std::string HttpAuth::Scrub(std::string text) const {
  for (const std::string& s : secrets_) ReplaceAll(text, s);
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::string& t : tokens_sent_) ReplaceAll(text, t);
  return text;
}

Result<OAuth2TokenCache::Token> HttpAuth::FetchToken() const {
  // The reason names the endpoint (it holds no credentials: userinfo is refused) and is
  // scrubbed and redacted: an endpoint may echo the form it received.
  const std::string what = "OAuth2 token request to " + oauth2_.token_url;
  auto fail = [&](const std::string& reason) -> Status {
    return Unavailable(SanitizeError(Scrub(what + " failed: " + reason), 2000));
  };
  std::unique_ptr<CURL, EasyDeleter> easy(curl_easy_init());
  if (!easy) return fail("curl_easy_init failed");
  std::vector<std::pair<std::string, std::string>> fields = {
      {"grant_type", "client_credentials"},
      {"client_id", oauth2_.client_id},
      {"client_secret", oauth2_.client_secret},
  };
  if (oauth2_.scope) fields.emplace_back("scope", *oauth2_.scope);
  for (const auto& [k, v] : oauth2_.extra_params) fields.emplace_back(k, v);
  std::string form = FormEncode(easy.get(), fields);
  std::unique_ptr<curl_slist, AuthSlistDeleter> headers(
      curl_slist_append(nullptr, "Content-Type: application/x-www-form-urlencoded"));
  headers.reset(curl_slist_append(headers.release(), "Accept: application/json"));
  std::string body;
  char error[CURL_ERROR_SIZE] = {};
  CURL* e = easy.get();
  long timeout = static_cast<long>(timeout_ms_);
  curl_easy_setopt(e, CURLOPT_URL, oauth2_.token_url.c_str());
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, form.c_str());
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(form.size()));
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(e, CURLOPT_USERAGENT, "queuebox-cpp/" QUEUEBOX_VERSION);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, std::max(1L, timeout / 2));
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, CollectBody);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, error);
  CURLcode rc = curl_easy_perform(e);
  if (rc == CURLE_OPERATION_TIMEDOUT) {
    return fail("no answer within " + std::to_string(timeout_ms_) + "ms");
  }
  if (rc != CURLE_OK) return fail(error[0] != '\0' ? error : curl_easy_strerror(rc));
  long code = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  auto snippet = [&] {
    std::string s = body.substr(0, 300);
    return s.find_first_not_of(" \t\r\n") == std::string::npos ? std::string() : " - " + s;
  };
  if (code < 200 || code >= 300) return fail("HTTP " + std::to_string(code) + snippet());
  nlohmann::json answer = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    return fail("the answer is not a JSON object" + snippet());
  }
  auto token = answer.find("access_token");
  if (token == answer.end() || !token->is_string() ||
      token->get_ref<const std::string&>().empty()) {
    return fail("the answer has no access_token string");
  }
  OAuth2TokenCache::Token out;
  out.access_token = token->get<std::string>();
  auto expires = answer.find("expires_in");
  if (expires != answer.end() && !expires->is_null()) {
    std::optional<double> seconds;
    if (expires->is_number()) {
      seconds = expires->get<double>();
    } else if (expires->is_string()) {
      const std::string& text = expires->get_ref<const std::string&>();
      char* end = nullptr;
      double v = std::strtod(text.c_str(), &end);
      if (!text.empty() && end != nullptr && *end == '\0') seconds = v;
    }
    if (!seconds || !(*seconds > 0) || *seconds > 1e9) {
      return fail("the answer's expires_in is not a positive number of seconds");
    }
    out.expires_in_s = static_cast<int64_t>(*seconds);
  }
  return out;
}

}  // namespace queuebox
