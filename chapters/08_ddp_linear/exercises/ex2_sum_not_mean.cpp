// Chapter 08, exercise 2 — sum the gradients instead of averaging them.
//
// A common slip when writing DDP by hand: all_reduce(SUM) of the gradients, and no division by
// world_size. The program trains the slip at lr, and DDP (the mean of the gradients) from the
// same start. Choose DDP's learning rate so that it takes the slip's steps, to float32 rounding:
// what the slip really does to training, and why it looks different at every world size.
// Grade it: ./tutorial check 08-ex2        Run it: ./tutorial run 08-ex2
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
    const dist::LinearInit start{{-0.5f}, {0.25f}};

    // The slip: the sum of the gradients, at the learning rate meant for their mean.
    dist::Linear summed(1, 1, start, dist::get_device());
    ch08::train_on_line(summed, kLr, 2, [&] {
      for (dist::Parameter* p : summed.parameters()) dist::all_reduce(p->grad, dist::ReduceOp::SUM);
    });

    // What it equals: the mean (DDP) at the learning rate that takes the same steps.
    // TODO(exercise): the learning rate at which DDP's mean takes the same steps as the sum at
    // kLr, on any number of ranks (dist::get_world_size()).
    const double ddp_lr = kLr;  // replace it
    dist::Linear scaled(1, 1, start, dist::get_device());
    {  // DDP goes before the default group it all-reduces on
      dist::DistributedDataParallel ddp(scaled.parameters());
      ch08::train_on_line(scaled, ddp_lr, 2, [&] { ddp.average_gradients(); });
    }

    dist::out() << "SUM at lr " << kLr << ": w = " << summed.weight().data.item(0)
                << ", b = " << summed.bias().data.item(0);
    dist::out() << "mean (DDP) at lr " << ddp_lr << ": w = " << scaled.weight().data.item(0)
                << ", b = " << scaled.bias().data.item(0);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
