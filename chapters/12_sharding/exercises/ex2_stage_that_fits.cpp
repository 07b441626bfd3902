// Chapter 12, exercise 2 — the stage that fits: ZeRO's memory closed forms, then a real step.
//
// A model of three Linear layers (the units: each is sharded, and at stage 3 gathered, whole)
// trains with Adam in float32. A rank's model state is its parameters (4 bytes a value), their
// gradients (4) and Adam's two moments (8): 16 bytes a value under DDP. Write what one rank holds
// at each stage, in bytes, as this library holds it (ShardedDataParallel::expected_memory in
// dist/sharded.h says what it keeps between steps), and pick the lowest stage that fits the
// budget: each stage up does more per step, and stage 3 sends 1.5 times DDP's bytes. The program
// then trains two steps at that stage and measures the model state; activations and
// communication buffers are printed beside it, outside the budget.
// Grade it: ./tutorial check 12-ex2        Run it: ./tutorial run 12-ex2
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sharded.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

// ---- Step 1: what one rank holds at each stage
// Bytes of model state one rank holds at its high-water mark in a step, at `stage` (0: DDP), for
// units of `unit_numels` values on `world` ranks: what ShardedDataParallel::memory() counts
// (parameters, gradients, shards, shard gradients) plus Adam's state_bytes().
std::int64_t model_state_bytes(int stage, const std::vector<std::int64_t>& unit_numels, int world) {
  // TODO(exercise): the bytes for each stage, in closed form (with W = world, c_u = ceil(n_u / W)
  // the values of unit u's shard, padding included, and Psi the sum of the n_u):
  //   stage 0, DDP: parameters, gradients and Adam's moments, whole: 4 Psi + 4 Psi + 8 Psi
  //            (DDP's buckets are a communication buffer, printed beside the model state);
  //   stage 1: Adam's moments for the shards only; the whole parameters and gradients stay, and
  //            each shard and its gradient are copies beside them (dist::Tensor has no views);
  //   stage 2: the gradients sharded too: a unit's gradient is whole only during its backward
  //            (so the high-water mark has the largest unit's);
  //   stage 3: the parameters sharded too: a unit is whole, with its gradient, during its
  //            backward (its forward needs its parameters only).
  // The placeholder says DDP's at every stage.
  (void)stage, (void)world;
  std::int64_t psi = 0;
  for (std::int64_t n : unit_numels) psi += n;
  return 16 * psi;
}

// ---- Step 2: the lowest stage that fits; -1 when none does
int lowest_stage_that_fits(double budget_bytes, const std::vector<std::int64_t>& unit_numels,
                           int world) {
  // TODO(exercise): the lowest stage (0, 1, 2, 3) whose model_state_bytes fits in budget_bytes;
  // -1 when none does. The placeholder always takes DDP.
  (void)budget_bytes, (void)unit_numels, (void)world;
  return 0;
}

// The model: in -> hidden -> hidden2 -> out, ReLU between, the same start on every rank.
constexpr std::int64_t kSizes[] = {200, 301, 257, 10};
constexpr int kBatch = 8;

std::vector<float> closed_form(std::int64_t count, std::int64_t salt, float scale) {
  std::vector<float> v;
  for (std::int64_t k = 0; k < count; ++k) {
    v.push_back(scale * static_cast<float>((k * 7919 + salt * 104729) % 2001 - 1000) / 1000);
  }
  return v;
}

