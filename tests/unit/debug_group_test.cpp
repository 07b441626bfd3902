// A group's debugging aids (common/src/group/debug_group.h) in one process: the DIST_DEBUG=DETAIL
// check and monitored_barrier, each rank a thread, all meeting in one in-memory store. What
// debug_detail_test and monitored_barrier_test check on real processes, checked here at the unit.
#include "group/debug_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "dist/process_group.h"
#include "dist/store.h"
#include "dist/tensor.h"
#include "rank_threads.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::describe;
using dist::testing::run_rank_threads;
using Call = dist::ProcessGroup::Call;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Collective number `seq`, as the group describes it to its checker.
Call collective(const char* name, std::uint64_t seq, const dist::Tensor& tensor,
                std::optional<dist::ReduceOp> op) {
  Call call;
  call.name = name;
  call.seq = seq;
  call.tensor = &tensor;
  call.op = op;
  return call;
}

// ---- DIST_DEBUG=DETAIL
// ---------------------------------------------------------------------------

TEST(DetailCheckInMemory, MatchingCallsPassAndTheStoreKeepsOnlyTheLastCallsKeys) {
  auto store = std::make_shared<dist::HashStore>(5s);
  const auto outcomes = run_rank_threads(3, [&](int rank) {
    auto checker = dist::make_call_checker(rank, 3, 5s, store);
    const auto t = dist::zeros(4);
    for (std::uint64_t seq = 1; seq <= 5; ++seq) {
      checker->check(collective("all_reduce", seq, t, dist::ReduceOp::SUM));
    }
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
  // Each rank removed its key of call N-1 once it had read every rank's call N: what is left is
  // call 5's, one key per rank.
  EXPECT_EQ(store->num_keys(), 3);
  EXPECT_TRUE(store->check({"5/0", "5/1", "5/2"}));
}

TEST(DetailCheckInMemory, CallsThatDifferStopEveryRankShowingEachCall) {
  // A different reduce op (which torch's check ignores), and a different collective altogether.
  for (const bool other_op : {true, false}) {
    SCOPED_TRACE(other_op ? "another reduce op" : "another collective");
    auto store = std::make_shared<dist::HashStore>(5s);
    const auto outcomes = run_rank_threads(2, [&](int rank) {
      auto checker = dist::make_call_checker(rank, 2, 20s, store);
      const auto t = dist::zeros(4);
      checker->check(collective("all_reduce", 1, t, dist::ReduceOp::SUM));  // the same on both
      if (rank == 0) {
        checker->check(collective("all_reduce", 2, t, dist::ReduceOp::SUM));
      } else if (other_op) {
        checker->check(collective("all_reduce", 2, t, dist::ReduceOp::MAX));
      } else {
        Call broadcast = collective("broadcast", 2, t, std::nullopt);
        broadcast.peer_role = "src";
        broadcast.peer = 0;
        checker->check(broadcast);
      }
    });
    const std::string other = other_op ? "all_reduce(MAX, torch.float32, 4 elements, cpu)"
                                       : "broadcast(src 0, torch.float32, 4 elements, cpu)";
    for (const auto& o : outcomes) {
      EXPECT_TRUE(o.error.starts_with("Error: DIST_DEBUG=DETAIL: collective #2 "))
          << describe(outcomes);
      EXPECT_TRUE(contains(o.error,
                           "the ranks' calls differ:\n"
                           "  rank 0: all_reduce(SUM, torch.float32, 4 elements, cpu)\n"
                           "  rank 1: " +
                               other))
          << describe(outcomes);
      EXPECT_LT(o.seconds, 5.0) << "found by comparing, not by the 20 s timeout\n"
                                << describe(outcomes);
    }
  }
}

TEST(DetailCheckInMemory, ARankThatNeverCallsIsNamedAtTheTimeout) {
  auto store = std::make_shared<dist::HashStore>(5s);
  const auto outcomes = run_rank_threads(3, [&](int rank) {
    if (rank == 1) return;  // skips the call
    auto checker = dist::make_call_checker(rank, 3, 300ms, store);
    const auto t = dist::zeros(4);
    checker->check(collective("all_reduce", 1, t, dist::ReduceOp::SUM));
  });
  for (const int rank : {0, 2}) {
    const auto& o = outcomes[static_cast<std::size_t>(rank)];
    EXPECT_TRUE(o.error.starts_with(
        "TimeoutError: DIST_DEBUG=DETAIL: collective #1 all_reduce(SUM, torch.float32, 4 "
        "elements, cpu) on rank " +
        std::to_string(rank) + ": rank 1 did not reach it within 0.3 s."))
        << describe(outcomes);
    EXPECT_GE(o.seconds, 0.28) << describe(outcomes);
    EXPECT_LT(o.seconds, 5.0) << describe(outcomes);
  }
}

// ---- monitored_barrier
// ---------------------------------------------------------------------------

TEST(MonitoredBarrierInMemory, PassesWhenEveryRankComes) {
  dist::HashStore store(5s);
  const auto outcomes = run_rank_threads(3, [&](int rank) {
    for (int call = 1; call <= 3; ++call) dist::monitored_barrier(store, rank, 3, call, 5s);
  });
  for (const auto& o : outcomes) EXPECT_TRUE(o.ok()) << describe(outcomes);
}

TEST(MonitoredBarrierInMemory, NamesEveryRankThatDidNotComeOnEveryRank) {
  // Ranks 1 and 2 come after rank 0 has given up: they read its verdict too.
  dist::HashStore store(5s);
  const auto outcomes = run_rank_threads(4, [&](int rank) {
    if (rank == 1 || rank == 2) std::this_thread::sleep_for(600ms);
    dist::monitored_barrier(store, rank, 4, 1, 300ms);
  });
  for (const auto& o : outcomes) {
    EXPECT_TRUE(o.error.starts_with("TimeoutError: monitored_barrier #1 on rank ") &&
                contains(o.error, ": ranks 1, 2 did not arrive within 0.3 s (rank 0 waited"))
        << describe(outcomes);
    EXPECT_LT(o.seconds, 5.0) << describe(outcomes);
  }
}

TEST(MonitoredBarrierInMemory, NamesRankZeroWhenItIsTheOneMissing) {
  dist::HashStore store(5s);
  const auto outcomes = run_rank_threads(2, [&](int rank) {
    if (rank == 0) return;  // never comes
    dist::monitored_barrier(store, rank, 2, 1, 200ms);
  });
  EXPECT_TRUE(outcomes[0].ok());
  EXPECT_TRUE(outcomes[1].error.starts_with(
      "TimeoutError: monitored_barrier #1 on rank 1: rank 0, which checks the barrier, gave no "
      "verdict within 0.4 s"))
      << describe(outcomes);
  EXPECT_GE(outcomes[1].seconds, 0.38) << describe(outcomes);
}

}  // namespace
