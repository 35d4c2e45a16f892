// http_settings.cc: the http kind's table and its start-up checks (QueueBox reference §11.1,
// §11.4).
#include "sources/http/http_settings.h"

#include <algorithm>
#include <cctype>

#include "auth/auth_schemes.h"

namespace queuebox::sources {
namespace {

using nlohmann::json;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The type of the source's auth block; "" without one.
std::string AuthType(const json& block) {
  if (!block.contains("auth") || !block["auth"].is_object()) return "";
  return block["auth"].value("type", std::string());
}

// Key headers: never a credential header (those are never stored), never blank.
void CheckKeyHeaders(const json& block, std::vector<std::string>& problems) {
  std::vector<std::string> credentials = {"authorization", "proxy-authorization", "cookie"};
  const std::string type = AuthType(block);
  if (type == "api-key" || type == "hmac") {
    credentials.push_back(Lower(block["auth"].value("headerName", std::string())));
  }
  if (type == "github") credentials.push_back("x-hub-signature-256");
  if (type == "shopify") credentials.push_back("x-shopify-hmac-sha256");
  if (type == "stripe") credentials.push_back("stripe-signature");
  if (type == "standard-webhooks") {
    credentials.insert(credentials.end(), {"webhook-signature", "svix-signature"});
  }
  for (const char* key :
       {"idempotencyKeyHeader", "aggregateIdHeader", "eventTypeHeader", "scheduledAtHeader"}) {
    if (!block.contains(key) || block[key].is_null()) continue;
    const std::string name = block[key].get<std::string>();
    if (IsBlank(name)) {
      problems.push_back(std::string(key) + ": must name a header (it is blank)");
    } else if (std::find(credentials.begin(), credentials.end(), Lower(name)) !=
               credentials.end()) {
      problems.push_back(std::string(key) + ": " + name +
                         " carries a credential, which QueueBox never stores; read the key from "
                         "another header or the body");
    }
  }
}

// The checks of §11.4 that need only the http block (defaults filled).
std::vector<std::string> CheckHttpSource(const json& block) {
  std::vector<std::string> problems;
  const std::string path = block.value("path", std::string());
  if (path.empty() || path[0] != '/') {
    problems.push_back("path: must start with / (the route is inbox.basePath + path)");
  } else if (path.find_first_of("?# \t") != std::string::npos) {
    problems.push_back("path: must not hold ?, #, or blanks");
  }
  // The provider's message id is the key of standard-webhooks and stripe sources by default.
  const std::string auth = AuthType(block);
  const bool provider_key = auth == "standard-webhooks" || auth == "stripe";
  if (!HasKey(block, "idempotencyKeyPath") && !HasKey(block, "idempotencyKeyHeader") &&
      !HasKey(block, "idempotencyKeyExpression") && !provider_key) {
    problems.push_back(
        "idempotencyKeyPath: required for an http source (or set idempotencyKeyHeader or "
        "idempotencyKeyExpression, or use an auth type whose provider sends a message id: "
        "standard-webhooks, stripe)");
  }
  CheckKeyHeaders(block, problems);
  CheckCommonKeys(block, {"eventTypePath", "eventTypeExpression", "eventTypeHeader"}, problems);
  return problems;
}

OptionTable<HttpSourceSettings> BuildHttpOptions() {
  using S = HttpSourceSettings;
  OptionTable<S> t = {
      opt::Text("path", &S::path, nullptr,
                "Route path after inbox.basePath (/stripe answers POST /inbox/stripe)")
          .Required(),
      opt::Text("topic", &S::topic, "{{ eventType }}",
                "Outbox topic the relay writes: {{ eventType }} and {{ source }} render"),
      PathsOption("idempotencyKeyPath", &S::idempotency_key_path,
                  "JSONPath(s) of the idempotency key; a request without a key gets 400"),
      opt::Text("idempotencyKeyHeader", &S::idempotency_key_header, nullptr,
                "Header with the idempotency key; tried before idempotencyKeyPath"),
      opt::Text("aggregateIdHeader", &S::aggregate_id_header, nullptr,
                "Header with the aggregate id; tried before aggregateIdPath"),
      opt::Text("eventTypeHeader", &S::event_type_header, nullptr,
                "Header with the event type; tried before eventTypePath"),
      opt::Int("rateLimit.requestsPerMinute", &S::requests_per_minute, nullptr,
               "Requests per 60 s for the whole source (a token bucket); more get 429")
          .Min(1),
      opt::TypedBlock("auth", &S::auth, SourceAuthVariants(),
                      "Authentication of each request: bearer, api-key, hmac (as admin.auth), "
                      "github, shopify, standard-webhooks or stripe"),
  };
  t.Nest("", &S::keys, SourceKeyOptions());
  return t;
}

SourceCommon HttpCommon(const HttpSourceSettings& s) { return {s.topic, s.keys, s.path}; }

}  // namespace

const OptionTable<HttpSourceSettings>& HttpSourceOptions() {
  static const OptionTable<HttpSourceSettings>* const t =
      new OptionTable<HttpSourceSettings>(BuildHttpOptions());
  return *t;
}

SourceKind HttpSourceKind() {
  return MakeSourceKind<HttpSourceSettings>("http", HttpSourceOptions(), &CheckHttpSource,
                                            &HttpCommon, nullptr);
}

Result<HttpSourceSettings> BindHttpSource(const SourceConfig& source) {
  return BindSourceSettings(source, "http", HttpSourceOptions());
}

}  // namespace queuebox::sources
