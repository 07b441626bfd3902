// dist::DistributedDataParallel on real processes (chapter 08): the broadcast at construction,
// the average of the gradients, and a model that differs between ranks named as an error.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/optim.h"
#include "dist/trace.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

class DdpWorlds : public ::testing::TestWithParam<int> {};

// Rank r starts from w = r + 1 and b = -r, and has the gradients dW = 2 (r + 1), db = r + 1.
// After construction every rank holds rank 0's (1, 0); after average_gradients every rank holds
// the mean over ranks: dW = W + 1, db = (W + 1) / 2.
TEST_P(DdpWorlds, BroadcastsRankZerosWeightsAndAveragesTheGradients) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    const auto r = static_cast<float>(rank);
    dist::Linear model(1, 1, {{r + 1}, {-r}});
    dist::DistributedDataParallel ddp(model.parameters());
    bool ok = model.weight().data.item(0) == 1 && model.bias().data.item(0) == 0;
    model.forward(dist::Tensor::from<float>({2}));       // x = 2
    model.backward(dist::Tensor::from<float>({r + 1}));  // d loss/d out = r + 1: dW = 2 (r + 1)
    ddp.average_gradients();
    // mean over ranks of 2 (r + 1) is W + 1; of r + 1 it is (W + 1) / 2 (the sums of the
    // rounded (r + 1) / W happen to round to these exactly for W = 1 to 4).
    ok = ok && model.weight().grad.item(0) == world + 1.0 &&
         model.bias().grad.item(0) == (world + 1.0) / 2;
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DdpWorlds, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

TEST(Ddp, RanksThatWrapDifferentModelsAllStopWithAMessage) {
  auto results = run_group(3, {.timeout = 30s}, [&](int rank) {
    const std::int64_t in = rank == 2 ? 2 : 1;  // rank 2 built Linear(2, 1)
    dist::Linear model(in, 1, {std::vector<float>(static_cast<std::size_t>(in), 0.5f), {0}});
    try {
      dist::DistributedDataParallel ddp(model.parameters());
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output,
                         "rank 2 wraps 2 parameters with 3 values, rank 0 wraps 2 with "
                         "2: every rank must build the same model"))
        << describe(results);
  }
}

}  // namespace

namespace {

// Three layers' parameters, 40, 4, 12, 3, 6, 2 values, with gradients that depend on the rank:
// grad[k] = (rank + 1) * (k + 1) + step.
struct ThreeLayers {
  dist::Linear a{10, 4, {std::vector<float>(40, 0.1f), std::vector<float>(4, 0)}};
  dist::Linear b{4, 3, {std::vector<float>(12, 0.1f), std::vector<float>(3, 0)}};
  dist::Linear c{3, 2, {std::vector<float>(6, 0.1f), std::vector<float>(2, 0)}};
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> all;
    for (dist::Linear* l : {&a, &b, &c}) {
      for (dist::Parameter* p : l->parameters()) all.push_back(p);
    }
    return all;
  }
  void fill_grads(int rank, int step) {
    for (dist::Parameter* p : parameters()) {
      for (std::int64_t k = 0; k < p->grad.numel(); ++k) {
        p->grad.set(k, p->grad.item(k) + (rank + 1.0) * (k + 1) + step);
      }
    }
  }
};

// Gradients mean over ranks of (r + 1) (k + 1) + step = (W + 1) / 2 (k + 1) + step, summed over
// the steps that accumulated.
bool holds_the_mean(ThreeLayers& m, int world, const std::vector<int>& steps) {
  for (dist::Parameter* p : m.parameters()) {
    for (std::int64_t k = 0; k < p->grad.numel(); ++k) {
      double want = 0;
      for (int step : steps) want += (world + 1.0) / 2 * (k + 1) + step;
      if (std::abs(p->grad.item(k) - want) > 1e-5 * want) return false;
    }
  }
  return true;
}

