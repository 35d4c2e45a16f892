// envelope.h: the BabelQueue message envelope, schema_version 1 (frozen), and its codec.
//
// Wire shape (BabelQueue reference §1.1, fixtures/order-created.json), emitted in this key order:
//   {"job":URN,"trace_id":..,"data":{..},
//    "meta":{"id":..,"queue":..,"lang":..,"schema_version":1,"created_at":<Unix ms UTC>},
//    "attempts":N[,"dead_letter":{"reason","error","exception","failed_at","original_queue",
//    "attempts","lang"}]}
// followed by any unknown keys a decoded envelope carried (kept, in their order).
//
// Encoding (reference §1.5 recommendation): compact, no trailing newline, raw UTF-8, `/` and
// `<>&` not escaped, short escapes for \" \\ \b \f \n \r \t, \u00xx (lowercase) for other C0
// controls and U+007F is raw, U+2028/U+2029 escaped. `data` keys keep insertion order. Integers
// print as integers; floats print like Python's repr (1.0 -> "1.0", 1e21 -> "1e+21",
// -0.0 -> "-0.0", 1e-05), so integers and floats stay distinct. Invalid UTF-8 and NaN/Infinity
// are refused (kInvalidArgument). Once encoded, bytes travel verbatim: the outbox stores and
// publishes the encoded string and nothing in this SDK re-encodes it.
//
// Errors: Status / Result from queuebox/status.h (library qb_status, which the SDK links). No
// exception leaves these functions.
// Thread-safety: plain values and pure functions; safe from any thread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "queuebox/status.h"

namespace babelqueue {

using queuebox::Status;
using queuebox::StatusCode;
template <typename T>
using Result = queuebox::Result<T>;
// JSON value with insertion-ordered objects (the `data` block keeps the producer's key order).
using Json = nlohmann::ordered_json;

inline constexpr int kSchemaVersion = 1;
// meta.lang of this SDK. The upstream schema enum (php, go, python, java, dotnet, node) has no C++
// value yet (reference §8.1); consumers' accepts() never check lang.
inline constexpr const char* kLang = "cpp";
inline constexpr const char* kDefaultQueue = "default";

// Unknown-URN strategies shared by all cores (reference §1.1 "Constants").
inline constexpr const char* kUnknownUrnFail = "fail";
inline constexpr const char* kUnknownUrnDelete = "delete";
inline constexpr const char* kUnknownUrnRelease = "release";
inline constexpr const char* kUnknownUrnDeadLetter = "dead_letter";

struct Meta {
  std::string id;                     // UUID v4, lowercase 8-4-4-4-12; the idempotency key
  std::string queue = kDefaultQueue;  // logical queue (not the broker key)
  std::string lang = kLang;           // producing SDK
  int64_t schema_version = kSchemaVersion;
  int64_t created_at = 0;       // Unix milliseconds, UTC
  Json extra = Json::object();  // unknown meta keys of a decoded envelope, in order
};

// Why a message was dead-lettered (reference §1.2).
enum class DeadLetterReason { kFailed, kUnknownUrn, kPoison };
std::string_view DeadLetterReasonName(
    DeadLetterReason reason);  // "failed" | "unknown_urn" | "poison"

struct DeadLetter {
  std::string reason;                    // "failed" | "unknown_urn" | "poison"
  std::optional<std::string> error;      // null when there was no cause
  std::optional<std::string> exception;  // language-specific type name, or null
  int64_t failed_at = 0;                 // Unix milliseconds, UTC
  std::string original_queue;            // the queue it was consumed from
  int64_t attempts = 0;                  // attempts made before dead-lettering
  std::string lang = kLang;              // SDK that dead-lettered it
};

struct Envelope {
  std::string job;             // the URN (decoded from `job`, else the `urn` alias)
  std::string trace_id;        // preserved across every hop
  Json data = Json::object();  // the business payload (an object when valid)
  Meta meta;
  int64_t attempts = 0;                   // transport retry counter (outside meta)
  std::optional<DeadLetter> dead_letter;  // only on dead-lettered messages
  Json extra = Json::object();            // unknown top-level keys of a decoded envelope
};

struct MakeOptions {
  std::string queue = kDefaultQueue;  // meta.queue
  std::string trace_id;               // continue this trace; blank -> a new UUID v4
};

// Produces a new envelope (reference §1.3): job = trimmed urn; trace_id continued (trimmed) or a
// fresh UUID v4; data an object (null -> {}); meta {fresh UUID v4 id, queue, "cpp", 1, now ms};
// attempts 0. kInvalidArgument when the urn is blank or data is not an object/null;
// kInternal when the system CSPRNG fails.
Result<Envelope> Make(std::string_view urn, Json data = Json::object(), MakeOptions options = {});

// The canonical bytes (see the header comment). kInvalidArgument, naming the JSON path, for a
// blank job, data that is not an object, invalid UTF-8 in any string or key, NaN or Infinity.
Result<std::string> Encode(const Envelope& envelope);

// Any JSON value in this SDK's canonical form (same rules as Encode, object keys in their stored
// order). kInvalidArgument for invalid UTF-8 or a non-finite number.
Result<std::string> EncodeJson(const Json& value);

// Parses bytes (UTF-8 JSON object). The URN is `job` when it is a non-empty string, else the
// trimmed `urn` alias. kInvalidArgument with the reason for: bytes that are not JSON (or not
// UTF-8), a non-object, a known field of the wrong type (job/urn/trace_id strings; meta an object
// with an integer schema_version; attempts an integer; dead_letter an object), or a missing
// meta / meta.schema_version / attempts. Absent optional fields take their defaults; `data` is
// kept whatever its type (Accepts() judges it). Unknown keys are kept in `extra`.
Result<Envelope> Decode(std::string_view bytes);

// Consumer validation (reference §1.7 recommendation): OK, or kInvalidArgument whose message is
// the reason: no URN; meta.schema_version != 1; data not an object; trace_id blank after
// trimming; attempts < 0. Does not check UUID format, lang or created_at (no SDK does).
Status Accepts(const Envelope& envelope);
// Decode + Accepts: the reason a raw message is not accepted.
Status Accepts(std::string_view bytes);

// A copy of `envelope` with the dead_letter block (reference §1.2); job, trace_id, data, meta
// and attempts are unchanged. error/exception null when not given; failed_at_ms defaults to now.
Envelope Annotate(const Envelope& envelope, DeadLetterReason reason,
                  std::string_view original_queue, int64_t attempts,
                  std::optional<std::string> error = std::nullopt,
                  std::optional<std::string> exception = std::nullopt,
                  std::optional<int64_t> failed_at_ms = std::nullopt);

// Redrive of a dead-lettered message (Go redrive.go): the envelope without dead_letter and with
// attempts 0, and the queue to publish it to (dead_letter.original_queue, else meta.queue).
struct Redriven {
  Envelope envelope;
  std::string queue;
};
Redriven Redrive(const Envelope& envelope);

// A new random UUID v4 (RFC 4122 variant), lowercase 8-4-4-4-12, from the system CSPRNG
// (OpenSSL RAND_bytes). kInternal when the CSPRNG fails.
Result<std::string> NewUuidV4();
// Current time as Unix milliseconds, UTC.
int64_t NowUnixMs();

}  // namespace babelqueue
