// row_headers_fuzz: what a destination checks before it sends a row (destinations/
// broker_common.h): the row's `headers` JSON, its payload, and the key, topic, exchange and
// subject each broker carries. The input is the headers text, a NUL byte, then the payload; the
// payload is also tried as a key, a Kafka topic, an AMQP short string and a NATS subject.
// Properties: no check throws; merged headers keep every row header (a row header replaces a
// static one of the same name) and a list that passes CheckHeaderListText holds no CR, LF or
// NUL; a refusal names its field; FailureReason respects its cap.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "destinations/broker_common.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string_view headers = input.substr(0, nul);
  std::string_view payload = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  namespace d = queuebox;
  queuebox::Result<d::HeaderList> parsed = d::ParseRowHeaders(headers);
  static const std::map<std::string, std::string> kStatic{{"X-Static", "1"},
                                                          {"Content-Type", "application/json"}};
  queuebox::Result<d::HeaderList> merged = d::MergeRowHeaders(kStatic, headers);
  Require(parsed.ok() == merged.ok(), "MergeRowHeaders refuses what ParseRowHeaders refuses");
  if (parsed.ok()) {
    for (const auto& [name, value] : *parsed) {
      bool kept = false;
      for (const auto& [n, v] : *merged) kept = kept || (n == name && v == value);
      Require(kept, "every row header is merged");
    }
    if (d::CheckHeaderListText(*merged).ok()) {
      for (const auto& [name, value] : *merged) {
        Require((name + value).find_first_of(std::string("\r\n\0", 3)) == std::string::npos,
                "a passing header list holds no CR, LF or NUL");
      }
    }
  } else {
    Require(parsed.status().message().starts_with("headers"), "a refusal names headers");
  }
  queuebox::Status json = d::CheckPayloadIsJson(payload);
  if (!json.ok()) Require(json.message().starts_with("payload"), "a refusal names payload");
  queuebox::Status text = d::CheckHeaderText("key", payload);
  if (!text.ok()) Require(text.message().starts_with("key"), "a refusal names key");
  queuebox::Status topic = d::CheckKafkaTopic(payload);
  if (topic.ok()) {  // (an empty topic is the destination's own case: it retries)
    Require(payload.size() <= 249 && payload != "." && payload != "..",
            "a legal Kafka topic has at most 249 characters");
  }
  queuebox::Status amqp = d::CheckAmqpShortString("exchange", payload);
  Require(amqp.ok() == (payload.size() <= 255), "an AMQP short string holds 255 bytes");
  queuebox::Status subject = d::CheckNatsSubject(payload);
  if (subject.ok()) {
    Require(!payload.empty() && payload.find("..") == std::string_view::npos,
            "a NATS subject has no empty token");
  }
  (void)d::IsBlank(payload);
  int cap = static_cast<int>(size % 300);
  std::string reason = d::FailureReason(payload, cap);
  if (queuebox::fuzz::ValidUtf8(payload)) {
    Require(queuebox::fuzz::CodePoints(reason) <= static_cast<size_t>(cap),
            "FailureReason respects its cap");
  }
  return 0;
}
