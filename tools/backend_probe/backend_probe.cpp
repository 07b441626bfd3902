// backend_probe: what `--backend auto` picks for N ranks on this machine, asked of the library
// itself. `./tutorial doctor` runs it with each lesson's ranks per machine.
//
//   backend_probe N...     one line per N: N, a tab, nccl or gloo, a tab, the reason
//
// It asks the library's public dist::choose_backend_for_machine (dist/backend_choice.h), which
// runs what init_process_group runs on this process's census of GPUs for local ranks 0 .. N-1. It
// starts no process group and needs no other process. The answer is this build's: a cpu preset
// build always answers gloo (it has no GPU path); build the cuda preset to ask about the GPUs.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dist/backend_choice.h"

namespace {

int usage(std::FILE* out, int code) {
  std::fputs(
      "usage: backend_probe N...\n"
      "  For each N (ranks on this machine), what --backend auto picks and why:\n"
      "  one line of N, a tab, nccl or gloo, a tab, the reason.\n",
      out);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
    return usage(stdout, 0);
  }
  std::vector<int> counts;
  for (int a = 1; a < argc; ++a) {
    const char* end = argv[a] + std::strlen(argv[a]);
    int n = 0;
    if (auto [rest, error] = std::from_chars(argv[a], end, n);
        error != std::errc() || rest != end || n < 1) {
      std::fprintf(stderr, "backend_probe: '%s' is not a number of ranks (1 or more)\n", argv[a]);
      return usage(stderr, 2);
    }
    counts.push_back(n);
  }
  if (counts.empty()) return usage(stderr, 2);
  for (int n : counts) {
    const dist::BackendChoice choice = dist::choose_backend_for_machine(n);
    std::printf("%d\t%s\t%s\n", n, choice.backend.c_str(), choice.reason.c_str());
  }
  return 0;
}
