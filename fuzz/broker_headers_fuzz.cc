// broker_headers_fuzz: row headers as each broker destination serialises them, and broker headers
// as each broker source reads them back (issue 17 item 4). The input is a row's `headers` JSON
// text, a NUL byte, then bytes that build an AMQP 0-9-1 header table (every field kind, nested
// tables and arrays) and are also decoded as an encoded table. All in memory: no connection.
// Properties:
// - nothing throws or crashes; a header list the destination sends builds without a nats.c or
//   rabbitmq-c error;
// - Kafka: KafkaRecordHeaders then KafkaHeaderStrings gives the merged headers in order (names
//   up to a NUL byte, names and values through HeaderText: a NUL makes "base64:"), then
//   x-message-id, x-topic, x-attempt; the relay's three are the last of their names in any letter
//   case, so the inbox (StoredHeaders) keeps the relay's values;
// - RabbitMQ: RabbitMqStringHeaders and RabbitMqHeaderEntries, encoded and decoded by rabbitmq-c,
//   then AmqpHeaderStrings give x-topic (a row header of that exact name replaces it: "row
//   wins"), x-attempt as an integer's text unless a header replaced it, the other headers once
//   per exact name, then the integer headers; the table holds no name twice;
// - NATS (lists that pass CheckHeaderListText and CheckHeaderNames): SetNatsHeaders then
//   NatsHeaderStrings gives one value per exact name, the later one (blanks at its ends trimmed,
//   as on the wire), with x-message-id, x-topic, x-attempt, x-message-key and Nats-Msg-Id always
//   the relay's (a name differing only in letter case is another header); no name is read
//   through another that it prefixes (nats.c's own lookup does that);
// - AmqpHeaderStrings of any table, built or decoded: every name and value is UTF-8 without NUL
//   (amqp_headers.h), one pair per non-void entry, numbers read back as their value, decimals
//   and timestamps in their documented text, tables and arrays as JSON of the same size; a table
//   read after an encode and decode gives the same strings.
#include <amqp.h>
#include <librdkafka/rdkafka.h>
#include <nats/nats.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "destinations/broker_common.h"
#include "destinations/kafka/kafka_destination.h"
#include "destinations/nats/nats_destination.h"
#include "destinations/rabbitmq/rabbitmq_destination.h"
#include "fuzz_util.h"
#include "sources/broker_intake.h"
#include "sources/intake_parts.h"
#include "sources/kafka/kafka_source.h"
#include "sources/nats/nats_source.h"
#include "sources/rabbitmq/amqp_headers.h"

// rabbitmq-c's own table codec (exported by librabbitmq, declared in its private amqp_private.h):
// what the broker's bytes go through before the source reads them.
extern "C" {
int amqp_encode_table(amqp_bytes_t encoded, amqp_table_t* input, size_t* offset);
int amqp_decode_table(amqp_bytes_t encoded, amqp_pool_t* pool, amqp_table_t* output,
                      size_t* offset);
}

using queuebox::fuzz::Require;
using queuebox::fuzz::ValidUtf8;
namespace s = queuebox::sources;
using Pairs = std::vector<std::pair<std::string, std::string>>;

