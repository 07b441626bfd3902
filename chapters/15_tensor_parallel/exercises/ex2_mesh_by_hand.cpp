// Chapter 15, exercise 2 — a DeviceMesh's groups by hand, with new_group.
//
// The W ranks form a dp x tp grid, row-major as torch's init_device_mesh: rank r sits at row
// r / tp, column r % tp. Each row is a "tp" group (the ranks that split a layer), each column a
// "dp" group (the ranks that average gradients). Make every group with dist::new_group, and keep
// the two this rank is in. Then the program trains chapter 15's block on them: the layers on the
// tp group, the gradients averaged over the dp group, and prints the loss, which must be one
// process's.
// Grade it: ./tutorial check 15-ex2        Run it: ./tutorial run 15-ex2
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/tensor_parallel.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "tp_exercise.h"

namespace {

using namespace ex15;

struct Groups {
  std::unique_ptr<dist::ProcessGroup> tp, dp;  // this rank's row and column
};

// Every rank calls new_group for every group, in the same order, members or not: it is a
// collective over the default group.
Groups make_groups(int dp, int tp, int rank) {
  Groups mine;
  // TODO(exercise): make every row (a tp group: ranks i*tp .. i*tp + tp - 1) and then every
  // column (a dp group: ranks j, j + tp, ...) with dist::new_group(ranks), on every rank in the
  // same order, and keep in mine.tp and mine.dp the two that hold `rank`. The placeholder makes
  // one group of every rank for each.
  std::vector<int> every;
  for (int r = 0; r < dp * tp; ++r) every.push_back(r);
  mine.tp = dist::new_group(every);
  mine.dp = dist::new_group(every);
  (void)rank;
  return mine;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int tp = 2, steps = 4;
    dist::Cli cli("ch15_tensor_parallel_ex2", "Exercise: the mesh's groups by hand (chapter 15).");
    cli.add_int("--tp", &tp, "the tp size; dp = world size / tp", 1, 16);
    cli.add_int("--steps", &steps, "training steps", 1, 100);
    if (!cli.parse(argc, argv)) return 0;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    if (world % tp != 0 || kHidden % tp != 0 || kRows % (world / tp) != 0) {
      throw dist::ConfigError("--tp must divide the world size and 16, and dp = world / tp 16");
    }
    const int dp = world / tp;

    Groups groups = make_groups(dp, tp, rank);
    if (!groups.tp || !groups.dp) throw dist::Error("make_groups kept no group for this rank");
    dist::out() << "tp group: " << members(groups.tp->ranks())
                << ", dp group: " << members(groups.dp->ranks());
    dist::barrier();  // every rank's line is out before a wrong group can fail the job

    // 2-D training on those groups: each dp rank its rows, the block on its tp group.
    dist::ProcessGroup& tpg = *groups.tp;
    dist::ProcessGroup& dpg = *groups.dp;
    const dist::Linear fc1(kIn, kHidden, fc1_init()), fc2(kHidden, kOut, fc2_init());
    dist::ParallelMLP mlp(fc1, fc2, tpg);
    dist::SGD sgd(mlp.parameters(), 0.1);
    const std::int64_t n = kRows / dp, d = dpg.rank();
    for (int step = 0; step < steps; ++step) {
      dist::Tensor x, y;
      batch(static_cast<std::int64_t>(step) * kRows + d * n, n, x, y);
      sgd.zero_grad();
      const dist::MseLoss loss = dist::mse_loss(mlp.forward(x), y);
      mlp.backward(loss.grad);
      for (dist::Parameter* p : mlp.parameters()) {  // the mean over the dp group, as DDP
        dpg.all_reduce(p->grad, dist::ReduceOp::SUM);
        p->grad /= dpg.size();
      }
      sgd.step();
      dist::Tensor mean = dist::full(1, loss.loss / dpg.size(), dist::kFloat64);
      dpg.all_reduce(mean, dist::ReduceOp::SUM);
      dist::out() << "step " << step + 1 << ": loss " << values({static_cast<float>(mean.item(0))});
    }
    groups = {};
    dist::destroy_process_group();
    return 0;
  });
}
