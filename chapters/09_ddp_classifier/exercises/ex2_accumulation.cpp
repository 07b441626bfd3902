// Chapter 09, exercise 2 — gradient accumulation with no_sync() is a bigger batch.
//
// A step of K micro-batches of B samples should be the step of one batch of K * B samples on
// every rank, with one all_reduce instead of K. The program trains a Linear model both ways on
// the same data: make the accumulated one take the bigger batch's steps, with K times fewer
// all_reduces, using ddp.no_sync() (torch: with ddp.no_sync():).
// Grade it: ./tutorial check 09-ex2        Run it: ./tutorial run 09-ex2
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/trace.h>

#include <optional>
#include <utility>
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
      for (int m = 0; m < kMicro; ++m) {  // K micro-batches of the step's samples
        // TODO(exercise): make the K micro-batches one step of the mean over all K * B samples,
        // with one all_reduce. While a dist::DistributedDataParallel::NoSync (its constructor
        // takes ddp_a; std::optional can hold one) is alive, ddp_a sends nothing. Here the
        // all_reduce is made by average_gradients(), after backward, so the NoSync must still be
        // alive when average_gradients() runs: a scope around backward alone, as torch's
        // `with ddp.no_sync(): loss.backward()`, has ended by then. The loss's gradient
        // (loss.grad) can be scaled.
        auto [x, y] = samples(rank, step, m * kBatch, kBatch);
        dist::MseLoss loss = dist::mse_loss(accumulated.forward(x), y);
        accumulated.backward(loss.grad);
        ddp_a.average_gradients();
      }
      opt_a.step();
      opt_a.zero_grad();
      auto [x, y] = samples(rank, step, 0, kMicro * kBatch);  // the same samples, one batch
      big.backward(dist::mse_loss(big.forward(x), y).grad);
      ddp_b.average_gradients();
      opt_b.step();
      opt_b.zero_grad();
    }
    const dist::Tensor& wa = accumulated.weight().data;
    const dist::Tensor& wb = big.weight().data;
    dist::out() << "after " << kSteps << " steps, accumulated over " << kMicro
                << " micro-batches: w[0] = " << wa.item(0) << ", w[5] = " << wa.item(5)
                << ", b[1] = " << accumulated.bias().data.item(1);
    dist::out() << "after " << kSteps << " steps, one batch of " << kMicro * kBatch
                << ": w[0] = " << wb.item(0) << ", w[5] = " << wb.item(5)
                << ", b[1] = " << big.bias().data.item(1);
    dist::out() << "all_reduces with accumulation: " << all_reduces.size() << " in " << kSteps
                << " steps";
    dist::out() << "NoSync guards made: " << ddp_a.no_sync_guards() << " in " << kSteps << " steps";
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
