// dist::HashStore's own promise, beyond the contract every store keeps (store_test's StoreContract,
// instantiated as InMemory): many threads on one store lose no update, and compare_set has one
// winner per key.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dist/store.h"
#include "rank_threads.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::describe;
using dist::testing::run_rank_threads;

// A lost update needs a thread descheduled between its read and its write while others add: each
// thread adds for longer than a time slice, and the whole is done three times (an add without its
// lock failed 9 runs in 10 with one round, on 2 cores).
TEST(HashStoreThreads, ManyThreadsAddingToOneKeyLoseNoUpdate) {
  dist::HashStore store(5s);
  constexpr int kThreads = 8, kAdds = 100000;
  for (int round = 0; round < 3; ++round) {
    const std::string key = "counter/" + std::to_string(round);
    std::atomic<int> ready = 0;
    const auto outcomes = run_rank_threads(kThreads, [&](int) {
      ++ready;  // all start adding together, so that their adds overlap
      while (ready < kThreads) std::this_thread::yield();
      for (int i = 0; i < kAdds; ++i) store.add(key, 1);
    });
    for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
    EXPECT_EQ(store.get(key), std::to_string(kThreads * kAdds)) << "round " << round;
  }
}

TEST(HashStoreThreads, CompareSetHasOneWinnerPerKeyAndEveryThreadSeesIt) {
  dist::HashStore store(5s);
  constexpr int kThreads = 8, kRounds = 20000;
  std::vector<std::vector<std::string>> seen(kThreads, std::vector<std::string>(kRounds));
  std::atomic<int> ready = 0;
  const auto outcomes = run_rank_threads(kThreads, [&](int thread) {
    ++ready;
    while (ready < kThreads) std::this_thread::yield();
    for (int round = 0; round < kRounds; ++round) {
      seen[static_cast<std::size_t>(thread)][static_cast<std::size_t>(round)] = store.compare_set(
          "round/" + std::to_string(round), "", "thread " + std::to_string(thread));
    }
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
  for (int round = 0; round < kRounds; ++round) {
    std::set<std::string> answers;
    for (int thread = 0; thread < kThreads; ++thread) {
      answers.insert(seen[static_cast<std::size_t>(thread)][static_cast<std::size_t>(round)]);
    }
    ASSERT_EQ(answers.size(), 1u) << "round " << round << ": more than one winner";
    EXPECT_EQ(*answers.begin(), store.get("round/" + std::to_string(round)));
  }
}

TEST(HashStoreThreads, AWaitEndsWhenAnotherThreadSetsTheLastKey) {
  dist::HashStore store(5s);
  const auto outcomes = run_rank_threads(3, [&](int rank) {
    if (rank == 0) {
      store.wait({"a", "b"}, 3s);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(100 * rank));
      store.set(rank == 1 ? "a" : "b", "");
    }
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
  EXPECT_GE(outcomes[0].seconds, 0.18) << describe(outcomes);
  EXPECT_LT(outcomes[0].seconds, 2.0) << "woken by the set, not by the timeout\n"
                                      << describe(outcomes);
}

}  // namespace
