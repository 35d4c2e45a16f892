#include "destinations/broker_common.h"

#include <algorithm>

#include "core/backoff.h"
#include "core/log.h"
#include "core/redaction.h"

namespace queuebox {
namespace {

bool KnownColumn(std::string_view column) {
  const auto& cols = AddressFromColumns();
  return std::find(cols.begin(), cols.end(), column) != cols.end();
}

std::string ColumnProblem(std::string_view value) {
  return "'" + std::string(value) + "' is not a column this key can read (use aggregate_type, " +
         "topic or key)";
}

}  // namespace

Result<AddressSpec> AddressSpec::Create(std::string_view destination, std::string_view field,
                                        std::string_view tmpl, std::string_view from_key,
                                        const std::optional<std::string>& from) {
  std::string prefix = "destinations." + std::string(destination) + ".";
  if (from && !KnownColumn(*from)) {
    return InvalidArgument(prefix + std::string(from_key) + ": " + ColumnProblem(*from));
  }
  Result<Template> t = Template::CompileAddress(tmpl);
  if (!t.ok()) {
    return InvalidArgument(prefix + std::string(field) + ": " + t.status().message());
  }
  return AddressSpec(std::string(field), std::move(t).value(), from);
}

std::string AddressSpec::Render(const OutboxRow& row, const TemplateContext& context) const {
  if (from_) {
    if (*from_ == "topic") return row.topic;
    if (*from_ == "key") return row.key.value_or("");
    return row.aggregate_type.value_or("");
  }
  return tmpl_.Render(context);
}

void ValidateAddressKeys(const nlohmann::json& block, std::string_view field,
                         std::string_view from_key, std::vector<std::string>* problems) {
  auto it = block.find(std::string(field));
  if (it != block.end() && it->is_string()) {
    Status s = ValidateAddressTemplate(it->get<std::string>());
    if (!s.ok()) problems->push_back(std::string(field) + ": " + s.message());
  }
  auto from = block.find(std::string(from_key));
  if (from != block.end() && from->is_string() && !KnownColumn(from->get<std::string>())) {
    problems->push_back(std::string(from_key) + ": " + ColumnProblem(from->get<std::string>()));
  }
}

Result<HeaderList> MergeRowHeaders(const std::map<std::string, std::string>& static_headers,
                                   std::string_view row_headers) {
  HeaderList out(static_headers.begin(), static_headers.end());
  if (row_headers.empty()) return out;
  nlohmann::json j = nlohmann::json::parse(row_headers, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgument("the row's headers are not a JSON object");
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it->is_null()) continue;
    std::string value = it->is_string()
                            ? it->get<std::string>()
                            : it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    auto same =
        std::find_if(out.begin(), out.end(), [&](const auto& h) { return h.first == it.key(); });
    if (same != out.end()) {
      same->second = std::move(value);
    } else {
      out.emplace_back(it.key(), std::move(value));
    }
  }
  return out;
}

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  });
}

std::string FailureReason(std::string_view text, int max_chars) {
  return SanitizeError(text, static_cast<std::size_t>(std::max(max_chars, 1)));
}

std::optional<std::string> OptionalString(const nlohmann::json& block, const char* key) {
  auto it = block.find(key);
  if (it == block.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// ---- ReconnectLoop ------------------------------------------------------------------------------

ReconnectLoop::ReconnectLoop(std::string destination, std::function<Status()> attempt,
                             int64_t initial_ms, int64_t cap_ms)
    : destination_(std::move(destination)),
      attempt_(std::move(attempt)),
      initial_ms_(initial_ms),
      cap_ms_(cap_ms) {}

ReconnectLoop::~ReconnectLoop() { Stop(); }

void ReconnectLoop::Kick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopped_) return;
  wanted_ = true;
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  cv_.notify_all();
}

void ReconnectLoop::Stop() {
  std::thread t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    t = std::move(thread_);
  }
  cv_.notify_all();
  if (t.joinable()) t.join();
}

void ReconnectLoop::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  int failures = 0;
  while (!stopped_) {
    cv_.wait(lock, [&] { return wanted_ || stopped_; });
    if (stopped_) break;
    wanted_ = false;
    lock.unlock();
    Status s = attempt_();
    lock.lock();
    if (s.ok()) {
      failures = 0;
      continue;
    }
    ++failures;
    int64_t delay = ReconnectDelayMs(failures, initial_ms_, cap_ms_);
    if (failures == 1 || failures % 10 == 0) {
      log::Warn("The destination is not reachable; reconnecting in the background",
                {{"destination", destination_},
                 {"attempts", std::to_string(failures)},
                 {"next_attempt_ms", std::to_string(delay)},
                 {"reason", SanitizeError(s.message(), 500)}});
    }
    // The next attempt after the delay (a Kick does not shorten it); a Stop ends the wait.
    cv_.wait_for(lock, std::chrono::milliseconds(delay), [&] { return stopped_; });
    wanted_ = true;
  }
}

}  // namespace queuebox
