// dist::ShardedDataParallel on real processes (chapter 12): every stage trains a small MLP to
// DDP's weights, bit for bit where the reductions agree (1 and 2 ranks), to float32 rounding at
// 3 and 4; stage 3 frees what it gathers, and prefetch changes nothing but timing, while it
// gathers the next unit ahead.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/optim.h"
#include "dist/sharded.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// Values from a rank- and purpose-dependent generator, in [-1, 1).
std::vector<float> draws(std::int64_t n, std::uint64_t seed) {
  dist::Generator g(seed);
  const auto k = dist::randint(0, 1 << 20, n, g).to_vector<std::int64_t>();
  std::vector<float> out;
  for (std::int64_t v : k) out.push_back(static_cast<float>(v / double{1 << 19} - 1.0));
  return out;
}

// 7 -> 5 -> 4 -> 3, ReLU between: units of 40, 24 and 15 values (odd, so that shards pad at
// 2, 3 and 4 ranks). Each rank starts elsewhere (the wrappers broadcast rank 0's weights).
struct Mlp {
  explicit Mlp(int rank)
      : a(7, 5, {draws(35, 11 + rank), draws(5, 21 + rank)}),
        b(5, 4, {draws(20, 31 + rank), draws(4, 41 + rank)}),
        c(4, 3, {draws(12, 51 + rank), draws(3, 61 + rank)}) {}
  dist::Linear a, b, c;
  dist::ReLU ra, rb;
  std::vector<std::vector<dist::Parameter*>> units() {
    return {a.parameters(), b.parameters(), c.parameters()};
  }
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> all;
    for (auto& unit : units()) all.insert(all.end(), unit.begin(), unit.end());
    return all;
  }
};

// A rank's batch of 6 samples at a step: the same on every run, different on every rank.
std::pair<dist::Tensor, dist::Tensor> batch(int rank, int step) {
  return {dist::Tensor::from(draws(6 * 7, 1000 + 10 * step + rank)),
          dist::Tensor::from(draws(6 * 3, 2000 + 10 * step + rank))};
}

constexpr int kSteps = 4;
constexpr double kLr = 0.05;

std::vector<float> weights(Mlp& m) {
  std::vector<float> all;
  for (dist::Parameter* p : m.parameters()) {
    const auto v = p->data.to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// The optimizers the stages are tried with: SGD with momentum, and Adam (chapter 12's).
enum class Opt { kSgd, kAdam };
std::unique_ptr<dist::Optimizer> make_optimizer(Opt which, std::vector<dist::Parameter*> params) {
  if (which == Opt::kSgd)
    return std::make_unique<dist::SGD>(params, kLr, dist::SGDOptions{.momentum = 0.9});
  return std::make_unique<dist::Adam>(params, 0.01);
}

// DDP: the reference.
std::vector<float> train_ddp(int rank, Opt which) {
  Mlp m(rank);
  dist::DistributedDataParallel ddp(m.parameters(), {.overlap = false});
  auto opt_holder = make_optimizer(which, m.parameters());
  dist::Optimizer& opt = *opt_holder;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    auto [x, y] = batch(rank, step);
    const dist::Tensor out = m.c.forward(m.rb.forward(m.b.forward(m.ra.forward(m.a.forward(x)))));
    const dist::MseLoss loss = dist::mse_loss(out, y);
    m.a.backward(m.ra.backward(m.b.backward(m.rb.backward(m.c.backward(loss.grad)))));
    ddp.average_gradients();
    opt.step();
  }
  return weights(m);
}

// The same training through ShardedDataParallel at `stage`; at stage 3 it also checks, at every
// unit's turn, that only that unit is whole.
std::vector<float> train_sharded(int rank, Opt which, int stage, bool prefetch,
                                 bool* only_one_whole) {
  Mlp m(rank);
  dist::ShardedDataParallel sharded(m.units(), {.stage = stage, .prefetch = prefetch});
  auto opt_holder = make_optimizer(which, sharded.shards());
  dist::Optimizer& opt = *opt_holder;
  dist::Linear* layers[] = {&m.a, &m.b, &m.c};
  const auto whole_units = [&] {
    int n = 0;
    for (dist::Linear* l : layers) n += l->weight().data.numel() > 0 ? 1 : 0;
    return n;
  };
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    auto [x, y] = batch(rank, step);
    dist::Tensor h = x;
    for (std::size_t u = 0; u < 3; ++u) {
      sharded.before_forward(u);
      if (stage == 3 && whole_units() != 1) *only_one_whole = false;
      h = layers[u]->forward(h);
      if (u < 2) h = (u == 0 ? m.ra : m.rb).forward(h);
      sharded.after_forward(u);
    }
    dist::Tensor g = dist::mse_loss(h, y).grad;
    for (std::size_t u = 3; u-- > 0;) {
      sharded.before_backward(u);
      if (stage == 3 && whole_units() != 1) *only_one_whole = false;
      if (u < 2) g = (u == 0 ? m.ra : m.rb).backward(g);
      g = layers[u]->backward(g);
      sharded.after_backward(u);
    }
    sharded.finish_gradient_sync();
    opt.step();
    sharded.after_step();
  }
  if (stage == 3) {
    for (std::size_t u = 0; u < 3; ++u) sharded.before_forward(u);  // every unit whole, to read
  }
  return weights(m);
}

