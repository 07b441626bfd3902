// Failures after init (common/src/group/process_group.cpp and the Gloo backend): a collective only
// some ranks call, a peer that dies or stops, calls that differ in size or reduce op, a rank that
// catches the error, and reduce ops that do not fit the dtype. Each ends fast, naming the call.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <functional>
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
using dist::testing::RankResult;
using dist::testing::run_group;
using Clock = std::chrono::steady_clock;

// ---- Failures after init ------------------------------------------------------------------------

TEST(AfterInit, ACollectiveCalledByOnlySomeRanksTimesOutNamingIt) {
  const auto start = Clock::now();
  auto results =
      run_group(2, {.timeout = 2s},
                [&](int rank) {
                  if (rank == 0) {
                    auto t = dist::zeros(4);
                    dist::all_reduce(t);
                  } else {
                    std::this_thread::sleep_for(4s);  // rank 1 skips the call but stays alive
                  }
                  return 0;
                },
                {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  EXPECT_EQ(results[0].exit_code, 1) << describe(results);
  EXPECT_TRUE(
      contains(results[0].output, "all_reduce #1 (SUM, torch.float32, 4 elements) timed out"))
      << describe(results);
}

// Three ranks all_reduce `numel` elements (4: one exchange; 2^16: the ring), and rank 2 first
// does `fault` (dies, or stops). Returns every rank's result.
std::vector<RankResult> all_reduce_after_rank2(std::int64_t numel,
                                               std::chrono::milliseconds timeout,
                                               const std::function<void()>& fault) {
  return run_group(3, {.timeout = timeout},
                   [&](int rank) {
                     if (rank == 2) fault();
                     auto t = dist::zeros(numel);
                     dist::all_reduce(t);
                     return 0;
                   },
                   {.deadline = 60s});
}

TEST(AfterInit, APeerThatDiesMakesTheOthersFailFast) {
  for (const std::int64_t numel : {std::int64_t{4}, std::int64_t{1} << 16}) {
    const auto start = Clock::now();
    const auto results = all_reduce_after_rank2(numel, 30s, [] { ::_exit(3); });  // no word
    EXPECT_LT(Clock::now() - start, 10s) << "survivors must not wait for the 30 s timeout";
    EXPECT_EQ(results[2].exit_code, 3);
    for (int r : {0, 1}) {
      EXPECT_EQ(results[static_cast<std::size_t>(r)].exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(results[static_cast<std::size_t>(r)].output, "all_reduce #1"))
          << describe(results);
    }
  }
}

// A stopped peer (SIGSTOP, a debugger, a frozen machine) is alive and keeps its connections open,
// so nothing tells the others it is gone: they must fail at the timeout, naming the call.
TEST(AfterInit, AStoppedPeerMakesTheOthersFailWithinTheTimeout) {
  const auto stop = [] {
    const pid_t me = ::getpid();
    if (::fork() == 0) {  // a helper ends the stopped rank later, so that the test need not
      std::this_thread::sleep_for(5s);  // well after the survivors' 2 s timeout
      ::kill(me, SIGKILL);
      ::_exit(0);
    }
    std::raise(SIGSTOP);
  };
  for (const std::int64_t numel : {std::int64_t{4}, std::int64_t{1} << 16}) {
    const auto start = Clock::now();
    const auto results = all_reduce_after_rank2(numel, 2s, stop);
    EXPECT_LT(Clock::now() - start, 15s);
    for (int r : {0, 1}) {
      const auto& result = results[static_cast<std::size_t>(r)];
      EXPECT_EQ(result.exit_code, 1) << describe(results);
      // One survivor times out; the other may instead learn of it through the closed group.
      EXPECT_TRUE(contains(result.output, "all_reduce #1")) << describe(results);
    }
    const bool timed_out = contains(results[0].output, "timed out after 2 s") ||
                           contains(results[1].output, "timed out after 2 s");
    EXPECT_TRUE(timed_out) << describe(results);
  }
}

TEST(AfterInit, MismatchedSizesEndWithARankTaggedHintNotAHang) {
  // all_reduce, all_gather and reduce_scatter compare the ranks' calls first (the tests below).
  // Gloo's own algorithms, here broadcast, detect a mismatch on Gloo's network thread, where it
  // cannot be caught: the rank that received too much aborts, after saying which rank it is and
  // what to check. (The source rank only sent; under ddprun, the abort stops it too.)
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 3s},
                           [](int rank) {
                             auto t = dist::zeros(rank == 0 ? 8 : 4);
                             dist::broadcast(t, 0);
                             return 0;
                           },
                           {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  const auto& receiver = results[1];
  EXPECT_EQ(receiver.exit_code, 128 + SIGABRT) << describe(results);
  EXPECT_TRUE(
      contains(receiver.output, "[rank 1/2] fatal: ") &&
      contains(receiver.output, "called a collective with different sizes, dtypes or order"))
      << describe(results);
}

TEST(AfterInit, AllReducesWithDifferentOpsOrSizesStopEveryRankNamingEachCall) {
  // Every rank sends a header (call number, size, dtype, op) first: when the calls differ, every
  // rank stops, naming each rank's call. Small tensors (one exchange) and large ones (the ring).
  struct Case {
    std::int64_t numel0, numel1;
    dist::ReduceOp op1;
  };
  for (const Case c :
       {Case{4, 4, dist::ReduceOp::MAX}, Case{4, 3, dist::ReduceOp::SUM},
        Case{1 << 16, 1 << 16, dist::ReduceOp::MAX}, Case{1 << 16, 1 << 17, dist::ReduceOp::SUM}}) {
    const auto start = Clock::now();
    auto results = run_group(2, {.timeout = 3s},
                             [&](int rank) {
                               auto t = dist::full(rank == 0 ? c.numel0 : c.numel1, 1.0);
                               dist::all_reduce(t, rank == 0 ? dist::ReduceOp::SUM : c.op1);
                               return 0;
                             },
                             {.deadline = 60s});
    EXPECT_LT(Clock::now() - start, 2s) << "a mismatch is found at once, not by a timeout";
    const auto call = [](std::int64_t n, const char* op) {
      return "collective #1, " + std::to_string(n) + " elements, torch.float32, " + op;
    };
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, "the ranks called it with different tensors or reduce ops") &&
                  contains(r.output, "rank 0: " + call(c.numel0, "SUM")) &&
                  contains(r.output, "rank 1: " + call(c.numel1, dist::reduce_op_name(c.op1))))
          << describe(results);
    }
  }
}

