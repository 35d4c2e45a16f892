// kafka_record_fuzz: a Kafka record as the kafka source receives it (issue 39 item 8): headers
// whose names and values are any bytes (a NUL inside a name, text that is not UTF-8, null values,
// repeated names in any letter case), a key, a value and a timestamp, through the source's
// conversion and the broker intake to the inbox row. The conversion is pure
// (KafkaHeaderStrings over KafkaHeaderBytes, KafkaBrokerMessage); librdkafka's header list is the
// one library part, compared with it.
// Input: a count byte, then per header a name (length byte, bytes), a value (length byte, 0xff:
// null, else that many bytes mod 64); a flags byte (1 key, 2 value, 4 timestamp), the key (length
// byte, bytes), 8 timestamp bytes, the rest the value.
// Properties:
// - the headers built with rd_kafka_header_add (names of any bytes, with their length) and read
//   back with rd_kafka_header_get_all convert as the pure function converts the names up to
//   their first NUL byte;
// - each converted name and value is HeaderText of its bytes (a null value ""): the bytes when
//   they are UTF-8 without NUL, else "base64:" and their base64, which decodes to them; in record
//   order, repeated names kept;
// - KafkaBrokerMessage: the body is the value (null: empty), the record key HeaderText of the key,
//   the time the timestamp;
// - the row the intake builds (default keys, no filter) can be stored (fuzz/inbox_row_checks.h);
//   its idempotency key is the last x-idempotency-key header (any letter case), trimmed, when that
//   is non-empty and at most 255 characters, else not taken from any header.
#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_util.h"
#include "inbox_row_checks.h"
#include "sources/broker_intake.h"
#include "sources/intake_parts.h"
#include "sources/kafka/kafka_source.h"

using queuebox::fuzz::Require;
namespace s = queuebox::sources;
using KrPairs = std::vector<std::pair<std::string, std::string>>;

namespace {

class KrBytes {
 public:
  explicit KrBytes(std::string_view in) : in_(in) {}
  uint8_t U8() { return pos_ < in_.size() ? static_cast<uint8_t>(in_[pos_++]) : 0; }
  std::string_view Take(size_t n) {
    n = std::min(n, in_.size() - pos_);
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  std::string_view Rest() { return Take(in_.size() - pos_); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

std::optional<std::string> KrBase64(std::string_view text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      char c = text[i + k];
      size_t at = kAlphabet.find(c);
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
        at = 0;
      } else if (at == std::string::npos || pad > 0) {
        return std::nullopt;
      }
      v = (v << 6) | static_cast<uint32_t>(at);
    }
    out.push_back(static_cast<char>(v >> 16));
    if (pad < 2) out.push_back(static_cast<char>((v >> 8) & 0xff));
    if (pad < 1) out.push_back(static_cast<char>(v & 0xff));
  }
  return out;
}

// The property of HeaderText for one converted string and the bytes it came from.
void KrCheckText(const std::string& text, std::string_view bytes) {
  if (queuebox::fuzz::StorableText(bytes)) {
    Require(text == bytes, "kafka: text that is UTF-8 without NUL stays as it is");
    return;
  }
  Require(text.rfind("base64:", 0) == 0, "kafka: other bytes are base64:");
  Require(KrBase64(std::string_view(text).substr(7)) == std::string(bytes),
          "kafka: the base64 decodes to the bytes");
}

std::string KrLower(std::string_view v) {
  std::string out(v);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const s::BrokerIntake& KrIntake() {
  static const s::BrokerIntake* intake = [] {
    auto made = s::BrokerIntake::Create("kafka", "fuzz", queuebox::BrokerSourceKeys{});
    Require(made.ok(), "kafka: the intake builds");
    return new s::BrokerIntake(std::move(made).value());
  }();
  return *intake;
}

void KrCheckIntake(const s::BrokerMessage& message) {
  std::optional<queuebox::NewInboxMessage> row = KrIntake().Receive(message);
  Require(row.has_value(), "kafka: without a filter every record gives a row");
  queuebox::fuzz::RequireStorableRow(*row);
  std::optional<std::string> header;
  for (const auto& [n, v] : message.headers) {
    if (KrLower(n) == "x-idempotency-key") header = v;
  }
  if (header) {
    std::string trimmed = s::Trimmed(*header);
    if (!trimmed.empty() && queuebox::fuzz::CodePoints(trimmed) <= 255) {
      Require(row->idempotency_key == trimmed,
              "kafka: the last x-idempotency-key header, trimmed, is the key");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  KrBytes in(std::string_view(reinterpret_cast<const char*>(data), size));
  std::vector<std::string> names;
  std::vector<std::optional<std::string>> values;
  const size_t count = in.U8() % 16;
  for (size_t i = 0; i < count; ++i) {
    names.emplace_back(in.Take(in.U8() % 32));
    uint8_t len = in.U8();
    if (len == 0xff) {
      values.emplace_back(std::nullopt);
    } else {
      values.emplace_back(std::string(in.Take(len % 64)));
    }
  }
  const uint8_t flags = in.U8();
  std::string_view key = in.Take(in.U8());
  std::string_view stamp = in.Take(8);
  int64_t ts = 0;
  std::memcpy(&ts, stamp.data(), std::min(stamp.size(), sizeof ts));
  std::string_view value = in.Rest();

  // librdkafka's list: names with their length, as a received record holds them.
  rd_kafka_headers_t* hdrs = rd_kafka_headers_new(count);
  for (size_t i = 0; i < count; ++i) {
    Require(rd_kafka_header_add(hdrs, names[i].data(), static_cast<ssize_t>(names[i].size()),
                                values[i] ? values[i]->data() : nullptr,
                                values[i] ? static_cast<ssize_t>(values[i]->size()) : 0) ==
                RD_KAFKA_RESP_ERR_NO_ERROR,
            "kafka: librdkafka takes the header");
  }
  KrPairs from_library = s::KafkaHeaderStrings(hdrs);

  s::KafkaRecordView record;
  for (size_t i = 0; i < count; ++i) {
    std::string_view name = names[i];
    name = name.substr(0, name.find('\0'));  // what rd_kafka_header_get_all's char* holds
    record.headers.push_back(
        {name, values[i] ? std::optional<std::string_view>(*values[i]) : std::nullopt});
  }
  KrPairs pure = s::KafkaHeaderStrings(record.headers);
  Require(from_library == pure, "kafka: librdkafka's list converts as the pure function");
  Require(pure.size() == count, "kafka: every header, repeated names kept");
  for (size_t i = 0; i < count; ++i) {
    KrCheckText(pure[i].first, record.headers[i].name);
    if (values[i]) {
      KrCheckText(pure[i].second, *values[i]);
    } else {
      Require(pure[i].second.empty(), "kafka: a null value is empty");
    }
  }

  if (flags & 1) record.key = key;
  if (flags & 2) record.value = value;
  if ((flags & 4) && ts >= 0) record.timestamp_ms = ts;
  s::BrokerMessage message = s::KafkaBrokerMessage(record);
  Require(message.body == (record.value ? std::string(*record.value) : std::string()),
          "kafka: the body is the value");
  Require(message.headers == pure, "kafka: the message holds the converted headers");
  Require(message.record_key ==
              (record.key ? std::optional<std::string>(s::HeaderText(key)) : std::nullopt),
          "kafka: the record key is HeaderText of the key");
  Require(message.broker_time_ms == record.timestamp_ms, "kafka: the time is the timestamp");
  rd_kafka_headers_destroy(hdrs);
  KrCheckIntake(message);
  return 0;
}
