// trace_context_fuzz: the W3C trace context parser (telemetry/trace_context.h): a traceparent,
// a tracestate and a row's headers JSON from the input.
// Properties: nothing throws; a parsed traceparent has non-zero ids and formats back to a valid
// 55-character version-00 value that parses to the same ids; an accepted tracestate is at most
// 512 characters; FromHeadersJson's tracestate, when set, is valid.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "telemetry/trace_context.h"

using queuebox::fuzz::Require;
namespace t = queuebox::telemetry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const std::string parent = in.ConsumeRandomLengthString(128);
  const std::string state = in.ConsumeRandomLengthString(600);
  const std::string json = in.ConsumeRemainingBytesAsString();
  if (auto c = t::ParseTraceparent(parent)) {
    Require(c->trace_id != t::TraceId{} && c->span_id != t::SpanId{}, "ids are not zero");
    const std::string formatted = t::FormatTraceparent(c->trace_id, c->span_id, c->flags);
    Require(formatted.size() == 55 && formatted.rfind("00-", 0) == 0, "formats as version 00");
    auto again = t::ParseTraceparent(formatted);
    Require(again && again->trace_id == c->trace_id && again->span_id == c->span_id &&
                again->flags == c->flags,
            "the formatted value parses to the same context");
  }
  if (t::ValidTracestate(state)) Require(state.size() <= 512, "a valid tracestate is short");
  if (auto c = t::FromHeaders({{"traceparent", parent}, {"tracestate", state}})) {
    Require(c->tracestate.empty() || t::ValidTracestate(c->tracestate), "the state is valid");
  }
  if (auto c = t::FromHeadersJson(json)) {
    Require(c->tracestate.empty() || t::ValidTracestate(c->tracestate), "the state is valid");
  }
  return 0;
}
