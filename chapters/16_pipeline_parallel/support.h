// Chapter 16's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags, the data, the unsplit model in one process (the reference
// the pipeline is checked against), the replicas' averaging (--dp), and printing.
#pragma once

#include <dist/device_mesh.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/pipeline.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch16 {

constexpr std::int64_t kFeatures = 16, kOutputs = 4;

// Every flag, with its default. --help lists them.
struct Flags {
  int layers = 8, hidden = 32, batch_size = 32, microbatches = 8, steps = 4;
  int dp = 1;  // data-parallel replicas of the pipeline (the mesh's "dp" size)
  double lr = 0.05;
  std::string schedule = "both";  // gpipe, 1f1b or both
  std::string trace_dir;          // empty: no trace
  std::string mistake;            // empty, or "mismatched-widths"
  bool throughput = false;        // also time each schedule's steps (bench/run.py)
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help. Throws dist::ConfigError for a --schedule or a
// --mistake it does not know, and for a --batch-size that --microbatches (x --dp) does not divide.
std::optional<Flags> parse_flags(int argc, char** argv);

// Linear(16, hidden), ReLU, ..., Linear(hidden, 4): `layers` Linear layers, seed 16.
dist::SequentialSpec model_spec(const Flags& f);

// A step's batch, closed-form so that the twin builds the same bits: sample i has features
// x_ij = ((7919 i + 104729 j) mod 2001) / 1000 - 1 and targets y_ik = sum_j x_ij t_kj / 16 with
// t_kj = ((3k + 5j) mod 7) - 3 (a linear teacher). Step s uses samples s*batch .. (s+1)*batch - 1.
dist::Tensor inputs(std::int64_t first_sample, std::int64_t rows);
dist::Tensor targets(std::int64_t first_sample, std::int64_t rows);

// One process training `spec` as one replica of the pipeline does: each step its replica's
// B/N rows of the batch (rows [replica B/N, (replica + 1) B/N)) cut into m micro-batches run one
// after the other (forward, loss, backward: the grads add up), the sum divided by m; with `dp`,
// every parameter's gradient summed over it by all_reduce and divided by N, as the stages do;
// one SGD step. Its parameters after `steps` steps, and every step's mean micro-batch loss (with
// `dp`, averaged over it by mean_over). On this rank's device. At --dp 1 it is one process on
// the whole batch; with f.dp = 1 and f.microbatches = N m, one process on the replicas' N m
// micro-batches, replica by replica.
struct Trained {
  std::vector<std::vector<float>> params;
  std::vector<double> losses;
};
Trained train_one_process(const dist::SequentialSpec& spec, const Flags& f, int replica = 0,
                          dist::ProcessGroup* dp = nullptr);

// The reference's parameters that a stage holds: those of the Linear layers in `range`.
std::vector<std::vector<float>> stage_part(const Trained& whole, const dist::SequentialSpec& spec,
                                           dist::LayerRange range);
std::vector<std::vector<float>> values(const std::vector<dist::Parameter*>& params);

// For information only, with --dp N: the pipelined weights (or losses) against one process on
// the whole batch (its N m micro-batches one after the other), the largest |a - b| relative to
// max(1, |b|), 0 where both diverged. Not a pass/fail check: that process adds the same N m
// micro-batch gradients in another order (m on each replica, / m, then the N means by
// all_reduce, / N; against all N m, / N m), so each step's float32 roundings differ by about
// (N m + N + m) u of the gradient (u = 2^-24), and the difference is carried into later steps:
// a stable lr damps it, a large one magnifies it (--dp 2 --lr 0.5 --steps 20 ends ~1e-4 apart).
double largest_difference(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b);
double largest_difference(const std::vector<double>& a, const std::vector<double>& b);
double max_over_ranks(double value);  // a collective over the default group

// DDP's mean over the replicas: all_reduce(SUM) over `dp`, then / dp.size().
void average_gradients(const std::vector<dist::Parameter*>& params, dist::ProcessGroup& dp);
// The mean of `value` over the group (itself for a group of one: no rounding).
double mean_over(dist::ProcessGroup& dp, double value);
// One line per replica, from its first stage: its ranks and its rows.
void print_replicas(dist::DeviceMesh& mesh, const Flags& f);

// Equal bit for bit (a NaN equals the same NaN: --lr 10 diverges alike in both runs).
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b);
bool same_bits(const std::vector<double>& a, const std::vector<double>& b);

// Printing.
std::string describe_layers(const dist::SequentialSpec& spec,
                            dist::LayerRange range);   // Linear(16, 32), ReLU
std::string widths(const dist::SequentialSpec& spec);  // 16-32-4
using dist::grouped;                                   // 1,234,567 (dist/log.h)
std::string loss6(double value);                       // 6 significant digits
std::string percent(double fraction);                  // 27.3%
std::string sci(double value);                         // 3.0e-08

}  // namespace ch16