// A bucket of 0.0001 MiB holds 26 float32 values: from the last parameter back, c.bias (2) +
// c.weight (6) + b.bias (3) = 11, then b.weight (12) would make 23: still fits, a.bias (4) makes
// 27 > 26: a new bucket, then a.weight (40) alone.
TEST(DdpBuckets, PackTheParametersFromTheLastOneBackUpToTheCap) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int) {
    ThreeLayers m;
    dist::DistributedDataParallel ddp(m.parameters(), {.bucket_cap_mb = 0.0001});
    const auto& b = ddp.buckets();
    const bool ok = b.size() == 3 && b[0].params == std::vector<std::size_t>{5, 4, 3, 2} &&
                    b[0].numel == 23 && b[1].params == std::vector<std::size_t>{1} &&
                    b[2].params == std::vector<std::size_t>{0} && b[2].numel == 40 &&
                    ddp.overlapping();
    return ok ? 0 : 1;
  }));
}

// Parameters of the given sizes, with gradients of their size.
std::vector<dist::Parameter> parameters_of(const std::vector<std::int64_t>& sizes) {
  std::vector<dist::Parameter> all;
  for (std::int64_t n : sizes) {
    all.push_back({"p" + std::to_string(all.size()), dist::zeros(n), dist::zeros(n)});
  }
  return all;
}

// The buckets DDP builds for parameters of these sizes, as "[2 1] 64, [0] 16": each bucket's
// parameters in packing order, then its number of values.
std::string bucket_layout(const std::vector<std::int64_t>& sizes, double bucket_cap_mb) {
  std::vector<dist::Parameter> params = parameters_of(sizes);
  std::vector<dist::Parameter*> pointers;
  for (dist::Parameter& p : params) pointers.push_back(&p);
  dist::DistributedDataParallel ddp(pointers, {.bucket_cap_mb = bucket_cap_mb});
  std::string layout;
  for (const auto& b : ddp.buckets()) {
    layout += layout.empty() ? "[" : ", [";
    for (std::size_t k : b.params) layout += (layout.back() == '[' ? "" : " ") + std::to_string(k);
    layout += "] " + std::to_string(b.numel);
  }
  return layout;
}

// A cap of 1/4096 MiB is 2^20 / 4096 bytes = 256 bytes = 64 float32 values, exactly. Parameters
// of 16, 40 and 24 values, packed from the last: 24 + 40 = 64 fills the first bucket to the cap,
// and still fits (a bucket closes when the next parameter would take it over the cap, not when
// it reaches it); 16 starts the next. One value more in the middle, 24 + 41 = 65, is over the
// cap: 41 starts the second bucket, and 16 joins it (57 values).
TEST(DdpBuckets, ABucketFilledExactlyToItsCapTakesTheLastParameterAndOneValueMoreDoesNot) {
  constexpr double kCapMb = 1.0 / 4096;
  static_assert(kCapMb * 1024 * 1024 / 4 == 64);
  auto results = run_group(2, {.timeout = 30s}, [](int) {
    const std::string exact = bucket_layout({16, 40, 24}, kCapMb);
    const std::string over = bucket_layout({16, 41, 24}, kCapMb);
    std::printf("exactly the cap: %s\none value over: %s\n", exact.c_str(), over.c_str());
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "exactly the cap: [2 1] 64, [0] 16\n")) << describe(results);
    EXPECT_TRUE(contains(r.output, "one value over: [2] 24, [1 0] 57\n")) << describe(results);
  }
}

// Gradients marked ready layer by layer, as backward produces them, with buckets all-reduced
// asynchronously meanwhile, give the same averages as one call at the end without overlap; the
// timeline shows each bucket's all_reduce on the lane of the group's communication thread.
TEST_P(DdpWorlds, OverlappedBucketsAverageLikeOneCallAtTheEnd) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    dist::Timeline timeline(rank);
    ThreeLayers overlapped, plain;
    dist::DistributedDataParallel ddp(overlapped.parameters(),
                                      {.bucket_cap_mb = 0.0001, .timeline = &timeline});
    dist::DistributedDataParallel reference(plain.parameters(), {.overlap = false});
    bool ok = true;
    for (int step = 0; step < 3; ++step) {
      overlapped.fill_grads(rank, step);
      ddp.grads_ready(overlapped.c.parameters());  // backward: the last layer first
      ddp.grads_ready(overlapped.b.parameters());
      ddp.grads_ready(overlapped.a.parameters());
      ddp.finish_gradient_sync();
      plain.fill_grads(rank, step);
      reference.average_gradients();
      ok = ok && holds_the_mean(overlapped, world, {step}) && holds_the_mean(plain, world, {step});
      for (dist::Linear* l :
           {&overlapped.a, &overlapped.b, &overlapped.c, &plain.a, &plain.b, &plain.c}) {
        dist::SGD(l->parameters(), 1).zero_grad();
      }
    }
    const std::string trace = timeline.json();
    // Every bucket's all_reduce is a span: on the "gradient all_reduce" lane with overlap (W > 1).
    ok = ok && timeline.size() >= 3 * 3 && contains(trace, "all_reduce bucket 2 (40 values)") &&
         contains(trace, "\"name\": \"gradient all_reduce\"") == (world > 1);
    return ok ? 0 : 1;
  }));
}