TEST(AfterInit, AllGathersAndReduceScattersOfDifferentSizesStopEveryRankNamingEachCall) {
  for (const bool gather : {true, false}) {
    auto results = run_group(2, {.timeout = 3s},
                             [&](int rank) {
                               const std::int64_t n = rank == 0 ? 5 : 6;
                               if (gather) {
                                 std::vector<dist::Tensor> out;
                                 dist::all_gather(out, dist::zeros(n));
                               } else {
                                 auto out = dist::zeros(n);
                                 dist::reduce_scatter(out, {dist::zeros(n), dist::zeros(n)});
                               }
                               return 0;
                             },
                             {.deadline = 60s});
    const std::string op = gather ? "" : ", SUM";
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, gather ? "all_gather #1" : "reduce_scatter #1") &&
                  contains(r.output, "rank 0: collective #1, 5 elements, torch.float32" + op) &&
                  contains(r.output, "rank 1: collective #1, 6 elements, torch.float32" + op))
          << describe(results);
    }
  }
}

TEST(AfterInit, ARankThatCatchesTheErrorStillLetsItsPeersFailFast) {
  // Rank 1 dies in the middle of a ring all_reduce. Its neighbours notice first; they catch the
  // error and linger, as a program that saves a checkpoint before exiting would. Rank 3 waits
  // only on rank 2: it fails within seconds, not at the 30 s timeout, because rank 2's group
  // closes its connections on the error. Afterwards the group refuses calls, naming that error.
  auto results = run_group(
      4, {.timeout = 30s},
      [](int rank) {
        auto t = dist::zeros(std::int64_t{32} << 20);  // 128 MiB: a ring of a few hundred ms
        dist::barrier();
        if (rank == 1) {
          std::thread([] {
            std::this_thread::sleep_for(80ms);
            ::_exit(3);
          }).detach();
        }
        const auto start = Clock::now();
        try {
          dist::all_reduce(t);
        } catch (const dist::Error& e) {
          const auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
          std::cout << "failed after " << ms << " ms\n";
          try {
            dist::barrier();
          } catch (const dist::Error& again) {
            std::cout << again.what() << "\n";
          }
          std::this_thread::sleep_for(8s);  // lingers, its connections closed
          return 5;
        }
        return 0;
      },
      {.deadline = 90s});
  EXPECT_EQ(results[1].exit_code, 3) << describe(results);
  for (int r : {0, 2, 3}) {
    const auto& result = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(result.exit_code, 5) << describe(results);
    const auto at = result.output.find("failed after ");
    ASSERT_NE(at, std::string::npos) << describe(results);
    EXPECT_LT(std::stol(result.output.substr(at + 13)), 5000) << describe(results);
    EXPECT_TRUE(contains(result.output, "barrier #3 on rank " + std::to_string(r) +
                                            ": this process group was closed after an earlier "
                                            "error (all_reduce #2"))
        << describe(results);
  }
}

TEST(AfterInit, ReduceOpsThatDoNotFitTheDtypeAreRefused) {
  auto results = run_group(1, {}, [](int) {
    auto f = dist::zeros(2);
    auto i = dist::arange(2);
    int refused = 0;
    try {
      dist::all_reduce(f, dist::ReduceOp::BAND);
    } catch (const dist::ConfigError& e) {
      refused += contains(e.what(),
                          "ReduceOp::BAND needs an integer tensor, but this one is torch.float32");
    }
    try {
      dist::all_reduce(i, dist::ReduceOp::AVG);
    } catch (const dist::ConfigError& e) {
      refused += contains(e.what(), "ReduceOp::AVG needs a floating-point tensor");
    }
    return refused == 2 ? 0 : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

}  // namespace
