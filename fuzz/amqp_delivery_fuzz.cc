// amqp_delivery_fuzz: a RabbitMQ delivery as the rabbitmq source receives it (issue 39 item 8):
// the content header's property bytes, decoded by rabbitmq-c's amqp_decode_properties (the one
// library part: what amqp_consume_message runs on the broker's frame), then the source's pure
// conversion RabbitMqBrokerMessage and the broker intake to the inbox row.
// Input: two bytes (big-endian) giving the length of the property bytes, those bytes (a flags
// word, then each property the flags name, headers as an AMQP field table), the rest the body.
// Properties, for every property list rabbitmq-c decodes:
// - the headers are AmqpHeaderStrings of the header table (present only with the headers flag),
//   each name and value UTF-8 without NUL; message_id is HeaderText of its bytes and
//   correlation_property its bytes, present only with their flags; broker_time_ms is the timestamp
//   in ms when the flag is set and it fits, else none; the body is the body;
// - the row the intake builds (default keys, no filter) can be stored (fuzz/inbox_row_checks.h):
//   the message id and correlation id, bytes from outside, included.
#include <amqp.h>
#include <amqp_framing.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "inbox_row_checks.h"
#include "sources/broker_intake.h"
#include "sources/rabbitmq/amqp_headers.h"
#include "sources/rabbitmq/rabbitmq_source.h"

using queuebox::fuzz::Require;
namespace s = queuebox::sources;

namespace {

std::optional<std::string> AdText(amqp_flags_t flags, amqp_flags_t flag, amqp_bytes_t bytes) {
  if ((flags & flag) == 0) return std::nullopt;
  if (bytes.len == 0) return std::string();
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

const s::BrokerIntake& AdIntake() {
  static const s::BrokerIntake* intake = [] {
    auto made = s::BrokerIntake::Create("rabbitmq", "fuzz", queuebox::BrokerSourceKeys{});
    Require(made.ok(), "rabbitmq: the intake builds");
    return new s::BrokerIntake(std::move(made).value());
  }();
  return *intake;
}

void AdCheck(const amqp_basic_properties_t& p, std::string_view body) {
  s::BrokerMessage m = s::RabbitMqBrokerMessage(p, body);
  Require(m.body == body, "rabbitmq: the body is the body");
  if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
    Require(m.headers == s::AmqpHeaderStrings(p.headers), "rabbitmq: the headers are the table's");
  } else {
    Require(m.headers.empty(), "rabbitmq: no headers without the flag");
  }
  for (const auto& [n, v] : m.headers) {
    Require(queuebox::fuzz::StorableText(n) && queuebox::fuzz::StorableText(v),
            "rabbitmq: header names and values are UTF-8 without NUL");
  }
  std::optional<std::string> id = AdText(p._flags, AMQP_BASIC_MESSAGE_ID_FLAG, p.message_id);
  if (id) id = s::HeaderText(*id);
  Require(m.message_id == id, "rabbitmq: message_id is HeaderText of the property's bytes");
  Require(
      m.correlation_property == AdText(p._flags, AMQP_BASIC_CORRELATION_ID_FLAG, p.correlation_id),
      "rabbitmq: correlation_property is the property's bytes");
  const bool fits =
      p.timestamp <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 1000);
  if ((p._flags & AMQP_BASIC_TIMESTAMP_FLAG) && fits) {
    Require(m.broker_time_ms == static_cast<int64_t>(p.timestamp) * 1000,
            "rabbitmq: the time is the timestamp in ms");
  } else {
    Require(!m.broker_time_ms.has_value(), "rabbitmq: no time without a timestamp that fits");
  }
  std::optional<queuebox::NewInboxMessage> row = AdIntake().Receive(std::move(m));
  Require(row.has_value(), "rabbitmq: without a filter every delivery gives a row");
  queuebox::fuzz::RequireStorableRow(*row);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  size_t len = (static_cast<size_t>(data[0]) << 8) | data[1];
  len = std::min(len, size - 2);
  std::string props(reinterpret_cast<const char*>(data) + 2, len);
  std::string_view body(reinterpret_cast<const char*>(data) + 2 + len, size - 2 - len);
  amqp_pool_t pool;
  init_amqp_pool(&pool, 4096);
  void* decoded = nullptr;
  if (amqp_decode_properties(AMQP_BASIC_CLASS, &pool, amqp_bytes_t{props.size(), props.data()},
                             &decoded) == AMQP_STATUS_OK &&
      decoded != nullptr) {
    AdCheck(*static_cast<const amqp_basic_properties_t*>(decoded), body);
  }
  empty_amqp_pool(&pool);
  return 0;
}
