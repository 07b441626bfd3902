// DDP communication hooks (dist/comm_hooks.h) on real processes: allreduce_hook gives DDP's own
// result bit for bit; PowerSGD brings a low-rank mean through intact, warms up with plain
// all_reduces, and sends the closed form's bytes; registration's errors name what to fix.
// (Parity with torch 1.13's hooks: tests/parity/comm_hooks_parity.py.)
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "dist/comm_hooks.h"
#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/half.h"
#include "dist/join.h"
#include "dist/optim.h"
#include "errors.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::config_error;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// Linear(16, 12) and Linear(12, 4): two weights that PowerSGD can compress (12 x 16 and 4 x 12)
// and two biases it never does.
struct TwoLayers {
  dist::Linear a{16, 12, {std::vector<float>(192, 0.1f), std::vector<float>(12, 0)}};
  dist::Linear b{12, 4, {std::vector<float>(48, 0.1f), std::vector<float>(4, 0)}};
  std::vector<dist::Parameter*> parameters() {
    return {a.parameters()[0], a.parameters()[1], b.parameters()[0], b.parameters()[1]};
  }
};

// Gradients that differ per rank and step, with every bit of float32 in use: torch.randn's.
void fill_grads(const std::vector<dist::Parameter*>& params, int rank, int step) {
  dist::Generator g(static_cast<std::uint64_t>(1000 * step + rank));
  for (dist::Parameter* p : params) p->grad.copy_(dist::randn(p->grad.numel(), g));
}

bool same_bits(const dist::Tensor& a, const dist::Tensor& b) {
  return a.numel() == b.numel() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// Bytes one rank sends for an all_reduce of n values of e bytes on the Gloo backend
// (backends/gloo_mesh.h): the one-step exchange up to 128 KiB + 40 bytes, the ring above.
std::int64_t all_reduce_bytes(std::int64_t n, int world, int rank, std::int64_t e = 4) {
  if (world == 1 || n == 0) return 0;
  if (e * n <= 128 * 1024 + 40) return e * n * (world - 1);
  auto segment = [&](int s) {  // elements [n s / W, n (s + 1) / W) of the ring's segment s
    s %= world;
    return n * (s + 1) / world - n * s / world;
  };
  return e * (2 * n - segment(rank) - segment((rank + 1) % world));
}

class HookWorlds : public ::testing::TestWithParam<int> {};

// Division by 3 rounds: a hook that multiplied by 1/3, or divided after the sum, would differ.
TEST_P(HookWorlds, AllreduceHookGivesDdpsOwnAverageBitForBit) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (const bool overlap : {true, false}) {
      TwoLayers plain, hooked;
      const dist::DdpOptions options{.bucket_cap_mb = 0.0002, .overlap = overlap};  // 3 buckets
      dist::DistributedDataParallel ddp(plain.parameters(), options);
      dist::DistributedDataParallel with_hook(hooked.parameters(), options);
      with_hook.register_comm_hook(dist::default_group(), dist::allreduce_hook);
      for (int step = 0; step < 3; ++step) {
        fill_grads(plain.parameters(), rank, step);
        fill_grads(hooked.parameters(), rank, step);
        ddp.average_gradients();
        with_hook.average_gradients();
        for (std::size_t k = 0; k < 4; ++k) {
          ok = same_bits(plain.parameters()[k]->grad, hooked.parameters()[k]->grad) && ok;
        }
      }
      std::printf("overlap %d: %zu buckets, bytes %lld (hook) and %lld (DDP's own)\n", overlap,
                  ddp.buckets().size(), static_cast<long long>(with_hook.bytes_sent()),
                  static_cast<long long>(ddp.bytes_sent()));
      ok = ok && ddp.buckets().size() == 3 && with_hook.bytes_sent() == ddp.bytes_sent();
    }
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, HookWorlds, ::testing::Values(1, 2, 3),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

// fp16_compress_hook and bf16_compress_hook, value by value: each rank's gradient cast to the
// small type, divided by W there, the W pieces added in rank order (as the Gloo mesh adds them)
// and cast back. Value 0 is 70000 (r + 1): beyond float16's range, so it is inf however small
// the average, because torch casts before it divides. Values 1-2 are below float16's normal range.
template <typename T>
float compressed_mean(const std::vector<float>& per_rank) {
  const T world(static_cast<float>(per_rank.size()));
  T sum = T(per_rank[0]) / world;
  for (std::size_t r = 1; r < per_rank.size(); ++r) sum = sum + T(per_rank[r]) / world;
  return static_cast<float>(sum);
}

float compressed_grad(int rank, std::int64_t k, int step) {
  if (k == 0) return 70000.0f * static_cast<float>(rank + 1);
  if (k <= 2) return 3e-7f * static_cast<float>(k + rank) + 1e-8f * static_cast<float>(step);
  dist::Generator g(static_cast<std::uint64_t>(1000 * step + rank));
  return static_cast<float>(dist::randn(k % 15 + 1, g).item(k % 15));
}

TEST_P(HookWorlds, CompressHooksCastDivideAndSumInSixteenBits) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (const bool bf16 : {false, true}) {
      TwoLayers m;
      dist::DistributedDataParallel ddp(m.parameters());
      ddp.register_comm_hook(dist::default_group(),
                             bf16 ? dist::bf16_compress_hook : dist::fp16_compress_hook);
      std::int64_t mismatches = 0;
      for (int step = 0; step < 2; ++step) {
        for (dist::Parameter* p : m.parameters()) {
          for (std::int64_t k = 0; k < p->grad.numel(); ++k) {
            p->grad.set(k, compressed_grad(rank, k, step));
          }
        }
        ddp.average_gradients();
        for (dist::Parameter* p : m.parameters()) {
          for (std::int64_t k = 0; k < p->grad.numel(); ++k) {
            std::vector<float> per_rank;
            for (int r = 0; r < world; ++r) per_rank.push_back(compressed_grad(r, k, step));
            const float want = bf16 ? compressed_mean<dist::BFloat16>(per_rank)
                                    : compressed_mean<dist::Half>(per_rank);
            const auto got = static_cast<float>(p->grad.item(k));
            if (std::bit_cast<std::uint32_t>(got) != std::bit_cast<std::uint32_t>(want)) {
              ++mismatches;
            }
          }
        }
      }
      std::printf("%s: %lld values differ; value 0 is %g\n", bf16 ? "bf16" : "fp16",
                  static_cast<long long>(mismatches), m.a.weight().grad.item(0));
      ok = ok && mismatches == 0 && (bf16 || std::isinf(m.a.weight().grad.item(0)));
    }
    return ok ? 0 : 1;
  }));
}

