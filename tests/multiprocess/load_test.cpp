// Load (label `slow`, about a minute): many small all_reduces on many ranks, and the store under a
// steady 1,000 operations a second for 30 s. Nothing may be lost, wrong or hung: every result is
// checked, every operation is bounded, and the deadline of run_ranks kills anything that hangs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>
#include <thread>

#include "dist/check.h"
#include "dist/init.h"
#include "dist/store.h"
#include "ranks.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::run_group;
using dist::testing::run_ranks;

TEST(Load, EightRanksMakeTenThousandSmallAllReducesEachAllExact) {
  constexpr int kWorld = 8, kCalls = 10000;
  auto results = run_group(
      kWorld, {.timeout = 60s},
      [&](int rank) {
        std::int64_t wrong = 0;
        const auto start = Clock::now();
        for (int i = 0; i < kCalls; ++i) {
          // Element j of rank r holds r * 1000 + i + j: the sum is a closed form, exact in int64.
          auto t = dist::Tensor::from<std::int64_t>(
              {rank * 1000 + i, rank * 1000 + i + 1, rank * 1000 + i + 2});
          dist::all_reduce(t);
          for (int j = 0; j < 3; ++j) {
            const std::int64_t expected = 1000LL * kWorld * (kWorld - 1) / 2 + kWorld * (i + j);
            wrong += t.item(j) != expected;
          }
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        std::cout << "calls " << kCalls << " wrong " << wrong << " in " << seconds << " s\n";
        return wrong == 0 ? 0 : 1;
      },
      {.deadline = 280s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "calls 10000 wrong 0")) << describe(results);
  }
}

TEST(Load, TheStoreKeepsEveryOperationAtAThousandASecondForThirtySeconds) {
  // Rank 0 hosts the store; 4 clients each make 250 operations a second, paced, for 30 s: a set,
  // a get that must return it, an add to a shared counter, and a check, in turn. Afterwards the
  // counter holds every add and every key its value; no operation may take a second.
  constexpr int kClients = 4, kPerSecond = 250, kSeconds = 30;
  constexpr int kOps = kPerSecond * kSeconds;
  const int port = dist::testing::free_port();
  auto results = run_ranks(
      kClients + 1,
      [&](int rank) {
        dist::TCPStore store({.host = "127.0.0.1",
                              .port = port,
                              .is_server = rank == 0,
                              .timeout = std::chrono::seconds(20)});
        if (rank == 0) {
          std::vector<std::string> done;
          for (int c = 1; c <= kClients; ++c) done.push_back("done/" + std::to_string(c));
          store.wait(done, std::chrono::seconds(kSeconds + 60));
          const std::int64_t adds = store.add("counter", 0);
          std::int64_t bad = 0;
          for (int c = 1; c <= kClients; ++c) {
            for (int i = 0; i < kOps; i += 4) {
              const std::string key = "k/" + std::to_string(c) + "/" + std::to_string(i);
              bad += store.get(key) != "v" + std::to_string(i * 7 + c);
            }
          }
          std::cout << "adds " << adds << " of " << kClients * kOps / 4 << ", bad values " << bad
                    << "\n";
          return adds == kClients * kOps / 4 && bad == 0 ? 0 : 1;
        }
        const auto start = Clock::now();
        auto slowest = Clock::duration::zero();
        std::int64_t wrong = 0;
        for (int i = 0; i < kOps; ++i) {
          std::this_thread::sleep_until(start +
                                        i * std::chrono::microseconds(1000000 / kPerSecond));
          const auto t0 = Clock::now();
          const std::string key = "k/" + std::to_string(rank) + "/" + std::to_string(i - i % 4);
          switch (i % 4) {
            case 0:
              store.set(key, "v" + std::to_string(i * 7 + rank));
              break;
            case 1:
              wrong += store.get(key) != "v" + std::to_string((i - 1) * 7 + rank);
              break;
            case 2:
              store.add("counter", 1);
              break;
            default:
              wrong += !store.check({key});
              break;
          }
          slowest = std::max(slowest, Clock::now() - t0);
        }
        const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
        const auto slowest_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count();
        std::cout << "ops " << kOps << " wrong " << wrong << " in " << seconds << " s, slowest "
                  << slowest_ms << " ms\n";
        store.set("done/" + std::to_string(rank), "");
        // Pacing holds when nothing stalls: 30 s of operations end within a few seconds of 30 s.
        return wrong == 0 && slowest_ms < 1000 && seconds < kSeconds + 5 ? 0 : 1;
      },
      200s);
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
  EXPECT_TRUE(contains(results[0].output, "adds 7500 of 7500, bad values 0")) << describe(results);
}

}  // namespace
