// Chapter 15 — tensor parallelism: one layer split across ranks, and a 2-D mesh of DP x TP.
//
// DDP and ZeRO split the batch: every rank still computes the whole model. Tensor parallelism
// (Megatron-LM) splits the layers: in an MLP block the first Linear is cut by output feature
// (column parallel), the second by input feature (row parallel), so each rank of a "tp" group holds
// 1/T of the weights and computes 1/T of every sample, and the block needs one all_reduce forward
// and one backward. Sequence parallelism splits the rows outside the block too, trading the
// all_reduces for all_gathers and reduce_scatters and saving activation memory. A 2-D mesh then
// runs data parallel across "tp" groups. Steps 1-3 are checked against one process running the
// same unsplit model; Step 4's training against the same DP x TP written out by hand, bit for bit.
//
// You will learn: new_group(ranks) and a DeviceMesh's row-major groups; the column/row split and
// the conjugate operators f and g; why TP agrees with one process only to rounding; the traffic
// and the memory of sequence parallelism; DP x TP training.
// Builds on: chapter 04 (collectives), 08 (DDP's averaged gradients), 12 (bytes by closed form).
//
// Run:   ./tutorial run 15       (or: ddprun --standalone --nproc-per-node 4 ch15_tensor_parallel)
// Prints, among other lines:
//   [rank 0/4] mesh [[0, 1], [2, 3]] (dp, tp): a row is a "tp" group, a column a "dp" group
//   [rank 0/4] OK: the groups, the block's output, calls and bytes, and the loss curve agree
#include <dist/device_mesh.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/tensor_parallel.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "support.h"

