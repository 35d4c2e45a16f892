// envelope.cc: Make / Encode / Decode / Accepts / Annotate / Redrive (see envelope.h).
#include "babelqueue/envelope.h"

#include <openssl/rand.h>

#include <array>
#include <charconv>
#include <chrono>
#include <limits>
#include <span>
#include <system_error>
#include <utility>

#include "json/escape.h"
#include "json/utf8.h"

namespace babelqueue {
namespace {

using queuebox::InvalidArgument;

std::string_view TrimSpace(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const auto begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const auto end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

Status WriteString(std::string& out, std::string_view s, const std::string& path) {
  if (std::optional<size_t> bad = queuebox::json::FirstInvalidUtf8(s)) {
    return InvalidArgument("invalid UTF-8 at byte " + std::to_string(*bad) + " of the string at " +
                           path + "; the envelope must be valid UTF-8");
  }
  queuebox::json::AppendQuoted(out, s);
  return Status::Ok();
}

// A finite double like Python's repr(): the shortest round-trip digits, fixed notation when the
// decimal point falls in (-4, 16], else d.ddde±XX; a float always shows a '.' or an exponent.
void WriteDouble(std::string& out, double value) {
  std::array<char, 64> buf{};
  auto [end, ec] =
      std::to_chars(buf.data(), buf.data() + buf.size(), value, std::chars_format::scientific);
  std::string_view sci(buf.data(), static_cast<size_t>(end - buf.data()));
  if (!sci.empty() && sci.front() == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = 0;
  const std::string_view exp_text = sci.substr(e_pos + 1);
  std::from_chars(exp_text.data() + (exp_text.front() == '+' ? 1 : 0),
                  exp_text.data() + exp_text.size(), exponent);
  const int n = static_cast<int>(digits.size());
  const int decpt = exponent + 1;  // digits before the decimal point
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<size_t>(decpt));
      out.push_back('.');
      out.append(digits, static_cast<size_t>(decpt));
    }
    return;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out.append(digits, 1);
  }
  out.push_back('e');
  out.push_back(exponent < 0 ? '-' : '+');
  const std::string magnitude = std::to_string(exponent < 0 ? -exponent : exponent);
  if (magnitude.size() < 2) out.push_back('0');  // at least two digits, as Python prints
  out += magnitude;
}

Status WriteJson(std::string& out, const Json& value, const std::string& path) {
  switch (value.type()) {
    case Json::value_t::null:
      out += "null";
      return Status::Ok();
    case Json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      return Status::Ok();
    case Json::value_t::number_integer:
      out += std::to_string(value.get<int64_t>());
      return Status::Ok();
    case Json::value_t::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      return Status::Ok();
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (d != d || d == std::numeric_limits<double>::infinity() ||
          d == -std::numeric_limits<double>::infinity()) {
        return InvalidArgument("NaN or Infinity at " + path + " cannot be encoded as JSON");
      }
      WriteDouble(out, d);
      return Status::Ok();
    }
    case Json::value_t::string:
      return WriteString(out, value.get_ref<const std::string&>(), path);
    case Json::value_t::array: {
      out.push_back('[');
      size_t i = 0;
      for (const auto& item : value) {
        if (i > 0) out.push_back(',');
        QB_RETURN_IF_ERROR(WriteJson(out, item, path + "[" + std::to_string(i) + "]"));
        ++i;
      }
      out.push_back(']');
      return Status::Ok();
    }
    case Json::value_t::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        if (!first) out.push_back(',');
        first = false;
        const std::string item_path = path + "." + key;
        QB_RETURN_IF_ERROR(WriteString(out, key, item_path + " (key)"));
        out.push_back(':');
        QB_RETURN_IF_ERROR(WriteJson(out, item, item_path));
      }
      out.push_back('}');
      return Status::Ok();
    }
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return InvalidArgument("the value at " + path + " is not JSON");
}

// Writes `,"key":` (or `"key":` when first).
void Key(std::string& out, std::string_view key, bool first = false) {
  if (!first) out.push_back(',');
  out.push_back('"');
  out += key;
  out += "\":";
}

