// Chapter 08 — ddp_linear: DistributedDataParallel on post B's linear model.
//
// Post B fits y = 3x + 2 + noise with nn.Linear(1, 1), MSELoss and SGD(lr=0.01) on one GPU. This
// chapter trains the same model on W ranks at once: DistributedSampler gives each rank its shard
// (chapter 07), and DistributedDataParallel keeps the W replicas equal: rank 0's initial weights
// are broadcast to all, and after every backward the gradients are averaged over the ranks. It
// then checks the two promises that make data parallelism correct: the replicas end bit for bit
// equal, and W ranks with batch B took the very steps one process takes with batch W * B (run
// with --simulate-world W to see that process). The fit is checked against least squares.
//
// You will learn: what DDP does (broadcast at the start, average gradients every step) and why
// that is enough; why every rank must take the same number of steps; what post B's loop leaves
// out (it never wraps the model in DDP and gives every process all the data) and gets wrong
// (`def init` for `__init__`, `3 x` for `3 * x`).
// Builds on: chapter 04 (all_reduce), chapter 06 (per-rank seeds), chapter 07 (samplers).
//
// Run:   ./tutorial run 08
//        (or: ddprun --standalone --nproc-per-node 2 ch08_ddp_linear)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 1/2] initial weights (its own draw): w = 0.229390, b = -0.237974
//   [rank 1/2] after DistributedDataParallel(): w = 0.515263, b = -0.441378 (rank 0's)
//   [rank 0/2] epoch  0: loss 7.447744
//   [rank 0/2] OK: the replicas are bit-identical and the fit is within 0.02 of least squares
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/sampler.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// Post B's data, y = 3x + 2 + noise, made so that C++ and PyTorch build the same bits: every
// value comes from torch.randint's draws (dist::randint is the same generator, draw for draw).
// x is uniform in [-2, 2) and the noise uniform in [-0.1, 0.1).
struct Dataset {
  std::vector<float> x, y;
};
Dataset make_dataset(int n, int seed) {
  constexpr std::int64_t kSteps = 1 << 24;  // 24 bits: k / 2^24 is exact in float32
  dist::Generator g(static_cast<std::uint64_t>(seed));
  const std::vector<std::int64_t> kx = dist::randint(0, kSteps, n, g).to_vector<std::int64_t>();
  const std::vector<std::int64_t> kn = dist::randint(0, kSteps, n, g).to_vector<std::int64_t>();
  Dataset d;
  for (int i = 0; i < n; ++i) {
    const auto x = static_cast<float>(4.0 * static_cast<double>(kx[i]) / kSteps - 2.0);
    const double noise = (static_cast<double>(kn[i]) / kSteps - 0.5) * 0.2;
    d.x.push_back(x);
    d.y.push_back(static_cast<float>(3.0 * x + 2.0 + noise));
  }
  return d;
}

// A rank's own initial weights, uniform in [-1, 1), from a generator seeded seed + 1 + rank: each
// replica starts somewhere else, as models seeded per rank (chapter 06) do.
dist::LinearInit initial_weights(int seed, int rank) {
  dist::Generator g(static_cast<std::uint64_t>(seed + 1 + rank));
  const std::vector<std::int64_t> k = dist::randint(0, 1 << 24, 2, g).to_vector<std::int64_t>();
  const auto uniform = [](std::int64_t v) { return static_cast<float>(v / double{1 << 23} - 1.0); };
  return {{uniform(k[0])}, {uniform(k[1])}};
}

// The rows of one batch, as float32 tensors on `device`.
std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Dataset& d, const Indices& batch,
                                                    dist::Device device) {
  std::vector<float> x, y;
  for (std::int64_t i : batch) {
    x.push_back(d.x[i]);
    y.push_back(d.y[i]);
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
}

std::string fixed(double v, int decimals = 6) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string weights_text(const dist::Linear& model, int decimals = 6) {
  return "w = " + fixed(model.weight().data.item(0), decimals) +
         ", b = " + fixed(model.bias().data.item(0), decimals);
}

// The closed form the training must approach: least squares on the whole dataset, in double.
std::pair<double, double> least_squares(const Dataset& d) {
  const auto n = static_cast<double>(d.x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) mx += d.x[i], my += d.y[i];
  mx /= n, my /= n;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) {
    sxy += (d.x[i] - mx) * (d.y[i] - my);
    sxx += (d.x[i] - mx) * (d.x[i] - mx);
  }
  return {sxy / sxx, my - sxy / sxx * mx};
}

