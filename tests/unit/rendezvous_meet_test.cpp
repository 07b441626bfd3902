// The rendezvous' second step (common/src/init/rendezvous.h, meet) in one process: each rank a
// thread, all meeting in one in-memory store. What init_meet_test checks on real processes through
// TCP, checked here at the step itself: nobody goes on before every rank has come, a missing rank
// is named by number at the deadline, and a conflict stops every rank at once.
#include "init/rendezvous.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "dist/store.h"
#include "rank_threads.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::describe;
using dist::testing::run_rank_threads;
using Clock = std::chrono::steady_clock;

// What resolve() makes of rank `rank` of `world_size`, meeting at 127.0.0.1:29500.
dist::rendezvous::Settings settings(int rank, int world_size) {
  dist::LaunchEnv env;
  env.rank = rank;
  env.world_size = world_size;
  env.rank_var = "RANK";
  env.world_size_var = "WORLD_SIZE";
  return dist::rendezvous::resolve({.init_method = "tcp://127.0.0.1:29500"}, env);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(MeetInMemory, EveryRankReturnsOnlyOnceAllHaveArrived) {
  auto store = std::make_shared<dist::HashStore>(5s);
  const auto outcomes = run_rank_threads(4, [&](int rank) {
    if (rank == 3) std::this_thread::sleep_for(300ms);  // the last one comes late
    dist::rendezvous::meet(*store, settings(rank, 4), Clock::now() + 20s);
  });
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.ok()) << describe(outcomes);
    EXPECT_GE(o.seconds, 0.28) << "a rank went on before rank 3 came\n" << describe(outcomes);
  }
  EXPECT_TRUE(store->check({"rank/0", "rank/1", "rank/2", "rank/3"}));
  EXPECT_EQ(store->get("world_size"), "4");
  EXPECT_EQ(store->get("backend"), "gloo");
  EXPECT_FALSE(store->check({"conflict"}));
}

TEST(MeetInMemory, AMissingRankIsNamedByNumberAtTheDeadline) {
  auto store = std::make_shared<dist::HashStore>(5s);
  const auto outcomes = run_rank_threads(4, [&](int rank) {
    if (rank == 2) return;  // never comes
    dist::rendezvous::meet(*store, settings(rank, 4), Clock::now() + 500ms);
  });
  for (const int rank : {0, 1, 3}) {
    const auto& o = outcomes[static_cast<std::size_t>(rank)];
    EXPECT_TRUE(
        o.error.starts_with("TimeoutError: rank 2 of world_size 4 never joined at "
                            "127.0.0.1:29500 before the timeout: start it"))
        << describe(outcomes);
    EXPECT_GE(o.seconds, 0.45) << "gave up before the deadline\n" << describe(outcomes);
    EXPECT_LT(o.seconds, 5.0) << describe(outcomes);
  }
}

// A conflict is found by one rank and published to the others through the store: every rank
// stops within a few of meet's 250 ms slices, long before the 20 s deadline.
TEST(MeetInMemory, TwoThreadsClaimingOneRankStopEveryRankAtOnce) {
  auto store = std::make_shared<dist::HashStore>(5s);
  const auto outcomes = run_rank_threads(3, [&](int thread) {
    const int rank = thread == 2 ? 1 : thread;  // threads 1 and 2 both say rank 1
    dist::rendezvous::meet(*store, settings(rank, 3), Clock::now() + 20s);
  });
  for (const auto& o : outcomes) {
    EXPECT_TRUE(
        o.error.starts_with("ConfigError: two processes claim rank 1 at 127.0.0.1:29500: "
                            "give every process its own RANK"))
        << describe(outcomes);
    EXPECT_LT(o.seconds, 5.0) << describe(outcomes);
  }
}

TEST(MeetInMemory, RanksThatDisagreeAboutWorldSizeOrBackendAllStopAtOnce) {
  for (const bool world_size : {true, false}) {
    SCOPED_TRACE(world_size ? "world_size" : "backend");
    auto store = std::make_shared<dist::HashStore>(5s);
    const auto outcomes = run_rank_threads(2, [&](int rank) {
      auto s = settings(rank, world_size && rank == 1 ? 3 : 2);
      if (!world_size && rank == 1) s.backend = "nccl";  // as a rank with a GPU of its own would
      dist::rendezvous::meet(*store, s, Clock::now() + 20s);
    });
    for (const auto& o : outcomes) {
      EXPECT_TRUE(o.error.starts_with("ConfigError: rank ")) << describe(outcomes);
      EXPECT_TRUE(contains(o.error, world_size ? "every rank must use the same WORLD_SIZE"
                                               : "every rank must use the same backend"))
          << describe(outcomes);
      EXPECT_LT(o.seconds, 5.0) << describe(outcomes);
    }
  }
}

}  // namespace