namespace {

std::string Lower(std::string_view v) {
  std::string out(v);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `v` without the blanks nats.c trims from a header value (isspace).
std::string Trimmed(std::string_view v) {
  auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!v.empty() && blank(v.front())) v.remove_prefix(1);
  while (!v.empty() && blank(v.back())) v.remove_suffix(1);
  return std::string(v);
}

bool Text(std::string_view v) { return ValidUtf8(v) && v.find('\0') == std::string_view::npos; }

// The value of the last pair named `name` in any letter case, or nullopt.
std::optional<std::string> LastAnyCase(const Pairs& pairs, std::string_view name) {
  const std::string lower = Lower(name);
  for (auto it = pairs.rbegin(); it != pairs.rend(); ++it) {
    if (Lower(it->first) == lower) return it->second;
  }
  return std::nullopt;
}

// ---- Kafka ----

void CheckKafka(const queuebox::HeaderList& merged, const queuebox::OutboxRow& row) {
  rd_kafka_headers_t* hdrs = queuebox::KafkaRecordHeaders(merged, row);
  Pairs read = s::KafkaHeaderStrings(hdrs);
  rd_kafka_headers_destroy(hdrs);
  Pairs expected;
  for (const auto& [n, v] : merged)
    expected.emplace_back(s::HeaderText(n.c_str()), s::HeaderText(v));
  expected.emplace_back("x-message-id", row.id);
  expected.emplace_back("x-topic", row.topic);
  expected.emplace_back("x-attempt", std::to_string(row.attempt));
  Require(read == expected, "kafka: the source reads the record headers the destination built");
  for (size_t i = merged.size(); i < expected.size(); ++i) {
    Require(LastAnyCase(read, expected[i].first) == expected[i].second,
            "kafka: a relay header is the last of its name in any letter case");
  }
  nlohmann::json stored = nlohmann::json::parse(s::StoredHeaders(read, {}), nullptr, false);
  Require(stored.is_object(), "kafka: the stored headers are a JSON object");
  Require(stored.value("x-message-id", "") == row.id && stored.value("x-topic", "") == row.topic &&
              stored.value("x-attempt", "") == std::to_string(row.attempt),
          "kafka: the inbox keeps the relay's x-message-id, x-topic and x-attempt");
}

// ---- RabbitMQ ----

std::optional<Pairs> EncodeDecode(amqp_table_t table, amqp_pool_t* pool) {
  static std::vector<char> buf(1 << 20);  // a table of a 4 KiB input is far smaller
  size_t offset = 0;
  if (amqp_encode_table(amqp_bytes_t{buf.size(), buf.data()}, &table, &offset) != AMQP_STATUS_OK) {
    return std::nullopt;
  }
  amqp_table_t decoded;
  size_t read = 0;
  int rc = amqp_decode_table(amqp_bytes_t{offset, buf.data()}, pool, &decoded, &read);
  Require(rc == AMQP_STATUS_OK && read == offset, "amqp: an encoded table decodes");
  return s::AmqpHeaderStrings(decoded);
}

void CheckRabbitMq(const queuebox::HeaderList& merged, const queuebox::OutboxRow& row,
                   const std::map<std::string, int64_t>& integer_headers) {
  for (const auto& [n, v] : merged) {
    if (!queuebox::CheckAmqpShortString("headers: a name", n).ok()) return;  // a Reject
  }
  queuebox::HeaderList strings =
      queuebox::RabbitMqStringHeaders(row.topic, merged, integer_headers);
  std::vector<amqp_table_entry_t> entries =
      queuebox::RabbitMqHeaderEntries(strings, row.attempt, integer_headers);
  // The model: x-topic first, replaced in place by a later header of its exact name; each other
  // name once, at its first place, with its last value; integer headers replace and come last.
  queuebox::HeaderList model = {{"x-topic", row.topic}};
  for (const auto& header : merged) {  // not a structured binding: clang 14 cannot capture one
    auto same = std::find_if(model.begin(), model.end(),
                             [&](const auto& h) { return h.first == header.first; });
    if (same != model.end()) {
      same->second = header.second;
    } else {
      model.push_back(header);
    }
  }
  bool attempt_replaced = integer_headers.count("x-attempt") > 0;
  for (const auto& [n, v] : model) attempt_replaced = attempt_replaced || n == "x-attempt";
  Pairs expected;
  for (const auto& [n, v] : model) {
    if (integer_headers.count(n) > 0) continue;
    expected.emplace_back(s::HeaderText(n), s::HeaderText(v));
    if (n == "x-topic" && !attempt_replaced) {
      expected.emplace_back("x-attempt", std::to_string(row.attempt));
    }
  }
  for (const auto& [n, v] : integer_headers) expected.emplace_back(n, std::to_string(v));

  std::vector<std::string> names;
  for (const auto& e : entries) {
    names.emplace_back(static_cast<const char*>(e.key.bytes), e.key.len);
  }
  std::sort(names.begin(), names.end());
  Require(std::adjacent_find(names.begin(), names.end()) == names.end(),
          "rabbitmq: the header table holds no name twice");

  amqp_table_t table{static_cast<int>(entries.size()), entries.data()};
  Require(s::AmqpHeaderStrings(table) == expected, "rabbitmq: the table reads as the model");
  amqp_pool_t pool;
  init_amqp_pool(&pool, 4096);
  std::optional<Pairs> wire = EncodeDecode(table, &pool);
  Require(wire.has_value(), "rabbitmq: the header table encodes");
  Require(*wire == expected, "rabbitmq: the source reads the table the destination built");
  empty_amqp_pool(&pool);
}

// ---- NATS ----

void CheckNats(const queuebox::HeaderList& merged, const queuebox::OutboxRow& row, bool jet) {
  // The NATS destination's checks (a Reject otherwise): no CR, LF or NUL, and names that come
  // back as themselves from a line "name: value".
  if (!queuebox::CheckHeaderListText(merged).ok() || !queuebox::CheckHeaderNames(merged).ok()) {
    return;
  }
  natsMsg* m = nullptr;
  Require(natsMsg_Create(&m, "orders.created", nullptr, "{}", 2) == NATS_OK, "nats: a message");
  natsStatus st = queuebox::SetNatsHeaders(m, merged, row, jet);
  Require(st == NATS_OK, "nats: headers that pass the destination's checks are set");
  Pairs read = s::NatsHeaderStrings(m);
  natsMsg_Destroy(m);
  std::map<std::string, std::string> model;
  for (const auto& [n, v] : merged) model[n] = v;
  model["x-message-id"] = row.id;
  model["x-topic"] = row.topic;
  model["x-attempt"] = std::to_string(row.attempt);
  if (row.key) model["x-message-key"] = *row.key;
  if (jet) model["Nats-Msg-Id"] = row.id;
  std::sort(read.begin(), read.end());
  // Read as a receiver does: off the encoded lines, so a value loses its blanks at both ends.
  Pairs expected;
  for (const auto& [n, v] : model) expected.emplace_back(n, Trimmed(v));
  Require(read == expected, "nats: the source reads one value per exact name, the relay's last");
}

// ---- AMQP tables from bytes ----

class Bytes {
 public:
  explicit Bytes(std::string_view in) : in_(in) {}
  uint8_t U8() { return pos_ < in_.size() ? static_cast<uint8_t>(in_[pos_++]) : 0; }
  template <typename T>
  T Num() {
    unsigned char raw[sizeof(T)] = {};
    for (unsigned char& c : raw) c = U8();
    T v;
    std::memcpy(&v, raw, sizeof v);
    return v;
  }
  std::string_view Take(size_t n) {
    n = std::min(n, in_.size() - pos_);
    std::string_view out = in_.substr(pos_, n);
    pos_ += n;
    return out;
  }
  bool done() const { return pos_ >= in_.size(); }

