// Chapter 08, exercise 1 — DDP without its broadcast.
//
// Leave out DDP's first promise: every rank keeps its own initial weights (rank r starts at
// w = -0.5 + 0.25 r), and only the gradients are averaged, by hand: each rank divides its
// gradients by world_size and all-reduces them with SUM. Every rank then applies the same
// averaged step, so the gap between rank r's weight and rank 0's never changes: the replicas
// never meet, however long they train. With dist::DistributedDataParallel, which broadcasts rank
// 0's weights first, the gap is exactly 0.
// Grade it: ./tutorial check 08-ex1        Run it: ./tutorial run 08-ex1 --solution
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>

#include <vector>

#include "noiseless_line.h"

namespace {

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
    ch08::train_on_line(alone, 0.01, 4, [&] {
      // The mean of every rank's gradient, on every rank: what DDP does after backward.
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
    {  // DDP goes before the default group it all-reduces on
      dist::DistributedDataParallel ddp(wrapped.parameters());
      ch08::train_on_line(wrapped, 0.01, 4, [&] { ddp.average_gradients(); });
    }
    dist::out() << "with DistributedDataParallel: w - rank 0's w = " << gap_to_rank0(wrapped);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