// Appends the unknown keys kept by Decode; a key that shadows a frame key is refused.
Status WriteExtra(std::string& out, const Json& extra, std::span<const std::string_view> known,
                  const std::string& path) {
  if (extra.is_null()) return Status::Ok();
  if (!extra.is_object()) return InvalidArgument(path + " extra keys must be an object");
  for (const auto& [key, item] : extra.items()) {
    for (std::string_view k : known) {
      if (key == k)
        return InvalidArgument("extra key \"" + key + "\" duplicates " + path + "." + key);
    }
    out.push_back(',');
    QB_RETURN_IF_ERROR(WriteString(out, key, path + "." + key + " (key)"));
    out.push_back(':');
    QB_RETURN_IF_ERROR(WriteJson(out, item, path + "." + key));
  }
  return Status::Ok();
}

Status WriteNullableString(std::string& out, const std::optional<std::string>& s,
                           const std::string& path) {
  if (!s) {
    out += "null";
    return Status::Ok();
  }
  return WriteString(out, *s, path);
}

// ---- decoding helpers ----

Status ReadString(const Json& obj, const char* key, const std::string& path, std::string& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(path + " must be a string");
  out = it->get<std::string>();
  return Status::Ok();
}

Status ReadNullableString(const Json& obj, const char* key, const std::string& path,
                          std::optional<std::string>& out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidArgument(path + " must be a string or null");
  out = it->get<std::string>();
  return Status::Ok();
}

Status ToInt64(const Json& v, const std::string& path, int64_t& out) {
  if (!v.is_number_integer()) return InvalidArgument(path + " must be an integer");
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return InvalidArgument(path + " is out of range");
  }
  out = v.get<int64_t>();
  return Status::Ok();
}

// required = true: absence is an error named `code`.
Status ReadInt(const Json& obj, const char* key, const std::string& path, bool required,
               std::string_view code, int64_t& out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (!required) return Status::Ok();
    return InvalidArgument(std::string(code) + ": " + path + " is missing");
  }
  Status s = ToInt64(*it, path, out);
  if (!s.ok()) return InvalidArgument(std::string(code) + ": " + s.message());
  return Status::Ok();
}

Json ExtraKeys(const Json& obj, std::span<const std::string_view> known) {
  Json extra = Json::object();
  for (const auto& [key, item] : obj.items()) {
    bool is_known = false;
    for (std::string_view k : known) is_known = is_known || key == k;
    if (!is_known) extra[key] = item;
  }
  return extra;
}

constexpr std::string_view kFrameKeys[] = {"job",  "trace_id", "data",
                                           "meta", "attempts", "dead_letter"};
constexpr std::string_view kMetaKeys[] = {"id", "queue", "lang", "schema_version", "created_at"};

Status DecodeDeadLetter(const Json& obj, DeadLetter& dl) {
  if (!obj.is_object()) return InvalidArgument("dead_letter must be an object");
  QB_RETURN_IF_ERROR(ReadString(obj, "reason", "dead_letter.reason", dl.reason));
  QB_RETURN_IF_ERROR(ReadNullableString(obj, "error", "dead_letter.error", dl.error));
  QB_RETURN_IF_ERROR(ReadNullableString(obj, "exception", "dead_letter.exception", dl.exception));
  QB_RETURN_IF_ERROR(ReadInt(obj, "failed_at", "dead_letter.failed_at", false,
                             "invalid_dead_letter", dl.failed_at));
  QB_RETURN_IF_ERROR(
      ReadString(obj, "original_queue", "dead_letter.original_queue", dl.original_queue));
  QB_RETURN_IF_ERROR(
      ReadInt(obj, "attempts", "dead_letter.attempts", false, "invalid_dead_letter", dl.attempts));
  dl.lang.clear();
  return ReadString(obj, "lang", "dead_letter.lang", dl.lang);
}

}  // namespace

std::string_view DeadLetterReasonName(DeadLetterReason reason) {
  switch (reason) {
    case DeadLetterReason::kFailed:
      return "failed";
    case DeadLetterReason::kUnknownUrn:
      return "unknown_urn";
    case DeadLetterReason::kPoison:
      return "poison";
  }
  return "failed";
}