// Half the bytes of allreduce_hook: 2 bytes a value, on the one-step exchange (the model's 256
// values) and on the ring (a bucket of 100,000 values, above the exchange's 65,556).
TEST_P(HookWorlds, CompressHooksSendHalfTheBytes) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 60s}, [&](int rank) {
    bool ok = true;
    for (const std::int64_t n : {std::int64_t{256}, std::int64_t{100000}}) {
      std::vector<std::int64_t> sent;
      for (const auto hook :
           {dist::allreduce_hook, dist::fp16_compress_hook, dist::bf16_compress_hook}) {
        dist::Parameter w{"weight", dist::Tensor(n, dist::kFloat32),
                          dist::Tensor(n, dist::kFloat32)};
        dist::DistributedDataParallel ddp({&w});
        ddp.register_comm_hook(dist::default_group(), hook);
        fill_grads({&w}, rank, 0);
        ddp.average_gradients();
        sent.push_back(ddp.bytes_sent());
      }
      std::printf("%lld values: %lld bytes (allreduce), %lld (fp16), %lld (bf16)\n",
                  static_cast<long long>(n), static_cast<long long>(sent[0]),
                  static_cast<long long>(sent[1]), static_cast<long long>(sent[2]));
      ok = ok && sent[0] == all_reduce_bytes(n, world, rank) &&
           sent[1] == all_reduce_bytes(n, world, rank, 2) && sent[2] == sent[1] &&
           2 * sent[1] == sent[0];
    }
    return ok ? 0 : 1;
  }));
}