namespace {

using namespace ch15;

// The mean of `params`' gradients over the data-parallel group, as DDP makes it (chapter 08).
void average_gradients(const std::vector<dist::Parameter*>& params, dist::ProcessGroup& dp) {
  for (dist::Parameter* p : params) {
    dp.all_reduce(p->grad, dist::ReduceOp::SUM);
    p->grad /= dp.size();
  }
}

// The block's input on this rank: its data-parallel rows, and under sequence parallelism only
// this tp rank's share of them.
dist::Tensor block_input(const dist::Tensor& x, bool sequence_parallel, dist::ProcessGroup& tp) {
  return sequence_parallel ? dist::scatter_to_sequence_parallel_region(x, kIn, tp) : x;
}

// d loss / d out for this rank's output: mse_loss over the data-parallel rank's rows. Under
// sequence parallelism each tp rank holds n/T rows of the output: they are gathered for the loss
// (outside the block) and each rank keeps its rows of the gradient.
dist::MseLoss block_loss(const dist::Tensor& out, const dist::Tensor& y, bool sequence_parallel,
                         dist::ProcessGroup& tp) {
  if (!sequence_parallel) return dist::mse_loss(out, y);
  dist::Tensor whole(y.numel(), dist::kFloat32, y.device());
  tp.all_gather_into_tensor(whole, out);
  dist::MseLoss loss = dist::mse_loss(whole, y);
  loss.grad = dist::scatter_to_sequence_parallel_region(loss.grad, kOut, tp);
  return loss;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    Flags f = *parsed;
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    resolve_sizes(f, world);  // bad sizes: an error on every rank, before any waits

    // ---- Step 1: groups: the ranks as a dp x tp grid, and a group along each dimension
    // A collective over every rank; a dp x tp that is not the world size is refused before any
    // rank connects (the mesh's ConfigError).
    std::optional<dist::DeviceMesh> mesh = dist::init_device_mesh({{"dp", f.dp}, {"tp", f.tp}});
    dist::ProcessGroup& tp = mesh->group("tp");
    dist::ProcessGroup& dp = mesh->group("dp");
    const int d = mesh->coordinate("dp"), t = mesh->coordinate("tp");
    dist::out0() << "mesh " << mesh->str() << ": a row is a \"tp\" group, a column a \"dp\" group";
    dist::out() << "coordinate (dp " << d << ", tp " << t << "): tp group " << members(tp.ranks())
                << ", dp group " << members(dp.ranks());
    // Row-major, as torch's: the tp group is this rank's row, the dp group its column.
    std::vector<int> row, column;
    for (int j = 0; j < f.tp; ++j) row.push_back(d * f.tp + j);
    for (int i = 0; i < f.dp; ++i) column.push_back(i * f.tp + t);
    bool groups_ok = tp.ranks() == row && dp.ranks() == column && tp.rank() == t && dp.rank() == d;
    // The mesh made them with new_group(ranks): every rank calls it, in the same order, members
    // or not. Here one more, over the even ranks; an odd rank gets a group it is not in.
    std::vector<int> evens;
    for (int r = 0; r < world; r += 2) evens.push_back(r);
    std::unique_ptr<dist::ProcessGroup> even = dist::new_group(evens);
    if (even->is_member()) {
      dist::Tensor sum = dist::full(1, static_cast<double>(rank), dist::kInt64, dist::get_device());
      even->all_reduce(sum, dist::ReduceOp::SUM);  // group ranks 0, 1, ...; global ranks summed
      const std::int64_t k = static_cast<std::int64_t>(evens.size());
      dist::out0() << "new_group(" << members(evens) << "): all_reduce of the global ranks "
                   << sum.item(0) << " (closed form k(k - 1) = " << k * (k - 1) << ")";
      groups_ok =
          groups_ok && sum.item(0) == static_cast<double>(k * (k - 1)) && even->rank() == rank / 2;
    }

    // ---- Step 2: one MLP block split across the tp group: column -> ReLU -> row
    const std::int64_t n = f.batch_size / f.dp;  // this data-parallel rank's rows
    const Batch data = batch(d * n, n);
    dist::Linear fc1 = make_fc1(f.hidden), fc2 = make_fc2(f.hidden);  // one process's model
    dist::ReLU relu;
    const dist::Tensor hidden = relu.forward(fc1.forward(data.x));
    const dist::Tensor one_out = fc2.forward(hidden);
    dist::ParallelMLP mlp(fc1, fc2, tp);  // this rank's slices of fc1 and fc2
    dist::Tensor out;
    const std::int64_t held_before = dist::memory_allocated(dist::get_device());
    const dist::Tensor input = block_input(data.x, false, tp);
    const Traffic forward = measure(tp, [&] { out = mlp.forward(input); });  // g: all_reduce
    const std::int64_t held_tp = dist::memory_allocated(dist::get_device()) - held_before;
    const dist::Tensor grad = dist::mse_loss(out, data.y).grad;
    const Traffic backward = measure(tp, [&] { mlp.backward(grad); });  // f: all_reduce
    const Agreement agree = compare_output(out, one_out, hidden, fc2, f.tp);
    dist::out0() << "block " << kIn << "-" << f.hidden << "-" << kOut << " on " << f.tp
                 << " ranks (" << f.hidden / f.tp << " hidden features each), " << n
                 << " rows: output within (T + 1)u·S of one process's: "
                 << (agree.within ? "yes" : "NO") << " (largest difference "
                 << sci(agree.largest_difference) << ", bound " << sci(agree.largest_bound) << ")";
    // Gloo's mesh sends a small tensor whole to each of the T - 1 others: 4 n (T - 1) bytes.
    const std::int64_t e = 4, want_fwd = e * n * kOut * (f.tp - 1),
                       want_bwd = e * n * kIn * (f.tp - 1);
    dist::out0() << "forward: " << calls_text(forward) << ", " << grouped(forward.bytes)
                 << " bytes (closed form 4·rows·out·(T-1) = " << grouped(want_fwd) << ")";
    dist::out0() << "backward: " << calls_text(backward) << ", " << grouped(backward.bytes)
                 << " bytes (closed form 4·rows·in·(T-1) = " << grouped(want_bwd) << ")";
    const std::vector<std::string> one_reduce{"all_reduce"};
    bool traffic_ok =
        forward.bytes == want_fwd && backward.bytes == want_bwd &&
        (!forward.counted || (forward.calls == one_reduce && backward.calls == one_reduce));

    // ---- Step 3: sequence parallel: the rows split outside the block
    bool memory_ok = true;
    if (f.sequence_parallel) {
      dist::ParallelMLP sp(fc1, fc2, tp, {.sequence_parallel = true});
      dist::Tensor sp_out;
      const std::int64_t before = dist::memory_allocated(dist::get_device());
      const dist::Tensor sp_input = block_input(data.x, true, tp);  // this rank's rows / T
      const Traffic gather = measure(tp, [&] {
        sp_out = sp.forward(sp_input);  // all_gather, then reduce_scatter
      });
      const std::int64_t held_sp = dist::memory_allocated(dist::get_device()) - before;
      const dist::Tensor sp_grad = dist::scatter_to_sequence_parallel_region(grad, kOut, tp);
      const Traffic scatter = measure(tp, [&] { sp.backward(sp_grad); });  // the reverse pair
      const std::int64_t part = n / f.tp, want = e * part * (kIn + kOut) * (f.tp - 1);
      dist::out0() << "sequence parallel, forward: " << calls_text(gather) << ", "
                   << grouped(gather.bytes) << " bytes; backward: " << calls_text(scatter) << ", "
                   << grouped(scatter.bytes)
                   << " bytes (closed form 4·(rows/T)·(in + out)·(T-1) = " << grouped(want)
                   << " each)";
      const std::int64_t saved = held_tp - held_sp, want_saved = e * (n - part) * (kIn + kOut);
      dist::out0() << "activation memory the forward holds: " << grouped(held_tp)
                   << " bytes, sequence parallel " << grouped(held_sp) << ": saves "
                   << grouped(saved)
                   << " (closed form 4·(rows - rows/T)·(in + out) = " << grouped(want_saved) << ")";
      const std::vector<std::string> pair{"all_gather_into_tensor", "reduce_scatter_tensor"};
      traffic_ok = traffic_ok && gather.bytes == want && scatter.bytes == want &&
                   (!gather.counted || (gather.calls == pair && scatter.calls == pair));
      // What each holds (tensor_parallel.h): the input, the column layer's whole input, ReLU's
      // input and output (rows x hidden/T each), the output.
      const std::int64_t h = f.hidden / f.tp;
      memory_ok = saved == want_saved &&
                  held_tp == e * (n * kIn + n * kIn + 2 * n * h + n * kOut) &&
                  held_sp == e * (part * kIn + n * kIn + 2 * n * h + part * kOut);
    }

    // ---- Step 4: 2-D: DP x TP training beside one process, and beside the same DP x TP by hand
    dist::out0() << "training " << f.dp << " x " << f.tp << " (dp x tp)"
                 << (f.sequence_parallel ? ", sequence parallel" : "") << ": SGD (lr " << f.lr
                 << "), " << f.steps << " steps of " << f.batch_size << " rows";
    dist::Linear one1 = make_fc1(f.hidden), one2 = make_fc2(f.hidden);
    dist::ParallelMLP model(one1, one2, tp, {.sequence_parallel = f.sequence_parallel});
    dist::SGD sgd(model.parameters(), f.lr);
    dist::SGD one_sgd(
        {one1.parameters()[0], one1.parameters()[1], one2.parameters()[0], one2.parameters()[1]},
        f.lr);
    // The same DP x TP by hand, every sum the same collective on the same inputs (support.h).
    SameOrderDpTp reference(f.hidden, tp, dp, f.sequence_parallel, f.lr);
    double worst = 0;
    bool bitwise = true, same = true;
    auto timed = std::chrono::steady_clock::duration::zero();  // the DP x TP steps alone
    for (int step = 0; step < f.steps; ++step) {
      const std::int64_t first = static_cast<std::int64_t>(step) * f.batch_size;
      // One process, on every rank: the whole batch, the whole model.
      one_sgd.zero_grad();
      const Batch all = batch(first, f.batch_size);
      const dist::MseLoss one =
          dist::mse_loss(one2.forward(relu.forward(one1.forward(all.x))), all.y);
      one1.backward(relu.backward(one2.backward(one.grad)));
      one_sgd.step();
      // DP x TP: this data-parallel rank's rows, the block on the tp group.
      const Batch mine = batch(first + d * n, n);
      const dist::Tensor y = mine.y;
      if (f.throughput) dist::default_group().barrier();  // the ranks' clocks start together
      const auto start = std::chrono::steady_clock::now();
      sgd.zero_grad();
      const dist::MseLoss loss = block_loss(
          model.forward(block_input(mine.x, f.sequence_parallel, tp)), y, f.sequence_parallel, tp);
      const dist::Tensor grad_x = model.backward(loss.grad);  // f's sum: d loss / d x
      average_gradients(model.parameters(), dp);              // the mean over the dp group's rows
      sgd.step();
      if (step > 0 || f.steps == 1)
        timed += std::chrono::steady_clock::now() - start;  // 0: warm-up
      same = same_bits(reference.step(mine), loss.loss) &&
             reference.same_bits(model.parameters(), grad_x) && same;
      dist::Tensor mean = dist::full(1, loss.loss / f.dp, dist::kFloat64, dist::get_device());
      dp.all_reduce(mean, dist::ReduceOp::SUM);  // the whole batch's loss
      const double l = mean.item(0);
      worst = std::max(worst, std::fabs(l - one.loss) / one.loss);
      bitwise = bitwise && same_bits(l, one.loss);  // NaN too, once lr 1 diverges
      dist::out0() << "step " << step + 1 << ": loss " << fixed6(l) << ", one process "
                   << fixed6(one.loss);
    }
    if (f.throughput)
      dist::report_throughput(timed, std::int64_t{std::max(f.steps - 1, 1)} * f.batch_size);
    // One process sums in another order (T partial sums, the dp mean), which a long run at a
    // large lr magnifies: information only, except on one rank, where the sums are the same.
    const bool exact = f.dp * f.tp == 1;
    const bool curve_ok = same && (!exact || bitwise);
    dist::out0() << "largest difference from one process: " << sci(worst) << " of the loss ("
                 << (exact ? "one rank: bit for bit"
                           : "information: the same sums in another order")
                 << ")";
    dist::out0() << "the same DP x TP by hand (the same collectives, the whole model on every "
                    "rank): loss, parameters and d loss / d x bit for bit at every step: "
                 << (same ? "yes" : "NO") << " (rank 0's)";

    const bool job_ok =
        dist::all_ranks_ok(groups_ok && agree.within && traffic_ok && memory_ok && curve_ok);
    even.reset();
    mesh.reset();  // its groups, before the default group
    dist::destroy_process_group();
    if (!job_ok) {
      const auto yes = [](bool b) { return b ? "yes" : "NO"; };
      dist::out0() << "MISMATCH: as one process, the closed forms and by hand: groups "
                   << yes(groups_ok) << ", output " << yes(agree.within) << ", calls and bytes "
                   << yes(traffic_ok) << ", memory " << yes(memory_ok) << ", training as by hand "
                   << yes(curve_ok) << " (rank 0's; a rank may differ)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: the groups, the block's output, calls and bytes, and the loss curve agree";
    return dist::kExitOk;
  });
}
