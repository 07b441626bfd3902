// DIST_DEBUG=DETAIL on real processes (common/src/group/debug_group.cpp): matching calls give the
// usual results; calls that differ, a rank that never calls and a bad argument on one rank stop
// every rank, showing each call; an unknown level is a ConfigError.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::run_group;
using Clock = std::chrono::steady_clock;

// ---- DIST_DEBUG=DETAIL -------------------------------------------------------------------------

TEST(DebugDetail, MatchingCallsGiveTheUsualResults) {
  auto results = run_group(3, {.timeout = 20s},
                           [](int rank) {
                             auto t = dist::full(5, rank + 1.0);
                             dist::all_reduce(t);  // 1 + 2 + 3
                             auto b = dist::full(3, rank == 2 ? 7.0 : 0.0);
                             dist::broadcast(b, 2);
                             std::vector<dist::Tensor> all;
                             dist::all_gather(all, dist::full(2, rank * 1.0));
                             dist::barrier();
                             auto sub = dist::new_group();  // checked as well
                             auto m = dist::full(1, rank * 1.0);
                             sub->all_reduce(m, dist::ReduceOp::MAX);
                             sub.reset();
                             std::cout << "sum " << t.item(0) << " bcast " << b.item(2)
                                       << " gathered " << all[2].item(1) << " max " << m.item(0)
                                       << "\n";
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "detail"}}, .deadline = 60s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "sum 6 bcast 7 gathered 2 max 2")) << describe(results);
  }
}

TEST(DebugDetail, CallsThatDifferStopEveryRankShowingEachCall) {
  // A different reduce op (which torch's check ignores), and a different collective altogether.
  for (const bool other_op : {true, false}) {
    const auto start = Clock::now();
    auto results = run_group(2, {.timeout = 20s},
                             [&](int rank) {
                               auto t = dist::zeros(4);
                               dist::barrier();
                               if (rank == 0) {
                                 dist::all_reduce(t, dist::ReduceOp::SUM);
                               } else if (other_op) {
                                 dist::all_reduce(t, dist::ReduceOp::MAX);
                               } else {
                                 dist::broadcast(t, 0);
                               }
                               return 0;
                             },
                             {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
    EXPECT_LT(Clock::now() - start, 10s) << "found by comparing, not by a timeout";
    const std::string other = other_op ? "all_reduce(MAX, torch.float32, 4 elements, cpu)"
                                       : "broadcast(src 0, torch.float32, 4 elements, cpu)";
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, "DIST_DEBUG=DETAIL: collective #2") &&
                  contains(r.output, "the ranks' calls differ") &&
                  contains(r.output, "rank 0: all_reduce(SUM, torch.float32, 4 elements, cpu)") &&
                  contains(r.output, "rank 1: " + other))
          << describe(results);
    }
  }
}

TEST(DebugDetail, ARankThatNeverCallsIsNamed) {
  auto results = run_group(3, {.timeout = 2s},
                           [](int rank) {
                             if (rank == 1) {
                               std::this_thread::sleep_for(4s);  // skips the call but stays alive
                               return 0;
                             }
                             auto t = dist::zeros(4);
                             dist::all_reduce(t);
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
  for (int r : {0, 2}) {
    const auto& result = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(result.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(result.output, "collective #1 all_reduce(SUM") &&
                contains(result.output, "rank 1 did not reach it within 2 s"))
        << describe(results);
  }
}

// A bad argument on one rank only: the DETAIL check comes first, so every rank stops at once with
// each rank's call, instead of the others waiting out the timeout for the rank that was refused.
TEST(DebugDetail, ABadArgumentOnOneRankStopsEveryRankShowingEachCall) {
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 20s},
                           [](int rank) {
                             auto t = dist::zeros(4);
                             dist::broadcast(t, rank == 0 ? 7 : 0);  // src 7 of world_size 2
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
  EXPECT_LT(Clock::now() - start, 10s) << "found by comparing, not by a timeout";
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(r.output, "the ranks' calls differ") &&
                contains(r.output, "rank 0: broadcast(src 7, torch.float32, 4 elements, cpu)"))
        << describe(results);
  }
}

TEST(DebugDetail, AnUnknownLevelIsAConfigErrorNamingTheVariable) {
  auto results = run_group(1, {.timeout = 5s}, [](int) { return 0; },
                           {.env = {{"DIST_DEBUG", "INFO"}}, .deadline = 60s});
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output, "DIST_DEBUG=\"INFO\" is not a debug level"))
      << describe(results);
}

}  // namespace