Result<std::string> NewUuidV4() {
  std::array<unsigned char, 16> b{};
  if (RAND_bytes(b.data(), static_cast<int>(b.size())) != 1) {
    return queuebox::Internal("the system CSPRNG failed to produce a UUID");
  }
  b[6] = static_cast<unsigned char>((b[6] & 0x0F) | 0x40);  // version 4
  b[8] = static_cast<unsigned char>((b[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (size_t i = 0; i < b.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(kHex[b[i] >> 4]);
    out.push_back(kHex[b[i] & 0x0F]);
  }
  return out;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Result<Envelope> Make(std::string_view urn, Json data, MakeOptions options) {
  const std::string_view job = TrimSpace(urn);
  if (job.empty()) return InvalidArgument("missing_urn: the URN is blank");
  if (data.is_null()) data = Json::object();
  if (!data.is_object()) return InvalidArgument("invalid_data: data must be a JSON object");
  Envelope env;
  env.job = std::string(job);
  env.data = std::move(data);
  const std::string_view trace = TrimSpace(options.trace_id);
  if (trace.empty()) {
    QB_ASSIGN_OR_RETURN(env.trace_id, NewUuidV4());
  } else {
    env.trace_id = std::string(trace);
  }
  QB_ASSIGN_OR_RETURN(env.meta.id, NewUuidV4());
  env.meta.queue = std::move(options.queue);
  env.meta.created_at = NowUnixMs();
  return env;
}

Result<std::string> EncodeJson(const Json& value) {
  std::string out;
  QB_RETURN_IF_ERROR(WriteJson(out, value, "$"));
  return out;
}

Result<std::string> Encode(const Envelope& env) {
  if (TrimSpace(env.job).empty()) return InvalidArgument("missing_urn: job is blank");
  if (!env.data.is_object()) return InvalidArgument("invalid_data: data must be a JSON object");
  std::string out;
  out.reserve(256);
  out.push_back('{');
  Key(out, "job", true);
  QB_RETURN_IF_ERROR(WriteString(out, env.job, "job"));
  Key(out, "trace_id");
  QB_RETURN_IF_ERROR(WriteString(out, env.trace_id, "trace_id"));
  Key(out, "data");
  QB_RETURN_IF_ERROR(WriteJson(out, env.data, "data"));
  Key(out, "meta");
  out.push_back('{');
  Key(out, "id", true);
  QB_RETURN_IF_ERROR(WriteString(out, env.meta.id, "meta.id"));
  Key(out, "queue");
  QB_RETURN_IF_ERROR(WriteString(out, env.meta.queue, "meta.queue"));
  Key(out, "lang");
  QB_RETURN_IF_ERROR(WriteString(out, env.meta.lang, "meta.lang"));
  Key(out, "schema_version");
  out += std::to_string(env.meta.schema_version);
  Key(out, "created_at");
  out += std::to_string(env.meta.created_at);
  QB_RETURN_IF_ERROR(WriteExtra(out, env.meta.extra, kMetaKeys, "meta"));
  out.push_back('}');
  Key(out, "attempts");
  out += std::to_string(env.attempts);
  if (env.dead_letter) {
    const DeadLetter& dl = *env.dead_letter;
    Key(out, "dead_letter");
    out.push_back('{');
    Key(out, "reason", true);
    QB_RETURN_IF_ERROR(WriteString(out, dl.reason, "dead_letter.reason"));
    Key(out, "error");
    QB_RETURN_IF_ERROR(WriteNullableString(out, dl.error, "dead_letter.error"));
    Key(out, "exception");
    QB_RETURN_IF_ERROR(WriteNullableString(out, dl.exception, "dead_letter.exception"));
    Key(out, "failed_at");
    out += std::to_string(dl.failed_at);
    Key(out, "original_queue");
    QB_RETURN_IF_ERROR(WriteString(out, dl.original_queue, "dead_letter.original_queue"));
    Key(out, "attempts");
    out += std::to_string(dl.attempts);
    Key(out, "lang");
    QB_RETURN_IF_ERROR(WriteString(out, dl.lang, "dead_letter.lang"));
    out.push_back('}');
  }
  QB_RETURN_IF_ERROR(WriteExtra(out, env.extra, kFrameKeys, "$"));
  out.push_back('}');
  return out;
}

Result<Envelope> Decode(std::string_view bytes) {
  Json root;
  try {
    root = Json::parse(bytes.begin(), bytes.end());
  } catch (const std::exception& e) {
    return InvalidArgument(std::string("malformed: not valid UTF-8 JSON: ") + e.what());
  }
  if (!root.is_object()) return InvalidArgument("malformed: the envelope must be a JSON object");
  Envelope env;
  env.meta = Meta{};
  QB_RETURN_IF_ERROR(ReadString(root, "job", "job", env.job));
  if (env.job.empty()) {
    std::string alias;
    QB_RETURN_IF_ERROR(ReadString(root, "urn", "urn", alias));
    env.job = std::string(TrimSpace(alias));
  }
  QB_RETURN_IF_ERROR(ReadString(root, "trace_id", "trace_id", env.trace_id));
  auto data = root.find("data");
  env.data = data == root.end() ? Json() : *data;

  auto meta = root.find("meta");
  if (meta == root.end() || meta->is_null())
    return InvalidArgument("missing_meta: meta is missing");
  if (!meta->is_object()) return InvalidArgument("missing_meta: meta must be an object");
  env.meta.queue.clear();
  env.meta.lang.clear();
  QB_RETURN_IF_ERROR(ReadString(*meta, "id", "meta.id", env.meta.id));
  QB_RETURN_IF_ERROR(ReadString(*meta, "queue", "meta.queue", env.meta.queue));
  QB_RETURN_IF_ERROR(ReadString(*meta, "lang", "meta.lang", env.meta.lang));
  QB_RETURN_IF_ERROR(ReadInt(*meta, "schema_version", "meta.schema_version", true,
                             "unsupported_schema_version", env.meta.schema_version));
  QB_RETURN_IF_ERROR(
      ReadInt(*meta, "created_at", "meta.created_at", false, "invalid_meta", env.meta.created_at));
  env.meta.extra = ExtraKeys(*meta, kMetaKeys);

  QB_RETURN_IF_ERROR(ReadInt(root, "attempts", "attempts", true, "invalid_attempts", env.attempts));
  auto dl = root.find("dead_letter");
  if (dl != root.end() && !dl->is_null()) {
    DeadLetter block;
    QB_RETURN_IF_ERROR(DecodeDeadLetter(*dl, block));
    env.dead_letter = std::move(block);
  }
  // `urn` is an inbound alias only: it is not kept, Encode emits `job`.
  Json extra = ExtraKeys(root, kFrameKeys);
  extra.erase("urn");
  env.extra = std::move(extra);
  return env;
}

Status Accepts(const Envelope& env) {
  if (TrimSpace(env.job).empty()) {
    return InvalidArgument("missing_urn: no 'job' or 'urn'; the message has no identity");
  }
  if (env.meta.schema_version != kSchemaVersion) {
    return InvalidArgument("unsupported_schema_version: meta.schema_version " +
                           std::to_string(env.meta.schema_version) +
                           " is not a version this SDK supports (1)");
  }
  if (!env.data.is_object()) return InvalidArgument("invalid_data: data must be a JSON object");
  if (TrimSpace(env.trace_id).empty())
    return InvalidArgument("missing_trace_id: trace_id is blank");
  if (env.attempts < 0) return InvalidArgument("invalid_attempts: attempts must not be negative");
  return Status::Ok();
}

Status Accepts(std::string_view bytes) {
  Result<Envelope> env = Decode(bytes);
  if (!env.ok()) return env.status();
  return Accepts(*env);
}

Envelope Annotate(const Envelope& envelope, DeadLetterReason reason,
                  std::string_view original_queue, int64_t attempts,
                  std::optional<std::string> error, std::optional<std::string> exception,
                  std::optional<int64_t> failed_at_ms) {
  Envelope copy = envelope;
  DeadLetter dl;
  dl.reason = std::string(DeadLetterReasonName(reason));
  dl.error = std::move(error);
  dl.exception = std::move(exception);
  dl.failed_at = failed_at_ms.value_or(NowUnixMs());
  dl.original_queue = std::string(original_queue);
  dl.attempts = attempts;
  dl.lang = kLang;
  copy.dead_letter = std::move(dl);
  return copy;
}

Redriven Redrive(const Envelope& envelope) {
  Redriven out{envelope, envelope.meta.queue};
  if (envelope.dead_letter && !envelope.dead_letter->original_queue.empty()) {
    out.queue = envelope.dead_letter->original_queue;
  }
  out.envelope.dead_letter.reset();
  out.envelope.attempts = 0;
  return out;
}

}  // namespace babelqueue