// The order in which buckets travel: bucket 0 (parameters 5, 4, 3, 2: c's and b's) is
// all-reduced as soon as b's gradients are ready, before a's exist; a bucket that waited for a
// later one would lose the overlap and still average right. At 2 ranks every bucket takes the
// one-step exchange, 4n bytes for n values: 92 for bucket 0 (23 values), then 16 and 160. With
// overlap the bucket is queued on the group's communication thread; a call without async_op
// (here a barrier, which sends no tensor data) waits for it, so its bytes are counted by then.
TEST(DdpBuckets, ABucketIsAllReducedAsSoonAsItsLastGradientIsReady) {
  for (const bool overlap : {false, true}) {
    auto results = run_group(2, {.timeout = 30s}, [&](int rank) {
      ThreeLayers m;
      dist::DistributedDataParallel ddp(m.parameters(),
                                        {.bucket_cap_mb = 0.0001, .overlap = overlap});
      const std::int64_t start = dist::default_group().bytes_sent();
      std::vector<long long> sent;  // after each layer's gradients
      m.fill_grads(rank, 0);
      for (dist::Linear* layer : {&m.c, &m.b, &m.a}) {
        ddp.grads_ready(layer->parameters());
        dist::barrier();
        sent.push_back(dist::default_group().bytes_sent() - start);
      }
      ddp.finish_gradient_sync();
      std::printf("bytes sent: %lld after layer c, %lld after b, %lld after a; DDP counted %lld\n",
                  sent[0], sent[1], sent[2], static_cast<long long>(ddp.bytes_sent()));
      const bool ok = sent == std::vector<long long>{0, 92, 268} && ddp.bytes_sent() == 268 &&
                      holds_the_mean(m, 2, {0});
      return ok ? 0 : 1;
    });
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 0) << "overlap " << overlap << "\n" << describe(results);
    }
  }
}

// What this process holds open: its sockets (every TCP connection, listener and store
// connection) and its threads.
struct Holdings {
  int sockets = 0, threads = 0;
};
Holdings holdings() {
  Holdings h;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const auto target = std::filesystem::read_symlink(fd.path(), error).string();
    h.sockets += !error && target.rfind("socket:", 0) == 0;
  }
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++h.threads;
  }
  return h;
}

// DDP's overlap runs on the model's group and its communication thread (async_op): no second
// process group (each Gloo group is two meshes of W - 1 connections) and no thread of its own.
// Once one asynchronous call has started the group's thread, two overlapped steps, each with a
// collective of the program's own during backward (as SyncBatchNorm's), start no thread and open
// no socket (a second group would open 2(W - 1); a socket left from set-up may close meanwhile).
TEST_P(DdpWorlds, OverlapOpensNoConnectionAndNoThreadOfItsOwn) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    dist::Tensor warm = dist::full(1, 1.0);
    dist::all_reduce(warm, dist::ReduceOp::SUM, {.async_op = true}).wait();
    const Holdings before = holdings();
    ThreeLayers m;
    dist::DistributedDataParallel ddp(m.parameters(), {.bucket_cap_mb = 0.0001});
    for (int step = 0; step < 2; ++step) {
      m.fill_grads(rank, step);
      for (dist::Linear* layer : {&m.c, &m.b, &m.a}) {
        ddp.grads_ready(layer->parameters());
        dist::Tensor between = dist::full(1, 1.0);
        dist::all_reduce(between);
      }
      ddp.finish_gradient_sync();
    }
    const Holdings after = holdings();
    std::printf("rank %d: %d sockets and %d threads before DDP, %d and %d after two steps\n", rank,
                before.sockets, before.threads, after.sockets, after.threads);
    return after.sockets <= before.sockets && after.threads == before.threads &&
                   ddp.overlapping() == (world > 1)
               ? 0
               : 1;
  }));
}

