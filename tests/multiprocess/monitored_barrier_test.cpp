// dist::monitored_barrier on real processes (common/src/group/debug_group.cpp): it passes when
// every rank comes, and otherwise names every rank that did not, rank 0 included.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <thread>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::run_group;
using Clock = std::chrono::steady_clock;

TEST(MonitoredBarrier, PassesWhenEveryRankComes) {
  auto results = run_group(3, {.timeout = 10s},
                           [](int) {
                             for (int i = 0; i < 3; ++i) dist::monitored_barrier(5s);
                             std::cout << "passed\n";
                             return 0;
                           },
                           {.deadline = 60s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "passed")) << describe(results);
  }
}

TEST(MonitoredBarrier, NamesEveryRankThatDidNotCome) {
  // Ranks 1 and 2 come 3 s late: rank 0 gives up after 2 s and names both; ranks 0 and 3, and
  // the late ranks when they come (within another 2 s), all stop with that verdict.
  const auto start = Clock::now();
  auto results = run_group(4, {.timeout = 20s},
                           [](int rank) {
                             if (rank == 1 || rank == 2) std::this_thread::sleep_for(3s);
                             dist::monitored_barrier(2s);
                             return 0;
                           },
                           {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(r.output, "monitored_barrier #1") &&
                contains(r.output, "ranks 1, 2 did not arrive within 2 s"))
        << describe(results);
  }
}

TEST(MonitoredBarrier, NamesRankZeroWhenItIsTheOneMissing) {
  auto results = run_group(
      2, {.timeout = 20s},
      [](int rank) {
        if (rank == 0) {
          std::this_thread::sleep_for(4s);  // stays alive (it hosts the store) but never comes
          return 0;
        }
        dist::monitored_barrier(1s);
        return 0;
      },
      {.deadline = 60s});
  EXPECT_EQ(results[1].exit_code, 1) << describe(results);
  EXPECT_TRUE(contains(results[1].output, "rank 0, which checks the barrier, gave no verdict"))
      << describe(results);
}

}  // namespace
