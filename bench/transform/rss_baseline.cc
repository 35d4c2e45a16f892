// transform_rss_baseline: prints this process's RSS (KiB) at start. It links what
// transform_bench links except the JSONata engine (qb_transform, libmozjs): the difference between
// the two at start is what merely linking the engine costs.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

int main() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) std::printf("%ld\n", std::atol(line.c_str() + 6));
  }
  return 0;
}
