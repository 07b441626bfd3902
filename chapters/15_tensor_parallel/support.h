// Chapter 15's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags, the data and the one-process model, counting a block's
// calls and bytes, and printing.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ch15 {

constexpr std::int64_t kIn = 8, kOut = 4;  // the block: kIn -> hidden -> kOut

// Every flag, with its default. --help lists them.
struct Flags {
  int dp = 0;  // 0: world size / tp
  int tp = 0;  // 0: 2 on an even world size, else 1
  int hidden = 16, batch_size = 16, steps = 6;
  double lr = 0.1;
  bool sequence_parallel = false;
  bool throughput = false;  // also time step 4's DP x TP steps (bench/run.py)
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help.
std::optional<Flags> parse_flags(int argc, char** argv);
// Fills in --tp and --dp left at 0 for `world` ranks; a ConfigError for a --tp that does not
// divide --hidden, or a batch the sizes do not split, before any rank waits on another.
void resolve_sizes(Flags& f, int world);

// Samples [first, first + size) of a closed-form regression, the same bits in the twin:
// x_ij = ((7919 i + 104729 j) mod 2001) / 1000 - 1 and y_ik = sum_j t_kj x_ij / 4 with the
// integer teacher t_kj = ((3k + 5j) mod 7) - 3; on the run's device (dist::get_device()).
struct Batch {
  dist::Tensor x;  // size * kIn float32 values
  dist::Tensor y;  // size * kOut
};
Batch batch(std::int64_t first, std::int64_t size);

// The one-process model's two layers, from closed-form initial values (the twin's too), on the
// run's device.
dist::Linear make_fc1(std::int64_t hidden);
dist::Linear make_fc2(std::int64_t hidden);

// What `body` made `group` do: the collectives it called (the flight recorder's names, which
// ddprun's DIST_TRACE_DIR turns on; `counted` false without it) and the bytes it sent.
struct Traffic {
  std::vector<std::string> calls;
  std::int64_t bytes = 0;
  bool counted = false;
};
Traffic measure(dist::ProcessGroup& group, const std::function<void()>& body);

// The row layer's output against one process's, value by value, within the header's bound
// (dist/tensor_parallel.h, "Rounding"): |tp - one| <= (T + 1) u S + 2^-50 S, S = |b| + sum |a w|.
struct Agreement {
  double largest_difference = 0, largest_bound = 0;
  bool within = true;  // every value within its bound (T = 1: equal bit for bit)
};
Agreement compare_output(const dist::Tensor& tp_out, const dist::Tensor& one_out,
                         const dist::Tensor& hidden_activations, const dist::Linear& fc2, int tp);

// Step 4's pass/fail: the same DP x TP written out by hand, whose every cross-rank sum is the
// library's own collective on the same group with the same inputs, so its bits must be the
// library's (as chapter 12's SameOrderDdp). Every rank keeps the whole model (one fc1, one fc2,
// the same on every rank); each step cuts the slices dist/tensor_parallel.h names (fc1's rows and
// fc2's columns [t·h/T, (t+1)·h/T), fc2's bias on tp rank 0 only), runs them as dist::Linears,
// all_reduces the partial output and d loss / d x over "tp" (sequence parallel: the
// all_gather_into_tensor / reduce_scatter_tensor pair, on the same sizes), averages the slices'
// gradients over "dp" (all_reduce SUM, / its size), all_gathers them over "tp" into the whole
// model's and steps that with SGD (p -= lr·g, value by value: the slices' very operations).
class SameOrderDpTp {
 public:
  SameOrderDpTp(std::int64_t hidden, dist::ProcessGroup& tp, dist::ProcessGroup& dp,
                bool sequence_parallel, double lr);
  // One step on this data-parallel rank's rows (whole: the reference splits them itself under
  // sequence parallelism); returns this rank's loss, before the mean over "dp".
  double step(const Batch& mine);
  // Whether a ParallelMLP's parameters() hold this rank's slices of the whole model, and its
  // backward's d loss / d x (f's sum: whole rows, or this rank's under sequence parallelism) is
  // the last step's, bit for bit.
  bool same_bits(const std::vector<dist::Parameter*>& slices, const dist::Tensor& grad_x) const;

 private:
  dist::Linear fc1_, fc2_;
  dist::ProcessGroup* tp_;
  dist::ProcessGroup* dp_;
  bool sequence_parallel_;
  dist::SGD sgd_;
  dist::Tensor grad_x_;  // the last step's d loss / d x, summed over "tp"
};
// memcmp of the bits (NaN and inf equal to themselves).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);
bool same_bits(double a, double b);

// Printing.
std::string members(const std::vector<int>& ranks);  // "[0, 2]"
std::string calls_text(const Traffic& t);  // "1 all_reduce", "1 all_gather_into_tensor + ..."
using dist::grouped;                       // 1,234,567 (dist/log.h)
std::string sci(double value);             // 3.1e-08
std::string fixed6(double value);

}  // namespace ch15
