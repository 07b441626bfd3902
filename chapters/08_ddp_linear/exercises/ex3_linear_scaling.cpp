// Chapter 08, exercise 3 — large batches and the linear scaling rule.
//
// W ranks with batches of B samples take one step per global batch of W * B: an epoch has W
// times fewer steps, and at the same learning rate training advances W times slower per epoch.
// The linear scaling rule multiplies the learning rate by W: one step on W * B samples at W * lr
// is close to W steps on B samples at lr, as long as each step is small. The program trains the
// line y = 3x + 2 (+ a fixed noise) with DDP on W ranks, and one process with batches of B at
// lr, and prints both epoch by epoch. Choose the W ranks' learning rate so that they track the
// one process; then find where the rule stops holding (try --base-lr 0.2 on 4 ranks).
// Grade it: ./tutorial check 08-ex3        Run it: ./tutorial run 08-ex3
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sampler.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace {

constexpr int kSamples = 240, kBatch = 8, kEpochs = 6;  // 240: equal shards on 1 to 6 ranks

// Sample i: x spread over [-2, 2) in an order that mixes small and large x, y = 3x + 2 + a noise
// in [-0.1, 0.1]. Formulas, not draws: the grader computes the same numbers.
std::pair<float, float> sample(int i) {
  const float x = -2.0f + 4.0f * static_cast<float>((37 * i) % kSamples) / kSamples;
  const float noise = static_cast<float>((7 * i) % 11 - 5) / 50.0f;
  return {x, 3.0f * x + 2.0f + noise};
}

// One epoch on `batches` (this rank's): SGD steps, each followed by `combine` of the gradients
// before the step. Returns (sum of loss x batch size, samples): the epoch's loss, once summed.
template <typename Combine>
std::pair<double, double> train_epoch(dist::Linear& model, dist::SGD& optimizer,
                                      const std::vector<std::vector<std::int64_t>>& batches,
                                      Combine combine) {
  double loss_sum = 0, count = 0;
  for (const auto& batch : batches) {
    std::vector<float> x, y;
    for (std::int64_t i : batch) {
      const auto [xi, yi] = sample(static_cast<int>(i));
      x.push_back(xi), y.push_back(yi);
    }
    const dist::Device device = model.weight().data.device();
    optimizer.zero_grad();
    const dist::MseLoss loss =
        dist::mse_loss(model.forward(dist::Tensor::from(x, device)), dist::Tensor::from(y, device));
    model.backward(loss.grad);
    combine();
    optimizer.step();
    loss_sum += loss.loss * static_cast<double>(batch.size());
    count += static_cast<double>(batch.size());
  }
  return {loss_sum, count};
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    double base_lr = 0.01;
    dist::Cli cli("ch08_ddp_linear_ex3",
                  "The linear scaling rule: W ranks at W times the learning rate track one "
                  "process, epoch by epoch.");
    cli.add_double("--base-lr", &base_lr, "one process's learning rate (batches of 8)", 1e-6, 1.0);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    const dist::LinearInit start{{-0.5f}, {0.25f}};

    // TODO(exercise): the learning rate of W ranks (world) whose global batch is W times one
    // process's batch, so that they advance per epoch as the one process at base_lr does.
    const double lr = base_lr;  // replace it
    dist::out() << "learning rate " << lr << " for global batches of " << world << " x " << kBatch;

    // W ranks with DDP: each epoch, this rank's shard in batches of kBatch (no shuffle: the
    // grader follows the same order).
    dist::Linear replica(1, 1, start, device);
    dist::SGD optimizer(replica.parameters(), lr);
    dist::DistributedDataParallel ddp(replica.parameters());
    dist::DistributedSampler sampler(kSamples, {.shuffle = false});
    const auto mine = dist::BatchSampler(sampler, kBatch, false).batches();

    // One process: every sample, in batches of kBatch, at the base learning rate (every rank
    // trains it alone, without communication; rank 0 prints it).
    dist::Linear alone(1, 1, start, device);
    dist::SGD alone_optimizer(alone.parameters(), base_lr);
    dist::DistributedSampler everything(kSamples, {.num_replicas = 1, .rank = 0, .shuffle = false});
    const auto all = dist::BatchSampler(everything, kBatch, false).batches();

    for (int epoch = 1; epoch <= kEpochs; ++epoch) {
      const auto [sum, count] =
          train_epoch(replica, optimizer, mine, [&] { ddp.average_gradients(); });
      dist::Tensor totals = dist::Tensor::from<double>({sum, count}, device);
      dist::all_reduce(totals, dist::ReduceOp::SUM);
      const auto [one_sum, one_count] = train_epoch(alone, alone_optimizer, all, [] {});
      dist::out0() << "epoch " << epoch << ": loss " << totals.item(0) / totals.item(1) << " on "
                   << world << (world == 1 ? " rank" : " ranks") << ", " << one_sum / one_count
                   << " for one process";
    }
    dist::out0() << "final: w = " << replica.weight().data.item(0)
                 << ", b = " << replica.bias().data.item(0) << " on " << world
                 << (world == 1 ? " rank" : " ranks")
                 << "; one process w = " << alone.weight().data.item(0)
                 << ", b = " << alone.bias().data.item(0);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
