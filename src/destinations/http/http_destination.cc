// http_destination.cc: option table, URL rules and the libcurl multi publisher.
#include "destinations/http/http_destination.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <utility>

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
  if (Authority(base_url).find('@') != std::string_view::npos || UrlPart(u.get(), CURLUPART_USER) ||
      UrlPart(u.get(), CURLUPART_PASSWORD)) {
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
  DestinationType t;
  t.type = "http";
  t.options = {
      OptionSpec{.key = "baseUrl",
                 .type = OptionType::kString,
                 .default_value = nullptr,
                 .required = true,
                 .enum_values = {},
                 .description = "Absolute http/https URL of the receiver, without credentials"},
      OptionSpec{.key = "path",
                 .type = OptionType::kString,
                 .default_value = "/",
                 .enum_values = {},
                 .description = "Path joined to baseUrl (no '.' or '..' segments)"},
      OptionSpec{.key = "timeoutMs",
                 .type = OptionType::kMillis,
                 .default_value = 30000,
                 .min = 1,
                 .enum_values = {},
                 .description = "Request timeout in ms; the connect timeout is half of it"},
  };
  t.validate = ValidateHttpBlock;
  t.create = [](const DestinationConfig& config,
                const DestinationContext& context) -> Result<std::unique_ptr<Destination>> {
    HttpDestinationSettings s;
    s.name = config.name;
    try {
      s.base_url = config.options.at("baseUrl").get<std::string>();
      s.path = config.options.value("path", std::string("/"));
      s.timeout_ms = config.options.value("timeoutMs", int64_t{30000});
    } catch (const nlohmann::json::exception& e) {
      return InvalidArgument("destinations." + config.name + ": " + e.what());
    }
    s.static_headers = config.headers;
    s.max_error_body_bytes = context.max_error_body_bytes;
    Result<std::unique_ptr<HttpDestination>> d = HttpDestination::Create(std::move(s));
    if (!d.ok()) return d.status();
    return std::unique_ptr<Destination>(std::move(d).value());
  };
  return t;
}

// ---- HttpDestination -------------------------------------------------------------------------

class HttpDestination::Worker {};

HttpDestination::HttpDestination(HttpDestinationSettings settings, std::string url)
    : settings_(std::move(settings)), url_(std::move(url)) {}

HttpDestination::~HttpDestination() = default;

Result<std::unique_ptr<HttpDestination>> HttpDestination::Create(HttpDestinationSettings settings) {
  Result<std::string> url = JoinHttpUrl(settings.base_url, settings.path);
  if (!url.ok()) {
    return InvalidArgument("destinations." + settings.name + "." + url.status().message());
  }
  return std::unique_ptr<HttpDestination>(
      new HttpDestination(std::move(settings), std::move(url).value()));
}

Status HttpDestination::Start() { return Status::Ok(); }

void HttpDestination::PublishBatch(std::span<const OutboundMessage> batch, OutcomeSink& sink) {
  for (size_t i = 0; i < batch.size(); ++i) sink.Report(i, Outcome::Retry("not implemented yet"));
}

void HttpDestination::Stop() {}

}  // namespace queuebox
