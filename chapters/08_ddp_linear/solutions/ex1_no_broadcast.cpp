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

#include <cmath>
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
    {  // DDP's own group goes before the default group does
      dist::DistributedDataParallel ddp(wrapped.parameters());
      ch08::train_on_line(wrapped, 0.01, 4, [&] { ddp.average_gradients(); });
    }
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
