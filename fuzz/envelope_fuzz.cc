// envelope_fuzz: the BabelQueue envelope codec (babelqueue/envelope.h) on arbitrary bytes.
// Properties: Decode never throws or crashes; Accepts(bytes) agrees with Decode + Accepts; an
// envelope that decodes and encodes gives canonical bytes that decode and encode to themselves.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "babelqueue/envelope.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  babelqueue::Result<babelqueue::Envelope> decoded = babelqueue::Decode(bytes);
  babelqueue::Status accepted = babelqueue::Accepts(bytes);
  if (!decoded.ok()) {
    Require(!accepted.ok(), "Accepts(bytes) refuses what Decode refuses");
    return 0;
  }
  Require(accepted.ok() == babelqueue::Accepts(*decoded).ok(),
          "Accepts(bytes) == Accepts(Decode(bytes))");
  babelqueue::Result<std::string> encoded = babelqueue::Encode(*decoded);
  if (!encoded.ok()) return 0;  // e.g. a blank job or data that is not an object
  Require(queuebox::fuzz::ValidUtf8(*encoded), "Encode gives UTF-8");
  babelqueue::Result<babelqueue::Envelope> again = babelqueue::Decode(*encoded);
  Require(again.ok(), "canonical bytes decode");
  babelqueue::Result<std::string> reencoded = babelqueue::Encode(*again);
  Require(reencoded.ok() && *reencoded == *encoded, "canonical bytes re-encode to themselves");
  babelqueue::Redriven redriven = babelqueue::Redrive(*again);
  Require(!redriven.envelope.dead_letter.has_value() && redriven.envelope.attempts == 0,
          "Redrive clears dead_letter and attempts");
  (void)babelqueue::EncodeJson(again->data);
  return 0;
}