// Every rank's gradient is (rank + 1) u v^T: the mean, (W + 1) / 2 u v^T, has rank 1, so
// PowerSGD at rank 1 sends it exactly (to float32 rounding) however it starts Q.
TEST_P(HookWorlds, PowerSgdBringsARankOneMeanThroughIntact) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    TwoLayers m;
    dist::DistributedDataParallel ddp(m.parameters());
    dist::PowerSGDState state({.start_powerSGD_iter = 2});
    ddp.register_comm_hook(state, dist::powerSGD_hook);
    double worst = 0;
    for (int step = 0; step < 4; ++step) {
      for (dist::Parameter* p : m.parameters()) {
        const std::vector<std::int64_t> shape = p->sizes();
        const std::int64_t cols = p->data.numel() / shape[0];
        for (std::int64_t i = 0; i < p->data.numel(); ++i) {
          const double u = 1 + (i / cols) % 5, v = 0.5 - (i % cols) % 3;
          p->grad.set(i, (rank + 1) * u * v);
        }
      }
      ddp.average_gradients();
      for (dist::Parameter* p : m.parameters()) {
        const std::int64_t cols = p->data.numel() / p->sizes()[0];
        for (std::int64_t i = 0; i < p->data.numel(); ++i) {
          const double want = (world + 1) / 2.0 * (1 + (i / cols) % 5) * (0.5 - (i % cols) % 3);
          worst = std::max(worst, std::abs(p->grad.item(i) - want));
        }
      }
    }
    std::printf("largest error %.3g after %lld steps\n", worst,
                static_cast<long long>(state.iter()));
    return worst < 1e-5 && state.iter() == 4 ? 0 : 1;
  }));
}

// The first start_powerSGD_iter steps are allreduce_hook's, bit for bit; the next one compresses.
TEST(PowerSgd, WarmsUpWithPlainAllReducesForStartPowerSgdIterSteps) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int rank) {
    TwoLayers plain, compressed;
    dist::DistributedDataParallel ddp(plain.parameters());
    dist::DistributedDataParallel with_hook(compressed.parameters());
    dist::PowerSGDState state({.start_powerSGD_iter = 3});
    with_hook.register_comm_hook(state, dist::powerSGD_hook);
    std::string same;
    for (int step = 0; step < 4; ++step) {
      fill_grads(plain.parameters(), rank, step);
      fill_grads(compressed.parameters(), rank, step);
      ddp.average_gradients();
      with_hook.average_gradients();
      same += same_bits(plain.a.weight().grad, compressed.a.weight().grad) ? "=" : "~";
    }
    std::printf("steps: %s, iter %lld\n", same.c_str(), static_cast<long long>(state.iter()));
    return same == "===~" && state.iter() == 4 ? 0 : 1;
  }));
}

// PowerSGD's bytes per step: at rank 1 the 12 x 16 weight sends 12 + 16 values, the 4 x 12 one
// 4 + 12 ((4 + 12) * 2 < 48), and the 16 bias values go whole: 60 values in three all_reduces
// instead of 256. At rank 2 the 4 x 12 weight no longer pays ((4 + 12) * 2 * 2 >= 48): 2 * 28
// for the first, 64 whole values, 120 in all. On Gloo's one-step exchange each value costs
// 4 (W - 1) bytes. The statistics count the same values.
TEST_P(HookWorlds, PowerSgdSendsTheClosedFormsBytes) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (const int r : {1, 2}) {
      TwoLayers m;
      dist::DistributedDataParallel ddp(m.parameters());
      dist::PowerSGDState state({.matrix_approximation_rank = r, .start_powerSGD_iter = 2});
      ddp.register_comm_hook(state, dist::powerSGD_hook);
      std::vector<std::int64_t> per_step;
      for (int step = 0; step < 4; ++step) {
        fill_grads(m.parameters(), rank, step);
        const std::int64_t before = ddp.bytes_sent();
        ddp.average_gradients();
        per_step.push_back(ddp.bytes_sent() - before);
      }
      const std::int64_t compressed = r == 1 ? 60 : 120;
      const std::int64_t full = all_reduce_bytes(256, world, rank);
      // Three calls: the whole values, P, Q.
      const std::int64_t want =
          r == 1 ? all_reduce_bytes(16, world, rank) + all_reduce_bytes(16, world, rank) +
                       all_reduce_bytes(28, world, rank)
                 : all_reduce_bytes(64, world, rank) + all_reduce_bytes(24, world, rank) +
                       all_reduce_bytes(32, world, rank);
      const auto stats = state.compression_stats();
      std::printf("r=%d: bytes per step %lld %lld %lld %lld; stats %lld -> %lld\n", r,
                  static_cast<long long>(per_step[0]), static_cast<long long>(per_step[1]),
                  static_cast<long long>(per_step[2]), static_cast<long long>(per_step[3]),
                  static_cast<long long>(stats.numel_before),
                  static_cast<long long>(stats.numel_after));
      ok = ok && per_step == std::vector<std::int64_t>{full, full, want, want} &&
           want == compressed * 4 * (world - 1) && stats.numel_before == 2 * 256 &&
           stats.numel_after == 2 * compressed && stats.rate == 256.0 / compressed;
    }
    return ok ? 0 : 1;
  }));
}