 private:
  std::string_view in_;
  size_t pos_ = 0;
};

// Builds tables whose memory lives in the builder (stable addresses: deques of finished parts).
class TableBuilder {
 public:
  explicit TableBuilder(Bytes& in) : in_(in) {}
  amqp_table_t Table(int depth) {
    std::vector<amqp_table_entry_t> entries(in_.U8() % 9);
    for (auto& e : entries) {
      e.key = Keep(in_.Take(in_.U8() % 24));
      e.value = Field(depth);
    }
    tables_.push_back(std::move(entries));
    return amqp_table_t{static_cast<int>(tables_.back().size()), tables_.back().data()};
  }

 private:
  amqp_bytes_t Keep(std::string_view b) {
    strings_.emplace_back(b);
    return amqp_bytes_t{strings_.back().size(), strings_.back().data()};
  }

  amqp_field_value_t Field(int depth) {
    static constexpr uint8_t kKinds[] = {
        AMQP_FIELD_KIND_BOOLEAN, AMQP_FIELD_KIND_I8,    AMQP_FIELD_KIND_U8,
        AMQP_FIELD_KIND_I16,     AMQP_FIELD_KIND_U16,   AMQP_FIELD_KIND_I32,
        AMQP_FIELD_KIND_U32,     AMQP_FIELD_KIND_I64,   AMQP_FIELD_KIND_U64,
        AMQP_FIELD_KIND_F32,     AMQP_FIELD_KIND_F64,   AMQP_FIELD_KIND_DECIMAL,
        AMQP_FIELD_KIND_UTF8,    AMQP_FIELD_KIND_BYTES, AMQP_FIELD_KIND_TIMESTAMP,
        AMQP_FIELD_KIND_TABLE,   AMQP_FIELD_KIND_ARRAY, AMQP_FIELD_KIND_VOID};
    amqp_field_value_t v;
    std::memset(&v, 0, sizeof v);
    v.kind = kKinds[in_.U8() % sizeof kKinds];
    // rabbitmq-c refuses tables nested deeper than 100 (TABLE_DEPTH_LIMIT); stay below.
    if ((v.kind == AMQP_FIELD_KIND_TABLE || v.kind == AMQP_FIELD_KIND_ARRAY) && depth >= 90) {
      v.kind = AMQP_FIELD_KIND_VOID;
    }
    switch (v.kind) {
      case AMQP_FIELD_KIND_BOOLEAN:
        v.value.boolean = in_.U8() % 2;
        break;
      case AMQP_FIELD_KIND_I8:
        v.value.i8 = in_.Num<int8_t>();
        break;
      case AMQP_FIELD_KIND_U8:
        v.value.u8 = in_.Num<uint8_t>();
        break;
      case AMQP_FIELD_KIND_I16:
        v.value.i16 = in_.Num<int16_t>();
        break;
      case AMQP_FIELD_KIND_U16:
        v.value.u16 = in_.Num<uint16_t>();
        break;
      case AMQP_FIELD_KIND_I32:
        v.value.i32 = in_.Num<int32_t>();
        break;
      case AMQP_FIELD_KIND_U32:
        v.value.u32 = in_.Num<uint32_t>();
        break;
      case AMQP_FIELD_KIND_I64:
        v.value.i64 = in_.Num<int64_t>();
        break;
      case AMQP_FIELD_KIND_U64:
      case AMQP_FIELD_KIND_TIMESTAMP:
        v.value.u64 = in_.Num<uint64_t>();
        break;
      case AMQP_FIELD_KIND_F32:
        v.value.f32 = in_.Num<float>();
        break;
      case AMQP_FIELD_KIND_F64:
        v.value.f64 = in_.Num<double>();
        break;
      case AMQP_FIELD_KIND_DECIMAL:
        v.value.decimal.decimals = in_.U8();
        v.value.decimal.value = in_.Num<uint32_t>();
        break;
      case AMQP_FIELD_KIND_UTF8:
      case AMQP_FIELD_KIND_BYTES:
        v.value.bytes = Keep(in_.Take(in_.U8() % 40));
        break;
      case AMQP_FIELD_KIND_TABLE:
        v.value.table = Table(depth + 1);
        break;
      case AMQP_FIELD_KIND_ARRAY: {
        std::vector<amqp_field_value_t> items(in_.U8() % 6);
        for (auto& item : items) item = Field(depth + 1);
        arrays_.push_back(std::move(items));
        v.value.array =
            amqp_array_t{static_cast<int>(arrays_.back().size()), arrays_.back().data()};
        break;
      }
      default:
        break;  // void
    }
    return v;
  }

