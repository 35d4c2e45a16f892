// Docs as tests: every promise in docs/guarantees.md names the tests that prove it
// ("Proved by: `Suite.Name`"), and each named test exists in the source tree.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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

// Every "Suite.Name" defined by TEST/TEST_F/TEST_P in the project's test sources.
std::set<std::string> DefinedTests() {
  std::set<std::string> names;
  const std::regex def(R"(TEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\))");
  for (const char* dir : {"src", "tests", "bench"}) {
    std::filesystem::path root = std::filesystem::path(QUEUEBOX_SOURCE_DIR) / dir;
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
      if (!e.is_regular_file() || e.path().extension() != ".cc") continue;
      std::string text = Read(e.path());
      for (std::sregex_iterator it(text.begin(), text.end(), def), end; it != end; ++it) {
        names.insert((*it)[1].str() + "." + (*it)[2].str());
      }
    }
  }
  return names;
}

TEST(DocsGuaranteesTest, EveryProvedByNamesAnExistingTest) {
  std::string doc = Read(std::filesystem::path(QUEUEBOX_SOURCE_DIR) / "docs/guarantees.md");
  ASSERT_FALSE(doc.empty()) << "docs/guarantees.md is missing";
  std::set<std::string> defined = DefinedTests();
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
      if (defined.count(full) == 0) missing.push_back(full);
    }
    EXPECT_GT(named, 0) << "a 'Proved by' line names no test: " << line;
  }
  EXPECT_GE(promises, 5) << "docs/guarantees.md should state at least five promises";
  for (const auto& m : missing) ADD_FAILURE() << "docs/guarantees.md names a missing test: " << m;
}

}  // namespace
