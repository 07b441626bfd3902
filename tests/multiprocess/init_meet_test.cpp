// init_process_group on real processes, its second step (common/src/init/rendezvous.h, meet): ranks
// that never arrive, a port held by another program, ranks that disagree about world_size and
// two processes with one rank all end fast, every rank naming the problem.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "dist/dist.h"
#include "init_checks.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_init_fails;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_launcher_env;
using Clock = std::chrono::steady_clock;

TEST(BadInput, MasterPortAlreadyInUse) {
  // Something else holds the port: rank 0 cannot host the store there, and rank 1 finds a
  // stranger instead of a store. Both say so and exit 2.
  const auto holder = dist::testing::listen_on_loopback();
  const int port = holder.port;
  const auto start = Clock::now();
  auto results =
      run_group(2, {.timeout = 20s}, [](int) { return 0; }, {.port = port, .deadline = 60s});
  ::close(holder.fd);
  EXPECT_LT(Clock::now() - start, 15s);
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output,
                       "port " + std::to_string(port) + " on 127.0.0.1 is already in use"))
      << describe(results);
  EXPECT_EQ(results[1].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[1].output, "not this job's store")) << describe(results);
}

TEST(BadInput, ARankThatNeverArrivesIsNamed) {
  // WORLD_SIZE=4 but only ranks 0 and 1 start.
  const int port = dist::testing::free_port();
  expect_init_fails(
      2, [&](int rank) { set_launcher_env(rank, 4, port); },
      {1, "ranks 2, 3 of world_size 4 never joined at 127.0.0.1:" + std::to_string(port)});
}

TEST(BadInput, RankZeroThatNeverStartsIsNamedByTheOthers) {
  const int port = dist::testing::free_port();
  expect_init_fails(1, [&](int) { set_launcher_env(1, 2, port); },
                    {1, "could not reach the store at 127.0.0.1:" + std::to_string(port)});
}

TEST(BadInput, RanksThatDisagreeAboutWorldSizeAllStopAtOnce) {
  // Whichever rank records its world_size second sees the conflict and tells the other.
  const int port = dist::testing::free_port();
  const auto start = Clock::now();
  auto results = run_ranks(
      2,
      [&](int rank) {
        set_launcher_env(rank, rank == 0 ? 2 : 3, port);
        dist::init_process_group({.timeout = 30s});
        return 0;
      },
      60s);
  EXPECT_LT(Clock::now() - start, 10s) << "a conflict must not wait out the timeout";
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "but an earlier rank said")) << describe(results);
    EXPECT_TRUE(contains(r.output, "every rank must use the same WORLD_SIZE")) << describe(results);
  }
}

TEST(BadInput, TwoProcessesWithTheSameRank) {
  const int port = dist::testing::free_port();
  auto results = run_ranks(
      3,
      [&](int rank) {
        set_launcher_env(rank == 2 ? 1 : rank, 3, port);
        dist::init_process_group({.timeout = 20s});
        return 0;
      },
      60s);
  int reported = 0;
  for (const auto& r : results) {
    EXPECT_NE(r.exit_code, 0) << describe(results);
    reported += contains(r.output, "two processes claim rank 1");
  }
  EXPECT_EQ(reported, 3) << describe(results);
}

}  // namespace
