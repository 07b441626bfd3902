// Chapter 14's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags, the data, the model, the scaler's rule written out, and
// printing.
#pragma once

#include <dist/amp.h>
#include <dist/dist.h>
#include <dist/nn.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch14 {

constexpr std::int64_t kFeatures = 8, kClasses = 4;

// Every flag, with its default. --help lists them.
struct Flags {
  int terms = 3000, numel = 32768, steps = 40, batch_size = 16, hidden = 32, growth_interval = 10;
  double lr = 0.5, init_scale = 65536;
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help.
std::optional<Flags> parse_flags(int argc, char** argv);

// A batch of the synthetic data set, closed-form so that the twin draws the same one without a
// random generator: sample i has features x_ij = ((7919 i + 104729 j) mod 2001) / 1000 - 1 and
// the class whose row of a fixed integer teacher matrix gives the largest x . t_c.
struct Batch {
  dist::Tensor x;  // batch * kFeatures float32 values
  dist::Tensor y;  // batch labels (int64)
};
Batch batch(std::int64_t first_sample, std::int64_t size, dist::Device device);

// Linear(8, hidden) -> ReLU -> Linear(hidden, 4), from closed-form initial weights (the same on
// every rank, and in the twin), on `device`. The parameters are float32: the master weights.
struct Mlp {
  dist::Linear l1, l2;
  dist::ReLU relu;
  dist::Tensor h1, h2, out;  // the last forward's activations (in the input's dtype)

  Mlp(std::int64_t hidden, dist::Device device);
  dist::Tensor forward(const dist::Tensor& x);
  void backward(const dist::Tensor& grad_out);
  std::vector<dist::Parameter*> parameters();
  std::int64_t activation_bytes() const;  // what the last forward's three outputs hold
};

// GradScaler's rule, written out: the scale and the count of clean steps after one step that
// found an inf or NaN (`skipped`) or did not. main.cpp checks dist::GradScaler against it.
struct ScaleRule {
  double scale;
  std::int64_t tracker = 0;
  void after_step(bool skipped, const dist::GradScalerOptions& o);
};

// Whether any gradient of `params` holds an inf or a NaN.
bool any_nonfinite(const std::vector<dist::Parameter*>& params);
std::vector<float> values(const std::vector<dist::Parameter*>& params);

// Printing.
std::string exact(double value);  // every digit a float16/bfloat16 value needs: 0.0999755859375
std::string fixed4(double value);
using dist::grouped;  // 1,234,567 (dist/log.h)

}  // namespace ch14
