// dist/optim.h — torch.optim's part: SGD (with momentum), Adam, and the cosine learning-rate
// schedule, all on one dist::Optimizer interface.
//
//   dist::SGD optimizer(model.parameters(), /*lr=*/0.01);                    // optim.SGD
//   dist::SGD with_momentum(model.parameters(), 0.01, {.momentum = 0.9});    // chapter 11
//   dist::Adam optimizer(model.parameters(), /*lr=*/1e-3);             // optim.Adam(params, lr)
//   dist::Adam tuned(model.parameters(), 0.05, {.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
//                                              .weight_decay = 0.1});  // betas=(0.8, 0.99), ...
//   optimizer.zero_grad();  model.backward(...);  optimizer.step();
//   dist::CosineAnnealingLR schedule(optimizer, steps);                 // any dist::Optimizer
//
// SGD steps p -= lr * p.grad, rounded once (torch's p.add_(grad, alpha=-lr) is a fused
// multiply-add on an AVX2 CPU and on a GPU; its momentum: SGDOptions below).
// Adam is an optimizer whose state is worth sharding: it keeps two running averages for every
// parameter value, of the gradient (exp_avg, m) and of its square (exp_avg_sq, v), and steps each
// value by lr * m_hat / (sqrt(v_hat) + eps), the two averages corrected for starting at zero (t
// counts the steps, from 1):
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
// Taught in: chapter 08 (SGD), chapter 09 (CosineAnnealingLR), chapter 11 (SGD's momentum: the
// optimizer's state, saved in a snapshot), chapter 12 (Adam: the state that ZeRO divides among the
// ranks).
// Built in: common/src/nn/optim.cpp (the CPU loops; nn_math.h holds the arithmetic they share with
// the kernels) and gpu/nn_kernels.cu (cuda preset).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/nn.h"
#include "dist/tensor.h"

namespace dist {

// What every optimizer here has (torch.optim.Optimizer's part that a training loop and a
// learning-rate schedule use): dist::SGD and dist::Adam below. One parameter group.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void zero_grad() = 0;  // every grad to 0
  virtual void step() = 0;       // one update of every parameter from its grad
  virtual double lr() const = 0;
  // optimizer.param_groups[0]["lr"] = lr: what a learning-rate schedule changes between steps.
  virtual void set_lr(double lr) = 0;
  // optimizer.param_groups[0]["params"]: what a GradScaler (dist/amp.h) unscales and checks.
  virtual const std::vector<Parameter*>& parameters() const = 0;

 protected:
  Optimizer() = default;
  Optimizer(const Optimizer&) = default;
  Optimizer& operator=(const Optimizer&) = default;
};

// torch.optim.SGD's options beyond the learning rate (weight decay is not here). With momentum m,
// every parameter keeps a momentum buffer, the optimizer's state: torch 1.13's step (in
// torch/optim/sgd.py) sets it to the gradient at the first step, then
//   buf = m * buf + (1 - dampening) * grad,   p -= lr * (nesterov ? grad + m * buf : buf).
// The buffer is why a snapshot must hold the optimizer as well as the model (chapter 11): a run
// resumed with empty buffers takes different steps from then on.
struct SGDOptions {
  double momentum = 0;
  double dampening = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening 0, as torch requires
};

// torch.optim.SGD(params, lr, momentum=..., dampening=..., nesterov=...).
class SGD : public Optimizer {
 public:
  SGD(std::vector<Parameter*> params, double lr, SGDOptions options = {});
  void zero_grad() override;  // every grad to 0 (torch 1.13 keeps zero tensors by default, as here)
  // p -= lr * p.grad, in float32 as torch computes it; with momentum, through the buffer.
  void step() override;
  double lr() const override { return lr_; }
  void set_lr(double lr) override;
  const std::vector<Parameter*>& parameters() const override { return params_; }
  const SGDOptions& options() const { return options_; }

  // optimizer.state[p]["momentum_buffer"] for each parameter, in the parameters' order: empty
  // (numel 0) before the first step() with momentum, as torch has no entry yet. What a snapshot
  // saves; load_momentum_buffers puts saved ones back (each empty, or shaped as its parameter;
  // copied to the parameter's device). Throws dist::ConfigError naming the first that does not fit.
  const std::vector<Tensor>& momentum_buffers() const { return buffers_; }
  void load_momentum_buffers(const std::vector<Tensor>& buffers);

 private:
  std::vector<Parameter*> params_;
  double lr_;
  SGDOptions options_;
  std::vector<Tensor> buffers_;
};

// torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max, eta_min): the learning rate
// falls from the optimizer's initial one, lr_0, to eta_min along half a cosine over t_max calls
// of step():  lr_t = eta_min + (lr_0 - eta_min) * (1 + cos(pi * t / t_max)) / 2.
// Large steps early, while the model is far from a minimum; small ones late, so that the last
// steps settle instead of jumping around it (chapter 09). As in torch, call step() after
// optimizer.step(), once per step (or once per epoch, with t_max counted in epochs). Each new rate
// is computed from the previous one as torch 1.13 computes it (a ratio of cosines, not the formula
// above), so the same calls give torch's doubles to the bit; past t_max the rate climbs back up,
// as torch's does. Resuming: a new schedule, step()ped as often as the run had stepped. Any
// dist::Optimizer: SGD, or Adam (below).
class CosineAnnealingLR {
 public:
  CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min = 0);
  void step();  // the next step's learning rate, set on the optimizer
  std::int64_t last_epoch() const { return last_epoch_; }  // step() calls so far (torch's name)
  double lr() const { return optimizer_->lr(); }

 private:
  Optimizer* optimizer_;
  std::int64_t t_max_;
  double eta_min_, base_lr_;
  std::int64_t last_epoch_ = 0;
};

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
  const std::vector<Parameter*>& parameters() const override { return params_; }
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