// One process taking the steps of a world of W ranks: at each step it joins the W ranks' batches
// into one global batch and takes one SGD step on it. No communication at all; this is what DDP
// must be equal to. Returns the epochs' mean losses.
std::vector<double> train_on_global_batches(dist::Linear& model, dist::SGD& optimizer,
                                            const Dataset& d, int world, int batch_size, int epochs,
                                            int seed) {
  std::vector<double> losses;
  const auto n = static_cast<std::int64_t>(d.x.size());
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::vector<std::vector<Indices>> per_rank;  // per_rank[r][step]: rank r's batch
    for (int r = 0; r < world; ++r) {
      dist::DistributedSampler sampler(n, {.num_replicas = world, .rank = r, .seed = seed});
      sampler.set_epoch(epoch);
      per_rank.push_back(dist::BatchSampler(sampler, batch_size, false).batches());
    }
    double loss_sum = 0, count = 0;
    // --8<-- [start:global_batch_step]
    for (std::size_t step = 0; step < per_rank[0].size(); ++step) {
      Indices global;
      for (int r = 0; r < world; ++r)
        global.insert(global.end(), per_rank[r][step].begin(), per_rank[r][step].end());
      auto [x, y] = batch_tensors(d, global, model.weight().data.device());
      optimizer.zero_grad();
      const dist::MseLoss loss = dist::mse_loss(model.forward(x), y);
      model.backward(loss.grad);
      optimizer.step();
      loss_sum += loss.loss * static_cast<double>(global.size());
      count += static_cast<double>(global.size());
    }
    // --8<-- [end:global_batch_step]
    losses.push_back(loss_sum / count);
  }
  return losses;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags
    dist::Cli cli("ch08_ddp_linear",
                  "Fit y = 3x + 2 with nn.Linear(1, 1) on every rank, kept equal by "
                  "DistributedDataParallel, and check it against one process and least squares.");
    int samples = 512, batch_size = 8, epochs = 20, seed = 0, simulate_world = 0;
    bool throughput = false;
    double lr = 0.01;
    cli.add_int("--samples", &samples,
                "samples in the dataset (2 at least: a line needs two points)", 2, 1000000);
    cli.add_int("--batch-size", &batch_size, "samples per batch on each rank", 1, 100000);
    cli.add_int("--epochs", &epochs, "passes over the dataset", 1, 1000);
    cli.add_double("--lr", &lr, "SGD's learning rate", 1e-9, 1.0);
    cli.add_int("--seed", &seed, "seeds the data, the sampler and the initial weights", 0,
                1000000000);
    cli.add_flag("--throughput", &throughput,
                 "also print the training loop's samples per second (for bench/run.py)");
    cli.add_int("--simulate-world", &simulate_world,
                "instead of DDP, one process takes the steps of W ranks' global batches "
                "(run it on 1 rank); 0: off",
                0, 1024);
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // --8<-- [start:data_and_model]
    // ---- Step 1: join the group; the data is the same on every rank, built from the seed
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();  // cuda:LOCAL_RANK under nccl, else cpu
    const Dataset data = make_dataset(samples, seed);
    const auto [w_star, b_star] = least_squares(data);
    dist::out0() << samples
                 << " samples of y = 3x + 2 + noise; least squares: w* = " << fixed(w_star)
                 << ", b* = " << fixed(b_star);

    // ---- Step 2: every rank builds its own model, from its own seed
    dist::Linear model(1, 1, initial_weights(seed, rank), device);
    dist::SGD optimizer(model.parameters(), lr);
    // --8<-- [end:data_and_model]
    std::vector<double> losses;
    const auto training_started = std::chrono::steady_clock::now();
    if (simulate_world > 0) {
      // ---- (instead of Steps 3-5) one process, the global batches of `simulate_world` ranks
      if (world != 1)
        throw dist::ConfigError("--simulate-world runs on 1 rank, not " + std::to_string(world) +
                                ": use --nproc 1");
      dist::out() << "one process, the global batches of " << simulate_world << " ranks ("
                  << simulate_world << " x " << batch_size << " samples a step)";
      losses =
          train_on_global_batches(model, optimizer, data, simulate_world, batch_size, epochs, seed);
    } else {
      // --8<-- [start:step3_wrap]
      dist::out() << "initial weights (its own draw): " << weights_text(model);

      // ---- Step 3: wrap it: every rank now holds rank 0's weights
      dist::DistributedDataParallel ddp(model.parameters());
      dist::out() << "after DistributedDataParallel(): " << weights_text(model) << " (rank 0's)";
      // --8<-- [end:step3_wrap]

      // --8<-- [start:train_loop]
      // ---- Step 4: train on this rank's shard; every step ends with the same averaged
      // gradient on every rank, so the same update keeps the replicas equal
      dist::DistributedSampler sampler(samples, {.seed = seed});
      for (int epoch = 0; epoch < epochs; ++epoch) {
        sampler.set_epoch(epoch);  // a new shuffle every epoch, the same on every rank
        dist::Tensor sums = dist::zeros(2, dist::kFloat64);  // loss * samples, samples
        for (const Indices& batch : dist::BatchSampler(sampler, batch_size, false).batches()) {
          auto [x, y] = batch_tensors(data, batch, device);
          optimizer.zero_grad();
          const dist::MseLoss loss = dist::mse_loss(model.forward(x), y);
          model.backward(loss.grad);
          ddp.average_gradients();  // torch does this inside loss.backward()
          optimizer.step();
          sums.set(0, sums.item(0) + loss.loss * static_cast<double>(batch.size()));
          sums.set(1, sums.item(1) + static_cast<double>(batch.size()));
        }
        // ---- Step 5: the epoch's loss over all ranks' samples (one all_reduce of two numbers)
        sums = sums.to(device);
        dist::all_reduce(sums, dist::ReduceOp::SUM);
        losses.push_back(sums.item(0) / sums.item(1));
      }
      // --8<-- [end:train_loop]
    }
    if (throughput) {
      const int replicas = simulate_world > 0 ? simulate_world : world;
      const std::int64_t per_replica = (samples + replicas - 1) / replicas;  // the sampler pads
      dist::report_throughput(std::chrono::steady_clock::now() - training_started,
                              std::int64_t{epochs} * replicas * per_replica);
    }
    for (int epoch = 0; epoch < epochs; ++epoch) {
      dist::out0() << "epoch " << (epoch < 10 ? " " : "") << epoch << ": loss "
                   << fixed(losses[epoch]);
    }

    // --8<-- [start:step6_check]
    // ---- Step 6: check: every replica holds the same bits, and the fit is near least squares
    dist::out() << "final: " << weights_text(model, 8);
    std::vector<dist::Tensor> everyone;
    dist::all_gather(everyone, model.weight().data);
    bool identical = true;
    for (const dist::Tensor& w : everyone) identical = identical && w.equal(model.weight().data);
    dist::all_gather(everyone, model.bias().data);
    for (const dist::Tensor& b : everyone) identical = identical && b.equal(model.bias().data);
    const double w = model.weight().data.item(0), b = model.bias().data.item(0);
    const bool near = std::abs(w - w_star) < 0.02 && std::abs(b - b_star) < 0.02;
    const bool learned = losses.back() < losses.front();
    const bool job_ok = dist::all_ranks_ok(identical && near && learned);
    // --8<-- [end:step6_check]
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: "
                   << (simulate_world > 0
                           ? ""
                           : std::string("identical replicas ") + (identical ? "yes" : "no") + ", ")
                   << "within 0.02 of least squares " << (near ? "yes" : "no")
                   << ", loss went down " << (learned ? "yes" : "no") << " (rank 0's checks)";
      // Only rank 0 fails the job: a rank that exited 1 first would make ddprun stop rank 0
      // before its MISMATCH line is out.
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << (simulate_world > 0 ? "OK: one process on the global batches"
                                        : "OK: the replicas are bit-identical")
                 << " and the fit is within 0.02 of least squares";
    return dist::kExitOk;
  });
}
