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

// A Work's times and bytes (what DDP's timeline and byte count read). Rank 1 comes 500 ms late:
// on rank 0 the first call starts at once and runs until rank 1 has come, 250 ms or more; the
// second, queued behind it, starts only when the first has ended; each says what it sent (at 2
// ranks an all_reduce of n float32 values sends 4n bytes). A call with CallOptions but without
// async_op returns its times too; a Work made by Work() has none.
TEST(AsyncOp, AWorkSaysWhenItsCallRanAndWhatItSent) {
  auto results = run_group(2, {.timeout = 30s}, [](int rank) {
    using Clock = dist::Work::Clock;
    const auto ms = [](Clock::duration d) {
      return static_cast<long long>(
          std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
    };
    if (rank == 1) std::this_thread::sleep_for(500ms);
    Tensor first = dist::full(3, 1.0), second = dist::full(5, 1.0), third = dist::full(7, 1.0);
    const auto queued = Clock::now();
    dist::Work a = dist::all_reduce(first, ReduceOp::SUM, kAsync);
    dist::Work b = dist::all_reduce(second, ReduceOp::SUM, kAsync);
    const bool unknown_before =
        rank == 1 || (a.start_time() == Clock::time_point{} &&
                      a.end_time() == Clock::time_point{} && a.bytes_sent() == 0);
    a.wait();
    b.wait();
    const auto before_sync = Clock::now();
    dist::Work c = dist::all_reduce(third, ReduceOp::SUM, dist::CallOptions{});
    const auto after_sync = Clock::now();
    std::printf(
        "rank %d: a %lld-%lld ms, b %lld-%lld ms after queueing; sent %lld, %lld, %lld bytes\n",
        rank, ms(a.start_time() - queued), ms(a.end_time() - queued), ms(b.start_time() - queued),
        ms(b.end_time() - queued), static_cast<long long>(a.bytes_sent()),
        static_cast<long long>(b.bytes_sent()), static_cast<long long>(c.bytes_sent()));
    const dist::Work none;
    const bool ok = unknown_before && queued <= a.start_time() && a.start_time() <= a.end_time() &&
                    a.end_time() <= b.start_time() && b.start_time() <= b.end_time() &&
                    (rank == 1 || a.end_time() - a.start_time() >= 250ms) && a.bytes_sent() == 12 &&
                    b.bytes_sent() == 20 && c.is_completed() && before_sync <= c.start_time() &&
                    c.start_time() <= c.end_time() && c.end_time() <= after_sync &&
                    c.bytes_sent() == 28 && none.start_time() == Clock::time_point{} &&
                    none.bytes_sent() == 0;
    return ok ? 0 : 1;
  });
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

}  // namespace