// Largest |a - b| / max(|b|, 1e-3) over the weights.
double worst_relative(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0 : 1e9;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, std::abs(double{a[i]} - b[i]) / std::max(std::abs(double{b[i]}), 1e-3));
  }
  return worst;
}

struct Case {
  int world, stage;
};

class ShardedStages : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedStages, EndWithDdpsWeights) {
  const auto [world, stage] = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (Opt which : {Opt::kSgd, Opt::kAdam}) {
      const char* name = which == Opt::kSgd ? "SGD" : "Adam";
      const std::vector<float> ddp = train_ddp(rank, which);
      bool only_one_whole = true;
      const std::vector<float> sharded = train_sharded(rank, which, stage, true, &only_one_whole);
      const double rel = worst_relative(sharded, ddp);
      const bool bitwise = sharded == ddp;
      std::printf("rank %d stage %d, %s: %s, worst relative difference %.3g\n", rank, stage, name,
                  bitwise ? "bit-identical" : "not bit-identical", rel);
      ok = ok && only_one_whole && rel <= 1e-6;
      if (world <= 2) ok = ok && bitwise;  // a sum of two is the same sum in either order
      if (stage == 3) {
        bool unused = true;
        ok = ok && train_sharded(rank, which, 3, false, &unused) == sharded;  // timing only
      }
    }
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, ShardedStages,
                         ::testing::Values(Case{1, 1}, Case{1, 2}, Case{1, 3}, Case{2, 1},
                                           Case{2, 2}, Case{2, 3}, Case{3, 1}, Case{3, 2},
                                           Case{3, 3}, Case{4, 1}, Case{4, 2}, Case{4, 3}),
                         [](const auto& p) {
                           return "world" + std::to_string(p.param.world) + "_stage" +
                                  std::to_string(p.param.stage);
                         });

// What each stage keeps: stage 3 holds shards only at rest (the padded chunk of each unit), stage
// 2 whole parameters but no whole gradients after the sync, stage 1 everything whole.
TEST(Sharded, EachStageHoldsWhatItShouldAtRest) {
  expect_all_ok(run_group(3, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (int stage : {1, 2, 3}) {
      Mlp m(rank);
      dist::ShardedDataParallel sharded(m.units(), {.stage = stage});
      // Units of 40, 24, 15 values at 3 ranks: chunks of 14, 8, 5 values.
      ok = ok && sharded.unit_chunk(0) == 14 && sharded.unit_chunk(1) == 8 &&
           sharded.unit_chunk(2) == 5;
      const auto mem = sharded.memory();
      const std::int64_t whole = 4 * (40 + 24 + 15), shard = 4 * (14 + 8 + 5);
      ok = ok && mem.shards == shard && mem.shard_gradients == shard && mem.in_flight == 0;
      ok = ok && mem.parameters == (stage == 3 ? 0 : whole);
      ok = ok && mem.gradients == (stage == 3 ? 0 : whole);
      // After a step (stage 2 frees the whole gradients in backward), the closed forms.
      dist::Tensor x = batch(rank, 0).first;
      dist::Linear* layers[] = {&m.a, &m.b, &m.c};
      dist::Tensor h = x;
      for (std::size_t u = 0; u < 3; ++u) {
        sharded.before_forward(u);
        h = layers[u]->forward(h);
        sharded.after_forward(u);
      }
      dist::Tensor g = dist::Tensor::full(h.numel(), 1.0);
      for (std::size_t u = 3; u-- > 0;) {
        sharded.before_backward(u);
        g = layers[u]->backward(g);
        sharded.after_backward(u);
      }
      sharded.finish_gradient_sync();
      sharded.after_step();
      // One step's traffic: 40, 24, 15 values at 3 ranks are chunks of 14, 8, 5; each is sent
      // to 2 peers per pass: reduce_scatter and all_gather (stage 3: two gathers).
      const std::int64_t passes = stage == 3 ? 3 : 2;
      ok = ok && sharded.bytes_sent() == passes * 4 * (14 + 8 + 5) * 2 &&
           sharded.bytes_sent() ==
               dist::ShardedDataParallel::expected_bytes_sent(stage, {40, 24, 15}, 3);
      if (!ok) std::printf("stage %d: sent %lld bytes\n", stage, (long long)sharded.bytes_sent());
      const auto after = sharded.memory();
      const auto want = dist::ShardedDataParallel::expected_memory(stage, {40, 24, 15}, 3);
      ok = ok && after.parameters == want.parameters && after.gradients == want.gradients &&
           after.shards == want.shards && after.shard_gradients == want.shard_gradients &&
           after.in_flight == 0;
      // The closed forms by hand: stage 2 keeps no whole gradient, stage 3 no whole parameter.
      ok = ok && want.shards == shard && want.parameters == (stage == 3 ? 0 : whole) &&
           want.gradients == (stage == 1 ? whole : 0);
      if (!ok) std::printf("stage %d: memory is not what it should be\n", stage);
    }
    return ok ? 0 : 1;
  }));
}

