// Chapter 08, exercise 2 — sum the gradients instead of averaging them.
//
// A common slip when writing DDP by hand: all_reduce(SUM) of the gradients, and no division by
// world_size. Predict what it does, then check: the summed gradient is W times the mean, so it is
// plain DDP with a learning rate W times larger. Train both (sum at lr, mean at W * lr) and compare
// the final weights; then see why "the learning rate grows with the number of ranks" is a bug when
// nobody meant it.
//
// Run: ./tutorial run 08-ex2   (or: ddprun --standalone --nproc-per-node 2 ch08_ddp_linear_ex2)
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/sampler.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace {

constexpr double kLr = 0.01;

// Two epochs on y = 3x + 2 (no noise), x evenly spaced in [-2, 2); `reduce` is called between
// backward and the optimizer step.
void train(dist::Linear& model, double lr, const std::function<void()>& reduce) {
  constexpr int kSamples = 256;
  std::vector<float> xs, ys;
  for (int i = 0; i < kSamples; ++i) {
    xs.push_back(-2.0f + 4.0f * static_cast<float>(i) / kSamples);
    ys.push_back(3.0f * xs.back() + 2.0f);
  }
  dist::SGD optimizer(model.parameters(), lr);
  dist::DistributedSampler sampler(kSamples, {.seed = 0});
  for (int epoch = 0; epoch < 2; ++epoch) {
    sampler.set_epoch(epoch);
    for (const auto& batch : dist::BatchSampler(sampler, 8, false).batches()) {
      std::vector<float> x, y;
      for (std::int64_t i : batch) x.push_back(xs[i]), y.push_back(ys[i]);
      const dist::Device device = model.weight().data.device();
      optimizer.zero_grad();
      model.backward(dist::mse_loss(model.forward(dist::Tensor::from(x, device)),
                                    dist::Tensor::from(y, device))
                         .grad);
      reduce();
      optimizer.step();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch08_ddp_linear_ex2",
                  "all_reduce(SUM) without dividing by world_size is DDP with world_size times "
                  "the learning rate.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::LinearInit start{{-0.5f}, {0.25f}};

    // The slip: the sum of the gradients, at the learning rate meant for their mean.
    dist::Linear summed(1, 1, start, dist::get_device());
    train(summed, kLr, [&] {
      for (dist::Parameter* p : summed.parameters()) dist::all_reduce(p->grad, dist::ReduceOp::SUM);
    });
    // What it equals: the mean (DDP), at world_size times the learning rate.
    dist::Linear scaled(1, 1, start, dist::get_device());
    dist::DistributedDataParallel ddp(scaled.parameters());
    train(scaled, kLr * world, [&] { ddp.average_gradients(); });

    const double w1 = summed.weight().data.item(0), w2 = scaled.weight().data.item(0);
    const double b1 = summed.bias().data.item(0), b2 = scaled.bias().data.item(0);
    dist::out0() << "SUM, lr " << kLr << ":          w = " << w1 << ", b = " << b1;
    dist::out0() << "mean (DDP), lr " << kLr << " x " << world << ": w = " << w2 << ", b = " << b2;
    const auto close = [](double a, double b) { return std::abs(a - b) <= 1e-5 * std::abs(b); };
    const bool job_ok = dist::all_ranks_ok(close(w1, w2) && close(b1, b2));
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: SUM at lr differs from the mean at lr x world_size";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: summing the gradients is the mean at world_size times the learning rate";
    return dist::kExitOk;
  });
}
