// Chapter 16's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags, the data, the unsplit model in one process (the reference
// the pipeline is checked against), and printing.
#pragma once

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
  double lr = 0.05;
  std::string schedule = "both";  // gpipe, 1f1b or both
  std::string trace_dir;          // empty: no trace
  std::string mistake;            // empty, or "mismatched-widths"
  bool throughput = false;        // also time each schedule's steps (bench/run.py)
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help. Throws dist::ConfigError for a --schedule or a
// --mistake it does not know.
std::optional<Flags> parse_flags(int argc, char** argv);

// Linear(16, hidden), ReLU, ..., Linear(hidden, 4): `layers` Linear layers, seed 16.
dist::SequentialSpec model_spec(const Flags& f);

// A step's batch, closed-form so that the twin builds the same bits: sample i has features
// x_ij = ((7919 i + 104729 j) mod 2001) / 1000 - 1 and targets y_ik = sum_j x_ij t_kj / 16 with
// t_kj = ((3k + 5j) mod 7) - 3 (a linear teacher). Step s uses samples s*batch .. (s+1)*batch - 1.
dist::Tensor inputs(std::int64_t first_sample, std::int64_t rows);
dist::Tensor targets(std::int64_t first_sample, std::int64_t rows);

// One process training `spec` as the pipeline does: each step's batch cut into m micro-batches run
// one after the other (forward, loss, backward: the grads add up), the sum divided by m, one SGD
// step. Its parameters after `steps` steps, and every step's mean micro-batch loss.
struct Trained {
  std::vector<std::vector<float>> params;
  std::vector<double> losses;
};
Trained train_one_process(const dist::SequentialSpec& spec, const Flags& f);

// The reference's parameters that a stage holds: those of the Linear layers in `range`.
std::vector<std::vector<float>> stage_part(const Trained& whole, const dist::SequentialSpec& spec,
                                           dist::LayerRange range);
std::vector<std::vector<float>> values(const std::vector<dist::Parameter*>& params);

// Equal bit for bit (a NaN equals the same NaN: --lr 10 diverges alike in both runs).
bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b);
bool same_bits(const std::vector<double>& a, const std::vector<double>& b);

// Printing.
std::string describe_layers(const dist::SequentialSpec& spec,
                            dist::LayerRange range);   // Linear(16, 32), ReLU
std::string widths(const dist::SequentialSpec& spec);  // 16-32-4
std::string grouped(std::int64_t n);                   // 1,234,567
std::string loss6(double value);                       // 6 significant digits
std::string percent(double fraction);                  // 27.3%

}  // namespace ch16
