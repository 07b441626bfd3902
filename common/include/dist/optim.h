// dist/optim.h — torch.optim.Adam: an optimizer whose state is worth sharding.
//
//   dist::Adam optimizer(model.parameters(), /*lr=*/1e-3);             // optim.Adam(params, lr)
//   dist::Adam tuned(model.parameters(), 0.05, {.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
//                                              .weight_decay = 0.1});  // betas=(0.8, 0.99), ...
//   optimizer.zero_grad();  model.backward(...);  optimizer.step();
//   dist::CosineAnnealingLR schedule(optimizer, steps);                 // any dist::Optimizer
//
// Adam keeps two running averages for every parameter value, of the gradient (exp_avg, m) and of
// its square (exp_avg_sq, v), and steps each value by lr * m_hat / (sqrt(v_hat) + eps), the two
// averages corrected for starting at zero (t counts the steps, from 1):
//   g = grad + weight_decay * param    (only when weight_decay != 0: L2, not AdamW's decay)
//   m = beta1 * m + (1 - beta1) * g
//   v = beta2 * v + (1 - beta2) * g * g
//   param -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// So its state is 8 bytes per float32 parameter value, twice the parameters' own 4: for a model of
// P values, data parallelism keeps 4P of parameters, 4P of gradients and 8P of Adam's state on
// every rank. That state is what a sharded optimizer (torch's ZeroRedundancyOptimizer) divides
// among the ranks, and state_bytes() is how the chapter counts it.
//
// Bit for bit with torch 1.13 on the CPU: step() computes what torch.optim.Adam's default path
// (_single_tensor_adam: foreach and fused off, as 1.13 defaults them) computes, operation for
// operation: the scalars (bias corrections, step size) in double as torch's Python does, each value
// in float32, and a fused multiply-add exactly where torch's CPU kernels use one (the weight decay,
// exp_avg's add_ and exp_avg_sq's addcmul_). Parameters, exp_avg and exp_avg_sq all equal torch's
// bits (tests/unit/adam_torch_bits.py writes torch's own numbers, and optim_test compares). The
// CUDA kernel (cuda preset) computes the same operations, so it gives the CPU's bits; torch's own
// CUDA Adam may differ from them in the last bits.
//
// Not here: amsgrad=True and maximize=True (torch's defaults are off), capturable, differentiable,
// foreach and fused (other ways to compute the same update), and more than one parameter group.
//
// Taught in: chapter 12 (sharding: the optimizer state that ZeRO divides among the ranks).
// Built in: common/src/optim.cpp (the CPU loop; nn_math.h holds the arithmetic it shares with the
// kernel) and gpu/nn_kernels.cu (cuda preset).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/nn.h"
#include "dist/tensor.h"

namespace dist {

// torch.optim.Adam's options beyond the learning rate, with torch's defaults: betas=(beta1,
// beta2), eps, weight_decay.
struct AdamOptions {
  double beta1 = 0.9;       // in [0, 1): how slowly exp_avg forgets
  double beta2 = 0.999;     // in [0, 1): how slowly exp_avg_sq forgets
  double eps = 1e-8;        // >= 0: added to sqrt(v_hat): the step's denominator is never 0
  double weight_decay = 0;  // >= 0: adds weight_decay * param to the gradient (L2)
};

// torch.optim.Adam(params, lr, betas=(beta1, beta2), eps, weight_decay): one parameter group.
class Adam : public Optimizer {
 public:
  // Throws dist::ConfigError for an empty parameter list, a parameter that is not float32, or an
  // option out of the range torch accepts (lr >= 0, eps >= 0, 0 <= beta < 1, weight_decay >= 0).
  explicit Adam(std::vector<Parameter*> params, double lr = 1e-3, AdamOptions options = {});

  void zero_grad() override;  // every grad to 0 (torch 1.13 keeps zero tensors by default)
  // One Adam update of every parameter from its grad, which must be as large as the parameter and
  // on its device (dist::ConfigError names the first that is not). The first step creates the
  // state, zero-filled, on the parameter's device.
  void step() override;
  double lr() const override { return lr_; }
  void set_lr(double lr) override;  // >= 0, as torch's constructor requires
  const AdamOptions& options() const { return options_; }

  // state[p]["step"]: the steps taken (the same for every parameter: one group, every grad
  // present). torch counts in a float32 tensor, which stops at 2^24 = 16,777,216 (2^24 + 1 rounds
  // back down); so does this count, and so the bias corrections stay torch's.
  std::int64_t steps() const { return steps_; }
  // state[p]["exp_avg"] and state[p]["exp_avg_sq"] for each parameter, in the parameters' order,
  // on the parameters' devices: empty (numel 0) before the first step(), as torch has no state
  // entry yet.
  const std::vector<Tensor>& exp_avg() const { return exp_avg_; }
  const std::vector<Tensor>& exp_avg_sq() const { return exp_avg_sq_; }
  // The bytes of optimizer state this optimizer holds: 0 before the first step, then 8 per
  // parameter value (exp_avg and exp_avg_sq, float32). torch also keeps a 4-byte step tensor per
  // parameter, which this does not count (one shared counter here).
  std::int64_t state_bytes() const;

  // Puts a saved state back (a snapshot: steps(), exp_avg(), exp_avg_sq() of an optimizer over
  // the same model), copied to the parameters' devices. steps 0 with every tensor empty is the
  // state before the first step; steps > 0 needs every tensor shaped as its parameter. Throws
  // dist::ConfigError naming the first thing that does not fit.
  void load_state(std::int64_t steps, const std::vector<Tensor>& exp_avg,
                  const std::vector<Tensor>& exp_avg_sq);

 private:
  std::vector<Parameter*> params_;
  double lr_;
  AdamOptions options_;
  std::int64_t steps_ = 0;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace dist
