// Chapter 08, exercise 1 — DDP without its broadcast.
//
// Leave out DDP's first promise: every rank keeps its own initial weights, and only the gradients
// are averaged (all_reduce of grad / W, by hand). Predict, then check: every rank applies the same
// averaged step, so the gap between two replicas never changes; they never meet, whatever the
// number of steps. With dist::DistributedDataParallel (broadcast first) the gap is exactly 0.
//
// Run: ./tutorial run 08-ex1   (or: ddprun --standalone --nproc-per-node 2 ch08_ddp_linear_ex1)
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/sampler.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

namespace {

// Four epochs on y = 3x + 2 (no noise), x evenly spaced in [-2, 2); `average` is called between
// backward and the optimizer step.
void train(dist::Linear& model, const std::function<void()>& average) {
  constexpr int kSamples = 256;
  std::vector<float> xs, ys;
  for (int i = 0; i < kSamples; ++i) {
    xs.push_back(-2.0f + 4.0f * static_cast<float>(i) / kSamples);
    ys.push_back(3.0f * xs.back() + 2.0f);
  }
  dist::SGD optimizer(model.parameters(), 0.01);
  dist::DistributedSampler sampler(kSamples, {.seed = 0});
  for (int epoch = 0; epoch < 4; ++epoch) {
    sampler.set_epoch(epoch);
    for (const auto& batch : dist::BatchSampler(sampler, 8, false).batches()) {
      std::vector<float> x, y;
      for (std::int64_t i : batch) x.push_back(xs[i]), y.push_back(ys[i]);
      const dist::Device device = model.weight().data.device();
      optimizer.zero_grad();
      model.backward(dist::mse_loss(model.forward(dist::Tensor::from(x, device)),
                                    dist::Tensor::from(y, device))
                         .grad);
      average();
      optimizer.step();
    }
  }
}

// This rank's weight minus rank 0's.
double gap_to_rank0(const dist::Linear& model) {
  std::vector<dist::Tensor> everyone;
  dist::all_gather(everyone, model.weight().data);
  return model.weight().data.item(0) - everyone[0].item(0);
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch08_ddp_linear_ex1",
                  "Average gradients without broadcasting the initial weights: the replicas "
                  "never meet.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::LinearInit own{{-0.5f + 0.25f * static_cast<float>(rank)}, {0.0f}};

    // Gradients averaged by hand, no broadcast: each replica keeps its own start.
    dist::Linear alone(1, 1, own, dist::get_device());
    const double gap_before = gap_to_rank0(alone);
    train(alone, [&] {
      for (dist::Parameter* p : alone.parameters()) {
        p->grad /= world;
        dist::all_reduce(p->grad, dist::ReduceOp::SUM);
      }
    });
    const double gap_after = gap_to_rank0(alone);
    dist::out() << "without the broadcast: w - rank 0's w = " << gap_before << " at the start, "
                << gap_after << " after 4 epochs";

    // The same with DistributedDataParallel: rank 0's start everywhere, and no gap ever.
    dist::Linear wrapped(1, 1, own, dist::get_device());
    dist::DistributedDataParallel ddp(wrapped.parameters());
    train(wrapped, [&] { ddp.average_gradients(); });
    const double ddp_gap = gap_to_rank0(wrapped);
    dist::out() << "with DistributedDataParallel: w - rank 0's w = " << ddp_gap;

    // The closed forms: the gap is 0.25 * rank, before and after (to float rounding), and 0
    // exactly with the broadcast.
    const bool ok = std::abs(gap_before - 0.25 * rank) < 1e-6 &&
                    std::abs(gap_after - gap_before) < 1e-4 && ddp_gap == 0.0;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: some rank's gap is not what the closed form says (see above)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: averaged gradients keep every gap as it started; only the broadcast makes "
                 << "the replicas equal";
    return dist::kExitOk;
  });
}