// On the ring: P of a 40,000 x 4 matrix at rank 1 is 40,000 values, above the one-step exchange.
TEST(PowerSgd, SendsTheRingsBytesForALargeP) {
  expect_all_ok(run_group(3, {.timeout = 60s}, [](int rank) {
    dist::Parameter w{"weight",
                      dist::Tensor(160000, dist::kFloat32),
                      dist::Tensor(160000, dist::kFloat32),
                      {40000, 4}};
    dist::DistributedDataParallel ddp({&w});
    dist::PowerSGDState state({.start_powerSGD_iter = 2});
    ddp.register_comm_hook(state, dist::powerSGD_hook);
    std::int64_t last = 0;
    for (int step = 0; step < 3; ++step) {
      fill_grads({&w}, rank, step);
      const std::int64_t before = ddp.bytes_sent();
      ddp.average_gradients();
      last = ddp.bytes_sent() - before;
    }
    const std::int64_t want = all_reduce_bytes(0, 3, rank) + all_reduce_bytes(40000, 3, rank) +
                              all_reduce_bytes(4, 3, rank);
    std::printf("rank %d: %lld bytes, closed form %lld\n", rank, static_cast<long long>(last),
                static_cast<long long>(want));
    return last == want ? 0 : 1;
  }));
}

TEST(CommHooks, ASecondHookOrAHookAfterTheFirstStepIsAConfigError) {
  expect_all_ok(run_group(1, {.timeout = 30s}, [](int) {
    TwoLayers m;
    dist::DistributedDataParallel ddp(m.parameters());
    ddp.register_comm_hook(dist::default_group(), dist::allreduce_hook);
    const std::string twice =
        config_error([&] { ddp.register_comm_hook(dist::default_group(), dist::allreduce_hook); });
    TwoLayers n;
    dist::DistributedDataParallel late(n.parameters());
    late.average_gradients();
    const std::string after =
        config_error([&] { late.register_comm_hook(dist::default_group(), dist::allreduce_hook); });
    std::printf("%s\n%s\n", twice.c_str(), after.c_str());
    return contains(twice, "a hook is already registered") &&
                   contains(twice, "can only be called once") &&
                   contains(after, "register it before the first backward")
               ? 0
               : 1;
  }));
}

TEST(PowerSgd, StateRefusesStartPowerSgdIterOneWithErrorFeedbackOrWarmStart) {
  EXPECT_TRUE(contains(config_error([] { dist::PowerSGDState s({.start_powerSGD_iter = 1}); }),
                       "start_powerSGD_iter = 1 must be > 1"));
  EXPECT_TRUE(contains(
      config_error([] { dist::PowerSGDState s({.start_powerSGD_iter = 0, .warm_start = false}); }),
      "start_powerSGD_iter = 0 must be > 1"));
  EXPECT_EQ(config_error([] {
              dist::PowerSGDState s(
                  {.start_powerSGD_iter = 0, .use_error_feedback = false, .warm_start = false});
            }),
            "no ConfigError");
  EXPECT_TRUE(
      contains(config_error([] { dist::PowerSGDState s({.matrix_approximation_rank = 0}); }),
               "matrix_approximation_rank = 0 must be 1 or more"));
}

}  // namespace

