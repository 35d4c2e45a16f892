// edit_distance_reference.h (tests only): the full dynamic-programming edit distance, the slow
// reference that the banded Levenshtein and the Suggester are checked against.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>
#include <vector>

namespace queuebox::testing {

inline std::size_t FullEditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> t(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) t[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) t[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      t[i][j] = std::min(
          {t[i - 1][j] + 1, t[i][j - 1] + 1, t[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
  }
  return t[a.size()][b.size()];
}

}  // namespace queuebox::testing
