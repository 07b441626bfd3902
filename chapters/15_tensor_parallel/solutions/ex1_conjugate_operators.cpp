// Chapter 15, exercise 1 — the conjugate operators f and g, by hand.
//
// The block Linear(8, 16) -> ReLU -> Linear(16, 4) is split across the W ranks of a tp group:
// each rank keeps 16/W rows of the first layer (column parallel) and the same 16/W columns of
// the second (row parallel, its bias on rank 0 only), as plain dist::Linear layers. Around them
// sit f (identity forward, all_reduce backward) and g (all_reduce forward, identity backward).
// Write f's backward and g's forward. Every rank must train as one process trains the unsplit
// block: the same losses, the same d loss / d x, the same weights, with one all_reduce forward
// and one backward.
// Grade it: ./tutorial check 15-ex1        Run it: ./tutorial run 15-ex1 --solution
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <cstdint>
#include <vector>

#include "tp_exercise.h"

namespace {

using namespace ex15;

// f: the block's input is already whole on every rank; each rank's column layer computes only its
// part of d loss / d x, so backward sums the parts.
struct CopyToTensorParallelRegion {
  dist::ProcessGroup& group;
  dist::Tensor forward(const dist::Tensor& x) const { return x; }
  dist::Tensor backward(dist::Tensor grad) const {
    group.all_reduce(grad, dist::ReduceOp::SUM);
    return grad;
  }
};

// g: each rank's row layer gives a partial sum of every output; forward completes it.
struct ReduceFromTensorParallelRegion {
  dist::ProcessGroup& group;
  dist::Tensor forward(dist::Tensor partial) const {
    group.all_reduce(partial, dist::ReduceOp::SUM);
    return partial;
  }
  dist::Tensor backward(const dist::Tensor& grad) const { return grad; }
};

// Rows [first, first + count) of a rows x cols matrix, and columns [first, first + count).
std::vector<float> rows_of(const std::vector<float>& m, std::int64_t cols, std::int64_t first,
                           std::int64_t count) {
  return {m.begin() + first * cols, m.begin() + (first + count) * cols};
}
std::vector<float> columns_of(const std::vector<float>& m, std::int64_t cols, std::int64_t first,
                              std::int64_t count) {
  std::vector<float> out;
  for (std::size_t r = 0; r < m.size() / static_cast<std::size_t>(cols); ++r) {
    for (std::int64_t c = first; c < first + count; ++c) {
      out.push_back(m[r * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c)]);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int steps = 3;
    double lr = 0.1;
    dist::Cli cli("ch15_tensor_parallel_ex1", "Exercise: f and g by hand (chapter 15).");
    cli.add_int("--steps", &steps, "training steps", 1, 100);
    cli.add_double("--lr", &lr, "SGD's learning rate", 1e-6, 1);
    if (!cli.parse(argc, argv)) return 0;
    dist::init_process_group(cli.init_options());
    dist::ProcessGroup& group = dist::default_group();  // the tp group: every rank
    const int rank = group.rank(), t = group.size();
    if (kHidden % t != 0) throw dist::ConfigError("run 1, 2, 4, 8 or 16 ranks: they split 16");
    const std::int64_t h = kHidden / t, first = rank * h;

    // This rank's slices of the one-process model.
    const dist::LinearInit full1 = fc1_init(), full2 = fc2_init();
    dist::Linear column(kIn, h,
                        {rows_of(full1.weight, kIn, first, h), rows_of(full1.bias, 1, first, h)});
    std::vector<float> bias2 = full2.bias;  // added once: on rank 0's partial sums
    if (rank != 0) bias2.assign(bias2.size(), 0.0f);
    dist::Linear row(h, kOut, {columns_of(full2.weight, kHidden, first, h), bias2});
    dist::ReLU relu;
    const CopyToTensorParallelRegion f{group};
    const ReduceFromTensorParallelRegion g{group};
    std::vector<dist::Parameter*> params = column.parameters();
    params.push_back(row.parameters()[0]);
    if (rank == 0) params.push_back(row.parameters()[1]);
    dist::SGD sgd(params, lr);

    for (int step = 0; step < steps; ++step) {
      dist::Tensor x, y;
      batch(static_cast<std::int64_t>(step) * kRows, kRows, x, y);
      sgd.zero_grad();
      const std::int64_t before = collectives_so_far();
      const dist::Tensor out = g.forward(row.forward(relu.forward(column.forward(f.forward(x)))));
      const std::int64_t middle = collectives_so_far();
      const dist::MseLoss loss = dist::mse_loss(out, y);
      const dist::Tensor grad_x =
          f.backward(column.backward(relu.backward(row.backward(g.backward(loss.grad)))));
      const std::int64_t after = collectives_so_far();
      sgd.step();
      dist::out() << "step " << step + 1 << ": loss " << values({static_cast<float>(loss.loss)})
                  << "; all_reduce calls: forward " << middle - before << ", backward "
                  << after - middle;
      if (step == 0) dist::out() << "d loss / d x: " << values(grad_x.to_vector<float>());
    }
    dist::out() << "fc1.weight rows " << first << ".." << first + h - 1 << ": "
                << values(column.weight().data.to_vector<float>());
    dist::out() << "fc1.bias rows " << first << ".." << first + h - 1 << ": "
                << values(column.bias().data.to_vector<float>());
    dist::out() << "fc2.weight columns " << first << ".." << first + h - 1 << ": "
                << values(row.weight().data.to_vector<float>());
    if (rank == 0) dist::out() << "fc2.bias: " << values(row.bias().data.to_vector<float>());
    dist::destroy_process_group();
    return 0;
  });
}