// With DIST_DEBUG=DETAIL every call meets the other ranks' in the store first: the buckets, on
// the group's communication thread, and the program's own collective between layers (as
// SyncBatchNorm makes in backward), on the main thread. The program's call waits for the buckets
// queued before it, so every rank checks the same calls in the same order, and none waits for
// ever.
TEST(Ddp, UnderDebugDetailBucketsAndTheProgramsOwnCallsCheckInOneOrder) {
  expect_all_ok(run_group(
      2, {.timeout = 5s},
      [](int rank) {
        ThreeLayers m;
        dist::DistributedDataParallel ddp(m.parameters(), {.bucket_cap_mb = 0.0001});
        for (int step = 0; step < 20; ++step) {
          m.fill_grads(rank, step);
          for (dist::Linear* layer : {&m.c, &m.b, &m.a}) {
            ddp.grads_ready(layer->parameters());
            auto between = dist::full(1, 1.0);
            dist::all_reduce(between);  // the main thread's own collective, during backward
          }
          ddp.finish_gradient_sync();
          if (!holds_the_mean(m, 2, {step})) return 1;
          for (dist::Linear* l : {&m.a, &m.b, &m.c}) dist::SGD(l->parameters(), 1).zero_grad();
        }
        return 0;
      },
      {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 90s}));
}

// Buffers (BatchNorm's running statistics): rank 0's everywhere at construction; with
// broadcast_buffers, again before a training forward, but, as torch 1.13 decides with
// require_forward_param_sync, only when the forward before it was a training forward outside
// no_sync(). Each rank's buffers drift to rank + step between forwards; after a copy every rank
// holds rank 0's value, 0 + step. tests/parity/ddp_buffers.py asserts the same of torch's DDP.
TEST_P(DdpWorlds, BroadcastBuffersCopiesRankZerosBuffersBeforeTrainingForwardsAsTorchDoes) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [](int rank) {
    dist::Linear model(1, 1, {{1}, {0}});
    dist::Tensor mean = dist::full(3, 10.0 * rank), count = dist::full(1, 5.0 * rank);
    std::string log;
    const auto holds = [&](double m, double c, const char* when) {
      const bool ok = mean.equal(dist::full(3, m)) && count.equal(dist::full(1, c));
      if (!ok) log += std::string(when) + "; ";
      return ok;
    };
    const auto drift = [&](double step) {  // what this rank's own forward would do to them
      mean.fill_(rank + step);
      count.fill_(rank + step);
    };
    dist::DistributedDataParallel ddp(model.parameters(), {.buffers = {&mean, &count}});
    bool ok = holds(0, 0, "construction copies rank 0's");
    drift(1);
    ddp.before_forward();  // the first forward: copies
    ok = holds(1, 1, "the first training forward copies") && ok;
    drift(2);
    ddp.before_forward(/*training=*/false);  // the last forward trained: copies, then none
    ok = holds(2, 2, "the first evaluation forward copies") && ok;
    drift(3);
    ddp.before_forward(false);
    ok = holds(rank + 3, rank + 3, "a second evaluation forward does not") && ok;
    drift(4);
    ddp.before_forward();  // after an evaluation forward: no copy, as torch
    ok = holds(rank + 4, rank + 4, "the training forward after evaluation does not") && ok;
    drift(5);
    {
      auto local = ddp.no_sync();
      ddp.before_forward();  // the last one trained: copies; inside no_sync, the next will not
      ok = holds(5, 5, "a no_sync forward after a training one copies") && ok;
      drift(6);
      ddp.before_forward();
      ok = holds(rank + 6, rank + 6, "the next no_sync forward does not") && ok;
    }
    dist::DistributedDataParallel off(model.parameters(),
                                      {.buffers = {&mean, &count}, .broadcast_buffers = false});
    ok = holds(6, 6, "construction copies rank 0's with broadcast_buffers=false too") && ok;
    drift(7);
    off.before_forward();
    ok = holds(rank + 7, rank + 7, "broadcast_buffers=false never copies after construction") && ok;
    if (!ok) std::printf("rank %d: %s\n", rank, log.c_str());
    return ok ? 0 : 1;
  }));
}