// Prefetch at stage 3: while unit u runs, the gather of the unit that runs next is already on
// its way (forward: u + 1; backward: u - 1), so its bytes are in flight: W chunks of 4 bytes.
// Without prefetch nothing is gathered ahead. (Comparing the weights with prefetch on and off
// cannot show this: a prefetch that gathers nothing ahead changes nothing either.) In backward,
// the flat gradients of the units after u are in flight too (W chunks each), until a later
// reduce_scatter finds theirs done and gives them back: at unit 0, unit 2's may be gone.
TEST(Sharded, Stage3PrefetchGathersTheNextUnitAhead) {
  constexpr int kWorld = 3;  // chunks of 14, 8 and 5 values (see EachStageHoldsWhatItShouldAtRest)
  expect_all_ok(run_group(kWorld, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (bool prefetch : {true, false}) {
      Mlp m(rank);
      dist::ShardedDataParallel sharded(m.units(), {.stage = 3, .prefetch = prefetch});
      const auto gathered = [&](std::size_t u) { return 4 * kWorld * sharded.unit_chunk(u); };
      // In flight now: `ahead` (the prefetch) plus one of the amounts `scattering` allows.
      const auto expect = [&](const char* when, std::size_t u, std::int64_t ahead,
                              std::vector<std::int64_t> scattering) {
        const std::int64_t got = sharded.memory().in_flight;
        for (std::int64_t s : scattering) {
          if (got == ahead + s) return;
        }
        std::printf("prefetch %d, %s of unit %zu: %lld bytes in flight, not %lld", prefetch, when,
                    u, (long long)got, (long long)(ahead + scattering[0]));
        std::printf(scattering.size() > 1 ? " or %lld\n" : "\n",
                    (long long)(ahead + scattering.back()));
        ok = false;
      };
      dist::Linear* layers[] = {&m.a, &m.b, &m.c};
      dist::Tensor h = batch(rank, 0).first;
      for (std::size_t u = 0; u < 3; ++u) {
        sharded.before_forward(u);
        expect("forward", u, prefetch && u < 2 ? gathered(u + 1) : 0, {0});
        h = layers[u]->forward(h);
        sharded.after_forward(u);
      }
      const std::vector<std::vector<std::int64_t>> scattering = {
          {gathered(1), gathered(1) + gathered(2)}, {gathered(2)}, {0}};
      dist::Tensor g = dist::Tensor::full(h.numel(), 1.0);
      for (std::size_t u = 3; u-- > 0;) {
        sharded.before_backward(u);
        expect("backward", u, prefetch && u > 0 ? gathered(u - 1) : 0, scattering[u]);
        g = layers[u]->backward(g);
        sharded.after_backward(u);
      }
      sharded.finish_gradient_sync();
      expect("the end", 0, 0, {0});
    }
    return ok ? 0 : 1;
  }));
}

TEST(Sharded, RanksThatShardDifferentModelsAllStopWithAMessage) {
  auto results = run_group(2, {.timeout = 30s}, [&](int rank) {
    Mlp m(rank);
    auto units = m.units();
    if (rank == 1) units.pop_back();
    try {
      dist::ShardedDataParallel sharded(units, {.stage = 2});
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output,
                         "rank 1 shards 2 units, 64 values, at stage 2; rank 0 shards "
                         "3 units, 79 values, at stage 2: every rank must build the "
                         "same model and units, at the same stage"))
        << describe(results);
  }
}

}  // namespace
