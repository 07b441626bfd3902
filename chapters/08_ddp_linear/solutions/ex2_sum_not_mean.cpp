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

#include <cmath>

#include "noiseless_line.h"

namespace {

constexpr double kLr = 0.01;

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
    ch08::train_on_line(summed, kLr, 2, [&] {
      for (dist::Parameter* p : summed.parameters()) dist::all_reduce(p->grad, dist::ReduceOp::SUM);
    });
    // What it equals: the mean (DDP), at world_size times the learning rate.
    dist::Linear scaled(1, 1, start, dist::get_device());
    {  // DDP's own group goes before the default group does
      dist::DistributedDataParallel ddp(scaled.parameters());
      ch08::train_on_line(scaled, kLr * world, 2, [&] { ddp.average_gradients(); });
    }

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