struct Model {
  std::vector<dist::Linear> layers;
  dist::ReLU relu[2];
  Model() {
    for (std::int64_t l = 0; l < 3; ++l) {
      const std::int64_t in = kSizes[l], out = kSizes[l + 1];
      layers.emplace_back(
          in, out,
          dist::LinearInit{closed_form(in * out, l, 0.05f), closed_form(out, l + 10, 0.01f)},
          dist::get_device());
    }
  }
  std::vector<std::vector<dist::Parameter*>> units() {
    std::vector<std::vector<dist::Parameter*>> all;
    for (dist::Linear& layer : layers) all.push_back(layer.parameters());
    return all;
  }
};

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f MiB", bytes / (1 << 20));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    double budget_mib = 2;
    dist::Cli cli("ch12_sharding_ex2", "The lowest ZeRO stage whose model state fits a budget.");
    cli.add_double("--memory-budget-mib", &budget_mib, "model-state bytes one rank may hold, MiB",
                   0, 1e6);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    Model model;
    std::vector<std::int64_t> unit_numels;
    std::string sizes;
    for (const auto& unit : model.units()) {
      std::int64_t n = 0;
      for (const dist::Parameter* p : unit) n += p->data.numel();
      unit_numels.push_back(n);
      sizes += (sizes.empty() ? "" : ", ") + std::to_string(n);
    }
    const double budget = budget_mib * (1 << 20);
    dist::out0() << "units of " << sizes << " values on " << world << " ranks, Adam; budget "
                 << mib(budget);
    for (int stage = 0; stage <= 3; ++stage) {
      const std::int64_t bytes = model_state_bytes(stage, unit_numels, world);
      dist::out0() << "stage " << stage << (stage == 0 ? " (DDP)" : "") << " needs " << bytes
                   << " bytes (" << mib(static_cast<double>(bytes)) << ")";
    }
    const int stage = lowest_stage_that_fits(budget, unit_numels, world);
    if (stage < 0) {
      dist::out() << "chosen stage: none";
      dist::barrier();  // every rank has said so before any of them stops the job
      throw dist::ConfigError("no stage fits a model-state budget of " + mib(budget) + " on " +
                              std::to_string(world) +
                              " ranks: raise --memory-budget-mib, or run on more ranks");
    }
    dist::out() << "chosen stage: " << stage;

    // ---- Step 3: two steps at that stage; the model state measured at every hook of step 2
    std::unique_ptr<dist::DistributedDataParallel> ddp;
    std::unique_ptr<dist::ShardedDataParallel> sharded;
    std::vector<dist::Parameter*> params;
    for (const auto& unit : model.units()) params.insert(params.end(), unit.begin(), unit.end());
    if (stage == 0) {
      ddp = std::make_unique<dist::DistributedDataParallel>(params,
                                                            dist::DdpOptions{.overlap = false});
    } else {
      sharded = std::make_unique<dist::ShardedDataParallel>(
          model.units(), dist::ShardOptions{.stage = stage, .prefetch = false});
    }
    dist::Adam optimizer(sharded ? sharded->shards() : params, 1e-3);
    std::int64_t held = 0, in_flight = 0;
    const auto measure = [&] {
      std::int64_t bytes = optimizer.state_bytes();
      if (sharded) {
        const dist::ShardedDataParallel::Memory m = sharded->memory();
        bytes += m.parameters + m.gradients + m.shards + m.shard_gradients;
        in_flight = std::max(in_flight, m.in_flight);
      } else {
        for (const dist::Parameter* p : params) {
          bytes += static_cast<std::int64_t>(p->data.nbytes() + p->grad.nbytes());
        }
        std::int64_t buckets = 0;  // DDP's: a packed copy of the gradients, not model state
        for (const auto& bucket : ddp->buckets()) {
          buckets += static_cast<std::int64_t>(bucket.buffer.nbytes());
        }
        in_flight = std::max(in_flight, buckets);
      }
      held = std::max(held, bytes);
    };
    for (int step = 0; step < 2; ++step) {
      if (step == 1) {  // Adam's state exists from the first step on: measure the second
        held = in_flight = 0;
        dist::reset_peak_memory_stats(device);
      }
      optimizer.zero_grad();
      dist::Tensor h = dist::Tensor::from(closed_form(kBatch * kSizes[0], 20 + rank, 1), device);
      const dist::Tensor y =
          dist::Tensor::from(closed_form(kBatch * kSizes[3], 30 + rank, 1), device);
      for (std::size_t u = 0; u < 3; ++u) {
        if (sharded) sharded->before_forward(u);
        measure();
        h = model.layers[u].forward(h);
        if (u < 2) h = model.relu[u].forward(h);
        if (sharded) sharded->after_forward(u);
      }
      dist::Tensor g = dist::mse_loss(h, y).grad;
      for (std::size_t u = 3; u-- > 0;) {
        if (sharded) sharded->before_backward(u);
        if (u < 2) g = model.relu[u].backward(g);
        g = model.layers[u].backward(g);
        measure();
        if (sharded) sharded->after_backward(u);
      }
      if (sharded) {
        sharded->finish_gradient_sync();
      } else {
        ddp->average_gradients();
      }
      optimizer.step();
      if (sharded) sharded->after_step();
      measure();
    }
    const std::int64_t peak = dist::max_memory_allocated(device);
    dist::out() << "step 2 at stage " << stage << ": model state at most " << held << " bytes ("
                << mib(static_cast<double>(held)) << "); beside it, communication buffers at most "
                << in_flight << " bytes, and every tensor together at most " << peak
                << " bytes (max_memory_allocated)";
    sharded.reset();
    ddp.reset();
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