  Bytes& in_;
  std::deque<std::string> strings_;
  std::deque<std::vector<amqp_table_entry_t>> tables_;
  std::deque<std::vector<amqp_field_value_t>> arrays_;
};

template <typename T>
bool ReadsBack(const std::string& text, T want) {
  T got{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), got);
  return ec == std::errc() && end == text.data() + text.size() && got == want;
}

bool DecimalShape(const std::string& t, amqp_decimal_t d) {
  std::string_view v = t;
  if (!v.empty() && v[0] == '-') v.remove_prefix(1);
  size_t point = v.find('.');
  std::string_view whole = v.substr(0, point);
  std::string_view frac = point == std::string_view::npos ? "" : v.substr(point + 1);
  auto digits = [](std::string_view x) {
    return !x.empty() &&
           std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(whole)) return false;
  if (d.decimals == 0) return point == std::string_view::npos;
  return digits(frac) && frac.size() == d.decimals;
}

// The properties of AmqpFieldText for one top-level value.
void CheckField(const amqp_field_value_t& v, const std::optional<std::string>& text) {
  if (v.kind == AMQP_FIELD_KIND_VOID) {
    Require(!text.has_value(), "amqp: a void value has no text");
    return;
  }
  Require(text.has_value(), "amqp: every value but void has a text");
  const std::string& t = *text;
  Require(Text(t), "amqp: every text is UTF-8 without NUL");
  switch (v.kind) {
    case AMQP_FIELD_KIND_BOOLEAN:
      Require(t == (v.value.boolean ? "true" : "false"), "amqp: a boolean is true or false");
      break;
    case AMQP_FIELD_KIND_I8:
      Require(ReadsBack<int>(t, v.value.i8), "amqp: i8 reads back");
      break;
    case AMQP_FIELD_KIND_U8:
      Require(ReadsBack<unsigned>(t, v.value.u8), "amqp: u8 reads back");
      break;
    case AMQP_FIELD_KIND_I16:
      Require(ReadsBack<int>(t, v.value.i16), "amqp: i16 reads back");
      break;
    case AMQP_FIELD_KIND_U16:
      Require(ReadsBack<unsigned>(t, v.value.u16), "amqp: u16 reads back");
      break;
    case AMQP_FIELD_KIND_I32:
      Require(ReadsBack<int32_t>(t, v.value.i32), "amqp: i32 reads back");
      break;
    case AMQP_FIELD_KIND_U32:
      Require(ReadsBack<uint32_t>(t, v.value.u32), "amqp: u32 reads back");
      break;
    case AMQP_FIELD_KIND_I64:
      Require(ReadsBack<int64_t>(t, v.value.i64), "amqp: i64 reads back");
      break;
    case AMQP_FIELD_KIND_U64:
      Require(ReadsBack<uint64_t>(t, v.value.u64), "amqp: u64 reads back");
      break;
    case AMQP_FIELD_KIND_F32:
      if (std::isfinite(v.value.f32)) {
        Require(std::strtof(t.c_str(), nullptr) == v.value.f32, "amqp: f32 reads back");
      }
      break;
    case AMQP_FIELD_KIND_F64:
      if (std::isfinite(v.value.f64)) {
        Require(std::strtod(t.c_str(), nullptr) == v.value.f64, "amqp: f64 reads back");
      }
      break;
    case AMQP_FIELD_KIND_DECIMAL:
      Require(DecimalShape(t, v.value.decimal), "amqp: a decimal is its decimal text");
      break;
    case AMQP_FIELD_KIND_TIMESTAMP:
      if (v.value.u64 <= 253402300799ULL) {
        Require(t.size() == 20 && t[4] == '-' && t[10] == 'T' && t.back() == 'Z',
                "amqp: a timestamp is ISO-8601 UTC");
      } else {
        Require(ReadsBack<uint64_t>(t, v.value.u64), "amqp: a timestamp past 9999 is its number");
      }
      break;
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: {
      std::string_view raw(static_cast<const char*>(v.value.bytes.bytes), v.value.bytes.len);
      Require(t == s::HeaderText(raw), "amqp: strings and bytes through HeaderText");
      break;
    }
    case AMQP_FIELD_KIND_TABLE:
    case AMQP_FIELD_KIND_ARRAY: {
      nlohmann::json j = nlohmann::json::parse(t, nullptr, false);
      if (v.kind == AMQP_FIELD_KIND_ARRAY) {
        Require(j.is_array() && j.size() == static_cast<size_t>(v.value.array.num_entries),
                "amqp: an array is a JSON array of its size");
      } else {
        Require(j.is_object(), "amqp: a table is a JSON object");
      }
      break;
    }
    default:
      break;
  }
}

