// router_fuzz: topic globs (core/router.h): a pattern and a topic from the input.
// Properties: Compile refuses exactly the blank patterns and those holding `***`; Matches agrees
// with a reference matcher written from the spec (memoised over pattern and topic positions), and
// answers in time whatever the number of `**` (libFuzzer's -timeout catches backtracking).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/router.h"
#include "fuzz_util.h"

using queuebox::fuzz::Require;

namespace {

// The spec: `**` any text, `*` one non-empty run without a dot, anything else literal.
class Reference {
 public:
  Reference(std::string_view pattern, std::string_view topic)
      : p_(pattern), t_(topic), memo_((p_.size() + 1) * (t_.size() + 1), -1) {}
  bool Match() { return At(0, 0); }

 private:
  bool At(size_t i, size_t j) {
    signed char& m = memo_[i * (t_.size() + 1) + j];
    if (m >= 0) return m == 1;
    bool r = false;
    if (i == p_.size()) {
      r = j == t_.size();
    } else if (p_.compare(i, 2, "**") == 0) {
      for (size_t k = j; k <= t_.size() && !r; ++k) r = At(i + 2, k);
    } else if (p_[i] == '*') {
      for (size_t k = j + 1; k <= t_.size() && t_[k - 1] != '.' && !r; ++k) r = At(i + 1, k);
    } else {
      r = j < t_.size() && t_[j] == p_[i] && At(i + 1, j + 1);
    }
    m = r ? 1 : 0;
    return r;
  }
  std::string_view p_, t_;
  std::vector<signed char> memo_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  std::string pattern = in.ConsumeRandomLengthString(128);
  std::string topic = in.ConsumeRemainingBytesAsString();
  queuebox::Result<queuebox::TopicPattern> p = queuebox::TopicPattern::Compile(pattern);
  bool blank = pattern.find_first_not_of(" \t") == std::string::npos;
  bool triple = pattern.find("***") != std::string::npos;
  Require(p.ok() == (!blank && !triple), "Compile refuses blank patterns and `***`");
  if (!p.ok()) return 0;
  Require(p->Matches(topic) == Reference(pattern, topic).Match(),
          "Matches agrees with the reference");

  std::vector<queuebox::RouteConfig> routes(2);
  routes[0].topic_pattern = pattern;
  routes[0].destination = "a";
  routes[1].topic_pattern = "**";
  routes[1].destination = "b";
  queuebox::Result<queuebox::Router> router = queuebox::Router::Create(routes);
  Require(router.ok(), "a router of valid patterns builds");
  std::optional<size_t> hit = router->Match(topic);
  Require(hit.has_value() && *hit == (p->Matches(topic) ? 0u : 1u), "the first match wins");
  return 0;
}
