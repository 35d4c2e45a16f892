// The config loader's written-out matchers against the std::regex they replaced (the regexes
// cost the config fuzz targets and `check-config` most of a load), and the "did you mean"
// suggestion (Suggester) against a plain reference: the full edit-distance table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "config/config_test_util.h"
#include "config/edit_distance_reference.h"
#include "config/env.h"
#include "config/validate.h"
#include "config/yaml.h"

namespace queuebox {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// A small deterministic generator (the same strings on every run).
class Gen {
 public:
  uint32_t Next() { return seed_ = seed_ * 1103515245u + 12345u, (seed_ >> 16) & 0x7fff; }
  // `n` pieces (up to max) drawn from `pieces`, concatenated.
  std::string Join(const std::vector<std::string>& pieces, size_t max) {
    std::string out;
    for (size_t n = Next() % (max + 1); n > 0; --n) out += pieces[Next() % pieces.size()];
    return out;
  }

 private:
  uint32_t seed_ = 20261202;
};

TEST(MatchersTest, ServiceLinkVariableMatchesTheRegex) {
  const std::regex forms(
      "^.*_(SERVICE_HOST|SERVICE_PORT(_.*)?|PORT|PORT_[0-9]+_(TCP|UDP|SCTP)(_.*)?)$");
  const std::vector<std::string> pieces = {
      "_",  "SERVICE", "_HOST", "_PORT", "PORT", "_TCP", "UDP", "_SCTP", "0",  "443", "X",
      "\r", "\n",      "HOST",  "TCP",   "__",   "a",    "-",   "\xc3",  "\t", " "};
  Gen g;
  int matched = 0;
  for (int i = 0; i < 40000; ++i) {
    const std::string name = g.Join(pieces, 9);
    const bool want = std::regex_match(name, forms);
    matched += want ? 1 : 0;
    ASSERT_EQ(cfg::IsServiceLinkVariable(name), want) << "name=" << json(name).dump(-1, ' ', true);
  }
  EXPECT_GT(matched, 500);  // the generator reaches every form, not only refusals
  for (const char* yes : {"KUBE_SERVICE_HOST", "A_SERVICE_PORT", "A_SERVICE_PORT_HTTP", "A_PORT",
                          "A_PORT_80_TCP", "A_PORT_80_SCTP_ADDR", "__PORT", "_SERVICE_PORT_"}) {
    EXPECT_TRUE(cfg::IsServiceLinkVariable(yes)) << yes;
  }
  for (const char* no : {"SERVICE_HOST", "A_PORT_TCP", "A_PORT_80_TCPX", "A_PORT_80", "A_PORTS",
                         "A_SERVICE_HOST_X", "A_PORT_8\r0_TCP", "A\n_PORT", "A_PORT_\xd9_TCP"}) {
    EXPECT_FALSE(cfg::IsServiceLinkVariable(no)) << json(no).dump(-1, ' ', true);
  }
  // Long names answer at once (the regex recursed once per character).
  EXPECT_TRUE(cfg::IsServiceLinkVariable(std::string(100000, 'A') + "_PORT"));
  EXPECT_FALSE(cfg::IsServiceLinkVariable(std::string(100000, '_')));
}

// PlainScalar with the core-schema regexes it used before.
json RegexPlainScalar(const std::string& s) {
  static const std::regex kNull("^(~|null|Null|NULL|)$");
  static const std::regex kBool("^(true|True|TRUE|false|False|FALSE)$");
  static const std::regex kInt("^[-+]?[0-9]+$");
  static const std::regex kFloat("^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$");
  if (std::regex_match(s, kNull)) return nullptr;
  if (std::regex_match(s, kBool)) return s[0] == 't' || s[0] == 'T';
  if (std::regex_match(s, kInt)) {
    try {
      size_t used = 0;
      long long v = std::stoll(s, &used);
      if (used == s.size()) return static_cast<int64_t>(v);
    } catch (const std::exception&) {
      return s;
    }
  }
  if (std::regex_match(s, kFloat)) {
    try {
      return std::stod(s);
    } catch (const std::exception&) {
      return s;
    }
  }
  return s;
}

TEST(PlainScalarTest, MatchesTheCoreSchemaRegexes) {
  const std::vector<std::string> pieces = {
      "-",    "+", ".",    "e",    "E",    "0",    "7",    "12",    "x",     " ",
      "\n",   "~", "null", "Null", "NULL", "true", "True", "FALSE", "false", "9223372036854775808",
      "1e999"};
  Gen g;
  std::map<json::value_t, int> kinds;
  for (int i = 0; i < 40000; ++i) {
    const std::string s = g.Join(pieces, 6);
    const json want = RegexPlainScalar(s);
    ++kinds[want.type()];
    ASSERT_EQ(cfg::PlainScalar(s), want) << "scalar=" << json(s).dump(-1, ' ', true);
  }
  // Every kind of value was produced and compared.
  for (json::value_t t :
       {json::value_t::null, json::value_t::boolean, json::value_t::number_integer,
        json::value_t::number_float, json::value_t::string}) {
    EXPECT_GT(kinds[t], 50) << static_cast<int>(t);
  }
  EXPECT_EQ(cfg::PlainScalar(".5e-3"), json(0.0005));
  EXPECT_EQ(cfg::PlainScalar("-12"), json(-12));
  EXPECT_EQ(cfg::PlainScalar("1."), json(1.0));
  EXPECT_EQ(cfg::PlainScalar("1e"), json("1e"));
  EXPECT_EQ(cfg::PlainScalar("."), json("."));
  // Past int64: text, which the option check then refuses with the value.
  EXPECT_EQ(cfg::PlainScalar("99999999999999999999"), json("99999999999999999999"));
}

TEST(MatchersTest, SqlIdentifierMatchesTheRegex) {
  const std::regex identifier("^[a-zA-Z_][a-zA-Z0-9_]*$");
  const std::vector<std::string> pieces = {"a",        "Z",    "_",  "0", "9", "-", ".", " ",
                                           "\xc3\xa9", "\xff", "\n", "`", "@", "[", "{"};
  Gen g;
  int matched = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::string s = g.Join(pieces, 5);
    const bool want = std::regex_match(s, identifier);
    matched += want ? 1 : 0;
    ASSERT_EQ(cfg::IsSqlIdentifier(s), want) << json(s).dump(-1, ' ', true);
  }
  EXPECT_GT(matched, 500);
}