void CheckTable(const amqp_table_t& table, bool check_fields) {
  Pairs strings = s::AmqpHeaderStrings(table);
  size_t texts = 0;
  for (int i = 0; i < table.num_entries; ++i) {
    std::optional<std::string> text = s::AmqpFieldText(table.entries[i].value);
    if (check_fields) CheckField(table.entries[i].value, text);
    if (!text) continue;
    Require(texts < strings.size() && strings[texts].second == *text,
            "amqp: AmqpHeaderStrings keeps each text in table order");
    ++texts;
  }
  Require(texts == strings.size(), "amqp: one pair per entry that is not void");
  for (const auto& [n, v] : strings) Require(Text(n) && Text(v), "amqp: UTF-8 without NUL");
}

}  // namespace

// nats.c's messages need the library opened once (natsMsg_Destroy takes its GC lock); the relay
// opens it when it connects.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  Require(nats_Open(-1) == NATS_OK, "nats: the library opens");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nul = input.find('\0');
  std::string_view headers = input.substr(0, nul);
  std::string_view rest = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  queuebox::OutboxRow row;
  row.id = "0b1e4c6e-8f0a-4d8e-9a51-3c1f2b7d9e10";
  row.topic = "orders.created";
  if (size % 3 != 0) row.key = size % 3 == 1 ? "order-42" : "";
  row.attempt = static_cast<int>(size % 7);
  // Static headers: sometimes one named like a relay header (RabbitMQ lets it replace x-topic).
  static const std::map<std::string, std::string> kStatic{{"X-Static", "1"}};
  static const std::map<std::string, std::string> kStaticTopic{{"X-Static", "1"},
                                                               {"x-topic", "static"}};
  queuebox::Result<queuebox::HeaderList> merged =
      queuebox::MergeRowHeaders(size % 4 == 0 ? kStaticTopic : kStatic, headers);
  if (merged.ok()) {
    CheckKafka(*merged, row);
    std::map<std::string, int64_t> integers;
    if (size % 2 == 1) integers = {{"x-schema-version", 1}, {"x-attempts", row.attempt}};
    if (size % 5 == 4) integers["x-attempt"] = 7;
    CheckRabbitMq(*merged, row, integers);
    CheckNats(*merged, row, size % 2 == 0);
  }

  // An AMQP table built from the bytes (every kind, nested), then the same bytes decoded.
  Bytes in(rest);
  TableBuilder builder(in);
  amqp_table_t table = builder.Table(0);
  CheckTable(table, true);
  amqp_pool_t pool;
  init_amqp_pool(&pool, 4096);
  std::optional<Pairs> wire = EncodeDecode(table, &pool);
  if (wire) Require(*wire == s::AmqpHeaderStrings(table), "amqp: a table reads the same decoded");
  recycle_amqp_pool(&pool);
  amqp_table_t decoded;
  size_t offset = 0;
  if (amqp_decode_table(amqp_bytes_t{rest.size(), const_cast<char*>(rest.data())}, &pool, &decoded,
                        &offset) == AMQP_STATUS_OK) {
    CheckTable(decoded, true);
  }
  empty_amqp_pool(&pool);
  return 0;
}
