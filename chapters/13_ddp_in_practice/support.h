// Chapter 13's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags, the data, the model with its branch, a single-process
// replay of what DDP must compute, PowerSGD's closed form, and printing.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace ch13 {

constexpr std::int64_t kIn = 16, kOut = 8;

// Every flag, with its default. --help lists them.
struct Flags {
  int steps = 6, batch_size = 4, hidden = 32, batches = 5, fewer = 2, max_rank = 4;
  double lr = 0.1;
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help.
std::optional<Flags> parse_flags(int argc, char** argv);

// Rank r's batch at `step`, closed-form so that the twin builds the same bits: every value a
// multiple of 1/8 or 1/4. x: batch * kIn values, y: batch * kOut targets.
struct Batch {
  dist::Tensor x, y;
};
Batch batch(int step, int rank, int size);

// trunk = Linear(16, hidden) -> ReLU; out = a(trunk) + (branch ? b(trunk) : 0), a and b
// Linear(hidden, 8). From closed-form initial weights, the same on every rank and in the twin.
struct Net {
  dist::Linear trunk, a, b;
  dist::ReLU relu;
  bool used_b = false;  // whether the last forward took the branch

  explicit Net(std::int64_t hidden);
  dist::Tensor forward(const dist::Tensor& x, bool branch);
  // Backward from d loss / d out: returns the parameters it gave a gradient, in the order it
  // finished them (a backward's grads_ready order): a (and b), then the trunk.
  std::vector<dist::Parameter*> backward(const dist::Tensor& grad_out);
  std::vector<dist::Parameter*> parameters();  // trunk, a, b: weight then bias
  std::vector<dist::Parameter*> branch();      // b's
};

// One step's forward, MSE loss and backward on rank `rank`'s batch; returns the loss and the
// parameters it reached.
struct StepResult {
  double loss;
  std::vector<dist::Parameter*> ready;
};
StepResult forward_backward(Net& net, const Flags& f, int step, int rank, bool branch);

// The weights DDP must reach, computed by one process: at each step every rank's gradient on
// its batch (zeros for a rank that does not `train` at that step, and for a parameter its forward
// did not use), each divided by the world size and summed in rank order, then SGD.
std::vector<float> replay(const Flags& f, int world, int steps,
                          const std::function<bool(int step, int rank)>& trains,
                          const std::function<bool(int step, int rank)>& branch);

std::vector<float> values(const std::vector<dist::Parameter*>& params);
// The largest |a - b| / max(|a|, 1e-30) over the values (0 when equal).
double largest_difference(const std::vector<float>& a, const std::vector<float>& b);
// Whether every rank holds rank 0's bits (a collective).
bool same_on_every_rank(const std::vector<float>& mine);

// PowerSGD's closed form: the float32 values one step all_reduces with rank r, the min
// compression rate 2 (torch's default): a parameter of n x m (n its first dimension) travels as
// (n + m) r values if (n + m) r * 2 < n m, else whole (biases always whole).
std::int64_t powersgd_values(const std::vector<dist::Parameter*>& params, int r);

// Printing.
using dist::grouped;  // 1,234,567 (dist/log.h)
std::string fixed6(double value);

}  // namespace ch13
