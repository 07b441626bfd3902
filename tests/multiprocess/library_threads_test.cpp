// The threads the library starts leave SIGTERM and SIGUSR1 to the program's own threads.
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// The signals (SIGTERM, SIGUSR1) that every thread of this process blocks, as /proc says: bit
// s - 1 of SigBlk is signal s. Returns the threads other than the main one, and whether each of
// them blocks both.
struct ThreadMasks {
  int others = 0, blocking_both = 0;
  bool main_blocks_either = false;
};
ThreadMasks thread_masks() {
  ThreadMasks m;
  const unsigned long long both = (1ULL << (SIGTERM - 1)) | (1ULL << (SIGUSR1 - 1));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    unsigned long long blocked = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) == 0) blocked = std::stoull(line.substr(7), nullptr, 16);
    }
    if (task.path().filename() == std::to_string(::getpid())) {
      m.main_blocks_either = (blocked & both) != 0;
    } else {
      ++m.others;
      if ((blocked & both) == both) ++m.blocking_both;
    }
  }
  return m;
}

// A SIGTERM or SIGUSR1 sent to a rank must reach a thread that runs the program (the flight
// recorder writes what that thread was doing): every thread the library starts (Gloo's loop, the
// store's server on rank 0, the group's communication thread, which DDP's buckets also use) blocks
// both.
TEST(Threads, TheLibrarysThreadsLeaveSigtermAndSigusr1ToTheProgram) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int) {
    dist::barrier({.async_op = true}).wait();  // the default group's communication thread
    const ThreadMasks m = thread_masks();
    std::printf("%d other threads, %d block SIGTERM and SIGUSR1; main blocks them: %s\n", m.others,
                m.blocking_both, m.main_blocks_either ? "yes" : "no");
    return m.others >= 2 && m.blocking_both == m.others && !m.main_blocks_either ? 0 : 1;
  }));
}

}  // namespace
