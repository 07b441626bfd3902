// Chapter 08's support code: the flags, post B's data, each rank's initial weights, and printing.
// None of it is about DistributedDataParallel; main.cpp is the lesson.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>

#include "post_b_data.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch08 {

// The flags of ch08_ddp_linear, at their defaults: the default run is these on 2 ranks.
struct Flags {
  int samples = 512, batch_size = 8, epochs = 20, seed = 0;
  double lr = 0.01;
  bool throughput = false;
  dist::InitOptions init;  // --backend, --init-method, --timeout

  // Every flag that changes the numbers is at its default (the backend does not).
  bool training_defaults() const;
};
// The parsed flags, or nothing after --help (the program then exits 0).
std::optional<Flags> parse_flags(int argc, char** argv);

// The rows `batch` of the dataset, as float32 tensors x and y on `device`.
std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Dataset& d,
                                                    const std::vector<std::int64_t>& batch,
                                                    dist::Device device);

// The closed form the training approaches: least squares on the whole dataset, in double.
struct LineFit {
  double w, b;
};
LineFit least_squares(const Dataset& d);

// "w = 0.515263, b = -0.441378": the model's weight and bias with `decimals` digits.
std::string weights_text(const dist::Linear& model, int decimals = 6);
std::string fixed(double v, int decimals = 6);
// Rank 0 prints "epoch  0: loss 7.447743" for the first five epochs, then every fifth and the
// last: enough to see the curve flatten, short enough to read.
void print_losses(const std::vector<double>& losses);

// What step 7 found: the two promises, and the fit (judged in the default run only).
struct Checks {
  bool identical = false, same_steps = false, judged = false, near = false;
  double dw = 0, db = 0;  // |w - w*| and |b - b*|
};
// Rank 0 prints a line per promise (yes or no), the fit, and the OK or MISMATCH line.
void print_checks(const Checks& c, bool job_ok);

}  // namespace ch08
