// http1_response_fuzz: an HTTP/1.x answer as a receiver sends it (destinations/http/
// http1_response.h), fed whole and again in pieces of the sizes the input chooses.
// Properties: nothing crashes or throws; the two feedings agree (done, problem, status, body,
// keep-alive, bytes used); the kept body is at most the cap; a finished answer's status is
// 100-999 and not interim; bytes are used past the answer's end never.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "destinations/http/http1_response.h"
#include "fuzz_util.h"

using queuebox::Http1Answer;
using queuebox::Http1ResponseParser;
using queuebox::fuzz::Require;

namespace {

struct Fed {
  bool done = false;
  std::string problem;
  size_t used = 0;
  bool keep_alive = false;
  Http1Answer answer;
};

Fed Feed(const std::string& wire, const std::vector<size_t>& pieces, size_t cap, bool eof) {
  Http1ResponseParser p;
  p.Reset(cap);
  Fed f;
  size_t at = 0;
  size_t i = 0;
  while (at < wire.size() && !p.done() && f.problem.empty()) {
    size_t n = pieces.empty() ? wire.size() : pieces[i++ % pieces.size()];
    n = std::min(n, wire.size() - at);
    const size_t used = p.Feed(std::string_view(wire).substr(at, n), f.problem);
    Require(used <= n, "uses at most what it is given");
    Require(used == n || p.done() || !f.problem.empty(), "stops short only at the answer's end");
    f.used += used;
    at += n;
  }
  if (eof && f.problem.empty() && !p.done()) p.EndOfStream();
  f.done = p.done();
  f.keep_alive = p.keep_alive();
  if (f.done) f.answer = p.TakeAnswer();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const size_t cap = in.ConsumeIntegralInRange<size_t>(0, 64);
  const bool eof = in.ConsumeBool();
  std::vector<size_t> pieces;
  for (int n = in.ConsumeIntegralInRange<int>(1, 8); n > 0; --n) {
    pieces.push_back(in.ConsumeIntegralInRange<size_t>(1, 16));
  }
  const std::string wire = in.ConsumeRemainingBytesAsString();
  const Fed whole = Feed(wire, {}, cap, eof);
  const Fed split = Feed(wire, pieces, cap, eof);
  Require(whole.done == split.done, "done agrees");
  Require(whole.problem.empty() == split.problem.empty(), "a problem either way");
  if (whole.done && split.done) {
    Require(whole.used == split.used, "the same bytes used");
    Require(whole.keep_alive == split.keep_alive, "keep-alive agrees");
    Require(whole.answer.status == split.answer.status, "status agrees");
    Require(whole.answer.body == split.answer.body, "body agrees");
    Require(whole.answer.reason == split.answer.reason, "reason agrees");
    Require(whole.answer.body.size() <= cap, "the body is cut at the cap");
    Require(whole.answer.status >= 200 && whole.answer.status <= 999, "a final status");
  }
  return 0;
}