namespace {

// A shape that does not hold the parameter's values stops PowerSGD's first compressed step with
// the parameter's name, on every rank alike, before any of the step's collectives.
TEST(PowerSgd, AShapeThatDoesNotMatchTheValuesIsAConfigError) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int rank) {
    dist::Parameter w{
        "proj.weight", dist::Tensor(12, dist::kFloat32), dist::Tensor(12, dist::kFloat32), {5, 2}};
    dist::DistributedDataParallel ddp({&w});
    dist::PowerSGDState state({.start_powerSGD_iter = 2});
    ddp.register_comm_hook(state, dist::powerSGD_hook);
    fill_grads({&w}, rank, 0);
    ddp.average_gradients();  // steps 0 and 1 are plain all_reduces: no shape needed
    fill_grads({&w}, rank, 1);
    ddp.average_gradients();
    fill_grads({&w}, rank, 2);
    const std::string message = config_error([&] { ddp.average_gradients(); });
    std::printf("%s\n", message.c_str());
    return contains(message, "parameter 'proj.weight' has 12 values but its shape holds 10") ? 0
                                                                                             : 1;
  }));
}

}  // namespace

namespace {

// Inside a dist::Join a rank that has run out of batches runs the hook on zero buckets, as
// torch's join hook does, so that its calls meet the training ranks' (PowerSGD makes three per
// bucket, fp16 all_reduces float16). Rank r trains counts[r] steps of gradient r + 1 everywhere
// (SGD, lr 1): while rank r still trains, a step moves every value by -(sum of k + 1 over the
// ranks k still training) / W. Every rank ends with those values, each hook to its precision.
class HookJoin : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(HookJoin, AJoinedRankRunsTheHookOnZeros) {
  const std::vector<int> counts = GetParam();
  const int world = static_cast<int>(counts.size());
  int most = 0;
  for (int c : counts) most = std::max(most, c);
  double moved = 0;
  for (int s = 0; s < most; ++s) {
    for (int k = 0; k < world; ++k) {
      if (s < counts[static_cast<std::size_t>(k)]) moved -= (k + 1.0) / world;
    }
  }
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (const std::string hook : {"allreduce", "fp16", "powersgd"}) {
      TwoLayers m;
      dist::DistributedDataParallel ddp(m.parameters());
      dist::PowerSGDState state({.start_powerSGD_iter = 2});
      if (hook == "powersgd") {
        ddp.register_comm_hook(state, dist::powerSGD_hook);
      } else {
        ddp.register_comm_hook(dist::default_group(),
                               hook == "fp16" ? dist::fp16_compress_hook : dist::allreduce_hook);
      }
      dist::SGD optimizer(m.parameters(), 1.0);
      dist::Join join(ddp);
      for (int step = 0; step < counts[static_cast<std::size_t>(rank)]; ++step) {
        optimizer.zero_grad();
        for (dist::Parameter* p : m.parameters()) p->grad.fill_(rank + 1);
        ddp.average_gradients();
        optimizer.step();
      }
      join.join();
      const double tolerance = hook == "fp16" ? 2e-2 : 1e-4;
      double worst = 0;
      for (dist::Parameter* p : m.parameters()) {
        const double start = p->name == "weight" ? 0.1f : 0.0;
        for (std::int64_t k = 0; k < p->data.numel(); ++k) {
          worst = std::max(worst, std::abs(p->data.item(k) - (start + moved)));
        }
      }
      std::printf("%s: largest error %.3g, shadowed %d steps\n", hook.c_str(), worst,
                  join.shadowed_steps());
      ok = ok && worst < tolerance &&
           join.shadowed_steps() == most - counts[static_cast<std::size_t>(rank)];
    }
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(Counts, HookJoin,
                         ::testing::Values(std::vector<int>{5, 3}, std::vector<int>{7, 4, 2}),
                         [](const auto& p) {
                           std::string name = "batches";
                           for (int c : p.param) name += "_" + std::to_string(c);
                           return name;
                         });

}  // namespace
