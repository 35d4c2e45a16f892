// Docs as tests: every promise in docs/guarantees.md names the tests that prove it
// ("Proved by: `Suite.Name`"), and each named test is defined in the source tree (not in a
// comment) and does not skip or disable itself.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "testing/source_dir.h"

namespace {

std::string Read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// `text` with its comments blanked (// to the end of the line, /* ... */), string and character
// literals kept: a test named only in a comment is no test.
std::string WithoutComments(const std::string& text) {
  std::string out = text;
  char quote = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    if (quote != 0) {
      if (out[i] == '\\') {
        ++i;
      } else if (out[i] == quote) {
        quote = 0;
      }
    } else if (out[i] == '"' || out[i] == '\'') {
      const bool raw = out[i] == '"' && i > 0 && out[i - 1] == 'R';
      if (raw) {  // R"delim( ... )delim"
        const size_t open = out.find('(', i);
        const std::string close = ")" + out.substr(i + 1, open - i - 1) + "\"";
        const size_t end = out.find(close, open);
        i = end == std::string::npos ? out.size() : end + close.size() - 1;
      } else {
        quote = out[i];
      }
    } else if (out.compare(i, 2, "//") == 0) {
      while (i < out.size() && out[i] != '\n') out[i++] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
      const size_t end = out.find("*/", i + 2);
      const size_t stop = end == std::string::npos ? out.size() : end + 2;
      for (; i < stop; ++i) {
        if (out[i] != '\n') out[i] = ' ';
      }
      --i;
    }
  }
  return out;
}

// True when a line of `body` skips the test for a reason other than a build option left off (a
// skip CI's build, which has every option on, never takes: "built without ...", "... is off").
bool SkipsOutsideABuildOption(const std::string& body) {
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("GTEST_SKIP") == std::string::npos) continue;
    if (line.find("built without") == std::string::npos &&
        line.find("is off") == std::string::npos) {
      return true;
    }
  }
  return false;
}

// Every "Suite.Name" defined by TEST/TEST_F/TEST_P in the project's test sources (outside
// comments), with whether its body skips itself (SkipsOutsideABuildOption: a test that never runs
// proves nothing; QB_REQUIRE_SERVER_ENV's skip is met only outside scripts/test.sh).
std::map<std::string, bool> DefinedTests() {
  std::map<std::string, bool> names;
  const std::regex def(R"(TEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\))");
  for (const char* dir : {"src", "tests", "bench"}) {
    std::filesystem::path root = std::filesystem::path(QUEUEBOX_SOURCE_DIR) / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.path().extension() != ".cc") continue;
      std::string text = WithoutComments(Read(e.path()));
      for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it) {
        // The body: up to the first closing brace at the start of a line.
        const size_t from = static_cast<size_t>(it->position(0));
        const size_t body_end = text.find("\n}", from);
        const std::string body = text.substr(from, body_end - from);
        names[(*it)[1].str() + "." + (*it)[2].str()] =
            SkipsOutsideABuildOption(body) || (*it)[2].str().rfind("DISABLED_", 0) == 0;
      }
    }
  }
  return names;
}

TEST(DocsGuaranteesTest, CommentsAreNotTests) {
  const std::string text = "a // TEST(A, B)\nb /* TEST(C, D) */ c \"//x\" R\"(/*y*/)\" TEST(E, F)";
  const std::string kept = WithoutComments(text);
  EXPECT_EQ(kept.size(), text.size());
  EXPECT_EQ(kept.find("TEST(A"), std::string::npos);
  EXPECT_EQ(kept.find("TEST(C"), std::string::npos);
  EXPECT_NE(kept.find("\"//x\" R\"(/*y*/)\" TEST(E, F)"), std::string::npos);
}

TEST(DocsGuaranteesTest, EveryProvedByNamesAnExistingTest) {
  std::string doc = Read(std::filesystem::path(QUEUEBOX_SOURCE_DIR) / "docs/guarantees.md");
  ASSERT_FALSE(doc.empty()) << "docs/guarantees.md is missing";
  std::map<std::string, bool> defined = DefinedTests();
  const std::regex proved(R"(Proved by:([^\n]*))");
  const std::regex name(R"(`(\w+)\.(\w+)`)");
  int promises = 0;
  std::vector<std::string> missing;
  for (std::sregex_iterator it(doc.begin(), doc.end(), proved), end; it != end; ++it) {
    ++promises;
    std::string line = (*it)[1].str();
    int named = 0;
    for (std::sregex_iterator n(line.begin(), line.end(), name); n != end; ++n) {
      ++named;
      std::string full = (*n)[1].str() + "." + (*n)[2].str();
      auto found = defined.find(full);
      if (found == defined.end()) {
        missing.push_back(full);
      } else if (found->second) {
        ADD_FAILURE() << "docs/guarantees.md names a test that skips itself: " << full;
      }
    }
    EXPECT_GT(named, 0) << "a 'Proved by' line names no test: " << line;
  }
  EXPECT_GE(promises, 5) << "docs/guarantees.md should state at least five promises";
  for (const auto& m : missing) ADD_FAILURE() << "docs/guarantees.md names a missing test: " << m;
}

}  // namespace