// DidYouMean's contract, computed the slow way: NormalizeKey-equal is distance 0, else the full
// case-insensitive edit distance; the first closest candidate within min(max(1, len/3), 8).
std::optional<std::string> ReferenceDidYouMean(const std::string& key,
                                               const std::vector<std::string>& candidates) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto full = [](std::string_view a, std::string_view b) {
    return queuebox::testing::FullEditDistance(a, b);
  };
  const size_t threshold = std::min<size_t>(std::max<size_t>(1, key.size() / 3), 8);
  std::optional<std::string> best;
  size_t best_distance = threshold + 1;
  for (const std::string& c : candidates) {
    const size_t d =
        cfg::NormalizeKey(c) == cfg::NormalizeKey(key) ? 0 : full(lower(key), lower(c));
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

TEST(SuggesterTest, AgreesWithTheFullTable) {
  const std::vector<std::string> pieces = {"a", "B", "c", "_", "-", "ab", "QUEUEBOX_", "Port"};
  Gen g;
  int suggested = 0;
  for (int i = 0; i < 5000; ++i) {
    const std::string key = g.Join(pieces, 8);
    std::vector<std::string> candidates;
    for (size_t n = g.Next() % 8; n > 0; --n) candidates.push_back(g.Join(pieces, 8));
    const std::optional<std::string> want = ReferenceDidYouMean(key, candidates);
    suggested += want ? 1 : 0;
    ASSERT_EQ(cfg::DidYouMean(key, candidates), want) << "key=" << key;
    cfg::Suggester s(key);
    for (const std::string& c : candidates) s.Offer(c);
    ASSERT_EQ(s.best(), want) << "key=" << key;
  }
  EXPECT_GT(suggested, 500);
}

TEST(LevenshteinTest, LongerStringsAndLimitsMatchTheFullTable) {
  // Rows reuse their cells: what lies left and right of the band must still read as "over".
  auto full = [](std::string_view a, std::string_view b) {
    return queuebox::testing::FullEditDistance(a, b);
  };
  Gen g;
  for (int round = 0; round < 3000; ++round) {
    std::string a = g.Join({"a", "b", "c", "d"}, 40), b = a;
    for (size_t edits = g.Next() % 12; edits > 0; --edits) {  // near neighbours, mostly
      const size_t at = b.empty() ? 0 : g.Next() % b.size();
      switch (g.Next() % 3) {
        case 0:
          b.insert(at, 1, static_cast<char>('a' + g.Next() % 5));
          break;
        case 1:
          if (!b.empty()) b.erase(at, 1);
          break;
        default:
          if (!b.empty()) b[at] = static_cast<char>('a' + g.Next() % 5);
      }
    }
    const size_t limit = g.Next() % 12;
    const size_t want = full(a, b);
    ASSERT_EQ(cfg::Levenshtein(a, b, limit), want <= limit ? want : limit + 1)
        << "a=" << a << " b=" << b << " limit=" << limit;
  }
}

// Suggestions for QUEUEBOX_ names in each kind of scope: the root, a route, a destination, and a
// block reached through a key (a destination's circuitBreaker, outbox.capture.connection).
class EnvSuggestionTest : public testing::ConfigFileTest {
 protected:
  std::string Error(std::map<std::string, std::string> env) {
    env["QUEUEBOX_DATABASE_URL"] = "/tmp/x.db";
    Result<Config> c = Load("", std::move(env));
    EXPECT_FALSE(c.ok());
    return c.ok() ? "" : c.status().message();
  }
};

TEST_F(EnvSuggestionTest, EachScopeSuggestsItsOwnKeys) {
  EXPECT_THAT(Error({{"QUEUEBOX_OUTBOX_POLL_INTERVAL_MS", "5"}}),
              HasSubstr("  - QUEUEBOX_OUTBOX_POLL_INTERVAL_MS: this QUEUEBOX_ variable names no "
                        "configuration key; did you mean QUEUEBOX_OUTBOX_POLLINTERVALMS?"));
  EXPECT_THAT(Error({{"QUEUEBOX_ROUTES_0_TOPICPATERN", "a"}}),
              HasSubstr("QUEUEBOX_ROUTES_0_TOPICPATERN: this QUEUEBOX_ variable names no "
                        "configuration key; did you mean QUEUEBOX_ROUTES_0_TOPICPATTERN?"));
  EXPECT_THAT(Error({{"QUEUEBOX_DESTINATIONS_MY__WEB_BASEURI", "http://x"}}),
              HasSubstr("did you mean QUEUEBOX_DESTINATIONS_MY_WEB_BASEURL?"));
  EXPECT_THAT(Error({{"QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_OPENSMS", "5"}}),
              HasSubstr("did you mean QUEUEBOX_DESTINATIONS_WEB_CIRCUITBREAKER_OPENMS?"));
  EXPECT_THAT(Error({{"QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAMES", "db"}}),
              HasSubstr("did you mean QUEUEBOX_OUTBOX_CAPTURE_CONNECTION_HOSTNAME?"));
  // Nothing close: no suggestion, and a service-link form is no error at all.
  const std::string m = Error({{"QUEUEBOX_ZZZZZZZZZZZZZZZZZZZZZZZZ", "1"},
                               {"QUEUEBOX_WEB_PORT_8080_TCP_ADDR", "10.0.0.1"},
                               {"QUEUEBOX_ROUTES_0_DESTINATION", "nowhere"}});
  EXPECT_THAT(m, HasSubstr("QUEUEBOX_ZZZZZZZZZZZZZZZZZZZZZZZZ: this QUEUEBOX_ variable names no "
                           "configuration key\n"));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("QUEUEBOX_WEB_PORT_8080_TCP_ADDR")));
}

}  // namespace
}  // namespace queuebox