// no_sync for two micro-batches, then a synchronised one: the average of the three summed.
TEST_P(DdpWorlds, NoSyncAccumulatesLocallyAndTheNextStepAveragesTheSum) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    ThreeLayers m;
    dist::DistributedDataParallel ddp(m.parameters(), {.bucket_cap_mb = 0.0001});
    bool ok = true;
    {
      const auto guard = ddp.no_sync();
      for (int step : {0, 1}) {
        m.fill_grads(rank, step);
        ddp.average_gradients();  // does nothing here
      }
      // Still this rank's own sum: (r + 1) (k + 1) * 2 + 1 for every k.
      ok = ok && m.c.bias().grad.item(1) == (rank + 1.0) * 2 * 2 + 1;
    }
    m.fill_grads(rank, 2);
    ddp.average_gradients();
    ok = ok && holds_the_mean(m, world, {0, 1, 2});
    ok = ok && ddp.no_sync_guards() == 1;  // one guard, made once, whatever it covered
    { const auto again = ddp.no_sync(); }
    ok = ok && ddp.no_sync_guards() == 2;
    return ok ? 0 : 1;
  }));
}

// A gradient never marked ready fails the next step (where torch's Reducer notices, at the next
// forward), in torch's words, naming it (tests/parity/ddp_practice_parity.py compares the words).
TEST(DdpBuckets, AGradientNeverMarkedReadyFailsTheNextStepAndOneMarkedTwiceAtOnce) {
  auto results = run_group(1, {.timeout = 30s}, [](int) {
    std::string missing, twice;
    {
      ThreeLayers m;
      dist::DistributedDataParallel ddp(m.parameters());
      ddp.grads_ready(m.c.parameters());
      ddp.finish_gradient_sync();  // a, b never ready: their bucket never left
      try {
        ddp.grads_ready(m.c.parameters());
      } catch (const dist::Error& e) {
        missing = e.what();
      }
    }
    ThreeLayers m;
    dist::DistributedDataParallel ddp(m.parameters());
    ddp.grads_ready(m.c.parameters());
    try {
      ddp.grads_ready(m.c.parameters());
    } catch (const dist::Error& e) {
      twice = e.what();
    }
    std::printf("%s\n%s\n", missing.c_str(), twice.c_str());
    return contains(missing, "Expected to have finished reduction in the prior iteration") &&
                   contains(missing,
                            "did not receive grad for rank 0: bias, weight, bias, "
                            "weight\n") &&
                   contains(missing,
                            "Parameter indices which did not receive grad for rank 0: "
                            "0 1 2 3\n") &&
                   contains(twice, "was marked ready twice in one step")
               ? 0
               : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

// A gradient all_reduce that fails (here: rank 1 exits instead of averaging) leaves the step's
// gradients half-averaged and the group closed. Rank 0 catches the error and tries the next
// step anyway: DDP refuses it, saying why, on both paths (one call at the end, and overlap).
TEST(Ddp, AfterAFailedGradientSyncTheNextStepIsRefused) {
  for (const bool overlap : {false, true}) {
    auto results = run_group(2, {.timeout = 10s}, [&](int rank) {
      dist::Linear model(1, 1, {{1}, {0}});
      dist::DistributedDataParallel ddp(model.parameters(), {.overlap = overlap});
      if (rank == 1) std::_Exit(3);  // gone before the gradients are averaged
      std::string first, second;
      try {
        ddp.average_gradients();
      } catch (const dist::Error& e) {
        first = e.what();
      }
      try {
        ddp.average_gradients();
      } catch (const dist::Error& e) {
        second = e.what();
      }
      std::printf("first: %s\nsecond: %s\n", first.c_str(), second.c_str());
      return !first.empty() && contains(second,
                                        "DistributedDataParallel: an earlier gradient all_reduce "
                                        "failed")
                 ? 0
                 : 1;
    });
    EXPECT_EQ(results[0].exit_code, 0) << "overlap " << overlap << "\n" << describe(results);
  }
}

}  // namespace
