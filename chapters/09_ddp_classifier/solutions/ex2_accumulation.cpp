// Chapter 09, exercise 2 — gradient accumulation with no_sync() is a bigger batch.
//
// With K micro-batches of B samples per step, each backward under ddp.no_sync() (no
// communication) and the loss scaled by 1/K, the one synchronised backward at the end averages
// the summed gradients: the step is the step of one batch of K * B samples on every rank. Train
// a Linear model both ways on the same data and compare the weights (to float32 rounding), and
// count the all_reduces that the accumulation saved.
//
// Run: ./tutorial run 09-ex2   (or: ddprun --standalone --nproc-per-node 2 ch09_ddp_classifier_ex2)
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/trace.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

constexpr int kMicro = 4, kBatch = 8, kSteps = 10;

// Rank r's sample i of step s: 3 inputs, 2 targets, from a formula (no randomness needed).
std::pair<dist::Tensor, dist::Tensor> samples(int rank, int step, int first, int count) {
  std::vector<float> x, y;
  for (int i = first; i < first + count; ++i) {
    const float t = static_cast<float>((rank * 131 + step * 17 + i * 7) % 29) / 7.0f - 2;
    x.insert(x.end(), {t, t * t / 4, 1 - t / 3});
    y.insert(y.end(), {2 * t - 1, 0.5f - t});
  }
  return {dist::Tensor::from(x), dist::Tensor::from(y)};
}

dist::Linear make_model() {
  return dist::Linear(3, 2, {{0.1f, -0.2f, 0.3f, 0.0f, 0.25f, -0.1f}, {0.0f, 0.5f}});
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch09_ddp_classifier_ex2",
                  "Accumulate gradients over micro-batches with no_sync(): one bigger batch, "
                  "fewer all_reduces.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    dist::Linear accumulated = make_model(), big = make_model();
    // The timeline records one span per bucket all_reduce: the count of all_reduces made.
    dist::Timeline all_reduces(rank);
    dist::DistributedDataParallel ddp_a(accumulated.parameters(),
                                        {.overlap = false, .timeline = &all_reduces});
    dist::DistributedDataParallel ddp_b(big.parameters(), {.overlap = false});
    dist::SGD opt_a(accumulated.parameters(), 0.05), opt_b(big.parameters(), 0.05);
    for (int step = 0; step < kSteps; ++step) {
      for (int m = 0; m < kMicro; ++m) {  // K micro-batches, only the last one synchronised
        std::optional<dist::DistributedDataParallel::NoSync> local;
        if (m + 1 < kMicro) local.emplace(ddp_a);
        auto [x, y] = samples(rank, step, m * kBatch, kBatch);
        dist::MseLoss loss = dist::mse_loss(accumulated.forward(x), y);
        loss.grad *= 1.0 / kMicro;
        accumulated.backward(loss.grad);
        ddp_a.average_gradients();  // inside no_sync(): nothing is sent
      }
      opt_a.step();
      opt_a.zero_grad();
      auto [x, y] = samples(rank, step, 0, kMicro * kBatch);  // the same samples, one batch
      big.backward(dist::mse_loss(big.forward(x), y).grad);
      ddp_b.average_gradients();
      opt_b.step();
      opt_b.zero_grad();
    }
    const auto syncs = static_cast<int>(all_reduces.size());
    bool ok = syncs == kSteps && ddp_a.buckets().size() == 1;
    for (std::int64_t k = 0; k < 6; ++k) {
      const double a = accumulated.weight().data.item(k), b = big.weight().data.item(k);
      ok = ok && std::abs(a - b) <= 1e-5 * std::max(1.0, std::abs(b));
    }
    dist::out0() << "after " << kSteps << " steps: w[0] = " << accumulated.weight().data.item(0)
                 << " accumulated over " << kMicro << " micro-batches, "
                 << big.weight().data.item(0) << " with one batch of " << kMicro * kBatch
                 << "; all_reduces: " << syncs << " instead of " << kSteps * kMicro;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: accumulation differs from the bigger batch";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: no_sync() accumulation takes the bigger batch's steps with " << kMicro
                 << " times fewer all_reduces";
    return dist::kExitOk;
  });
}
