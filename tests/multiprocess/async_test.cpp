// Asynchronous calls (async_op, dist::Work) on real processes: the same results as the calls
// without it, in the order they were made, errors from wait(), and a call that really returns
// before its peers have come.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::ReduceOp;
using dist::Tensor;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

constexpr dist::CallOptions kAsync{.async_op = true};

class AsyncWorlds : public ::testing::TestWithParam<int> {};

// Several calls in flight at once, waited for in the reverse order; each against its closed form.
// 100,000 floats take the ring, 3 the one-step exchange.
TEST_P(AsyncWorlds, QueuedCallsGiveTheClosedFormsOfTheCallsWithoutAsyncOp) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [world](int rank) {
    const double w = world, r = rank;
    Tensor small = dist::full(3, r + 1, dist::kFloat64);  // sum: W(W+1)/2
    Tensor large = dist::full(100000, r + 1);             // the same, on the ring
    Tensor mean = dist::full(5, r, dist::kFloat64);       // AVG: (W-1)/2
    Tensor from_last = dist::full(4, r, dist::kInt64);    // broadcast from rank W-1
    std::vector<Tensor> gathered;
    Tensor mine = dist::full(2, r, dist::kInt32);
    std::vector<Tensor> pieces;
    for (int s = 0; s < world; ++s) pieces.push_back(dist::full(6, r + s, dist::kInt64));
    Tensor piece(6,
                 dist::kInt64);  // reduce_scatter: sum over ranks of (r + rank) = W(W-1)/2 + W rank

    std::vector<dist::Work> works;
    works.push_back(dist::all_reduce(small, ReduceOp::SUM, kAsync));
    works.push_back(dist::all_reduce(large, ReduceOp::SUM, kAsync));
    works.push_back(dist::all_reduce(mean, ReduceOp::AVG, kAsync));
    works.push_back(dist::broadcast(from_last, world - 1, kAsync));
    works.push_back(dist::all_gather(gathered, mine, kAsync));
    works.push_back(dist::reduce_scatter(piece, pieces, ReduceOp::SUM, kAsync));
    works.push_back(dist::barrier(kAsync));
    for (auto it = works.rbegin(); it != works.rend(); ++it) it->wait();
    for (const dist::Work& done : works) DIST_CHECK(done.is_completed(), "waited for");

    bool ok = small.equal(dist::full(3, w * (w + 1) / 2, dist::kFloat64)) &&
              large.equal(dist::full(100000, w * (w + 1) / 2)) &&
              mean.equal(dist::full(5, (w - 1) / 2, dist::kFloat64)) &&
              from_last.equal(dist::full(4, w - 1, dist::kInt64)) &&
              piece.equal(dist::full(6, w * (w - 1) / 2 + w * r, dist::kInt64)) &&
              gathered.size() == static_cast<std::size_t>(world);
    for (int s = 0; ok && s < world; ++s) {
      ok = gathered[static_cast<std::size_t>(s)].equal(dist::full(2, s, dist::kInt32));
    }
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, AsyncWorlds, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

// Rank 1 comes a second late: rank 0's call returns at once, unfinished, and wait() ends once
// rank 1 has come. A call without async_op made meanwhile waits for the queued one first: it
// never overtakes it.
TEST(AsyncOp, ReturnsAtOnceAndACallWithoutItWaitsForTheQueuedOnes) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int rank) {
    if (rank == 1) std::this_thread::sleep_for(1s);
    Tensor first = dist::full(200000, rank + 1.0);  // the ring
    dist::Work work = dist::all_reduce(first, ReduceOp::SUM, kAsync);
    const bool returned_early = rank == 1 || !work.is_completed();
    Tensor second = dist::full(3, rank + 1.0);
    dist::all_reduce(second);  // behind `first`, on every rank
    const bool in_order = work.is_completed();
    work.wait();
    const bool ok = returned_early && in_order && first.equal(dist::full(200000, 3.0)) &&
                    second.equal(dist::full(3, 3.0));
    return ok ? 0 : 1;
  }));
}

// A Work that goes out of scope waits for its call, so the tensor is never written after it.
TEST(AsyncOp, DroppingAWorkWaitsForItsCall) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int rank) {
    Tensor t = dist::full(50000, rank + 1.0);
    { dist::Work dropped = dist::all_reduce(t, ReduceOp::SUM, kAsync); }
    return t.equal(dist::full(50000, 3.0)) ? 0 : 1;
  }));
}

// Arguments are refused at the call, as without async_op; the failure of the call itself (a peer
// that is gone) comes from wait(), and closes the group as usual.
TEST(AsyncOp, BadArgumentsThrowAtOnceAndAFailedCallThrowsFromWait) {
  auto results = run_group(2, {.timeout = 10s}, [](int rank) {
    Tensor floats = dist::zeros(4);
    std::string refused;
    try {
      (void)dist::all_reduce(floats, ReduceOp::BAND, kAsync);
    } catch (const dist::ConfigError& e) {
      refused = e.what();
    }
    if (!contains(refused, "ReduceOp::BAND needs an integer tensor")) return 1;
    if (rank == 1) std::_Exit(3);  // gone before the next call
    dist::Work work = dist::all_reduce(floats, ReduceOp::SUM, kAsync);
    try {
      work.wait();
    } catch (const dist::Error& e) {
      std::printf("wait: %s\n", e.what());
      return contains(e.what(), "all_reduce #1") ? 0 : 1;
    }
    return 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

}  // namespace
