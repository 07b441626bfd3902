// dist/optim.h: SGD, CosineAnnealingLR and Adam. The per-value arithmetic is nn_math's, shared with
// the CUDA kernels in gpu/nn_kernels.cu; this file works out each step's scalars as torch 1.13's
// Python does and runs the CPU loops.
#include "dist/optim.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "dist/check.h"
#include "gpu/gpu.h"
#include "nn_math.h"

namespace dist {
namespace {

// torch keeps state["step"] in a float32 tensor: past 2^24, step_t += 1 rounds back to 2^24.
constexpr std::int64_t kLastExactStep = std::int64_t{1} << 24;

void check_option(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("Adam: " + what);
}

}  // namespace

SGD::SGD(std::vector<Parameter*> params, double lr, SGDOptions options)
    : params_(std::move(params)), lr_(lr), options_(options), buffers_(params_.size()) {
  if (!(lr > 0))
    throw ConfigError("SGD: the learning rate must be positive, got " + std::to_string(lr));
  if (!(options.momentum >= 0 && options.momentum < 1)) {
    throw ConfigError("SGD: momentum must be in [0, 1), got " + std::to_string(options.momentum));
  }
  if (!(options.dampening >= 0 && options.dampening <= 1)) {
    throw ConfigError("SGD: dampening must be in [0, 1], got " + std::to_string(options.dampening));
  }
  if (options.nesterov && (options.momentum <= 0 || options.dampening != 0)) {
    throw ConfigError(
        "SGD: Nesterov momentum requires a momentum and zero dampening (as torch.optim.SGD)");
  }
}

void SGD::load_momentum_buffers(const std::vector<Tensor>& buffers) {
  if (buffers.size() != params_.size()) {
    throw ConfigError("SGD::load_momentum_buffers: got " + std::to_string(buffers.size()) +
                      " buffers for " + std::to_string(params_.size()) +
                      " parameters; save and load the same model's optimizer");
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const Tensor& b = buffers[i];
    const Parameter& p = *params_[i];
    if (b.numel() != 0 && (b.numel() != p.data.numel() || b.dtype() != p.data.dtype())) {
      throw ConfigError("SGD::load_momentum_buffers: the buffer of " + p.name + " has " +
                        std::to_string(b.numel()) + " values of " +
                        std::string(dtype_name(b.dtype())) + ", the parameter " +
                        std::to_string(p.data.numel()) + " of " +
                        std::string(dtype_name(p.data.dtype())));
    }
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    buffers_[i] = buffers[i].numel() == 0 ? Tensor() : buffers[i].to(params_[i]->data.device());
  }
}

void SGD::set_lr(double lr) {
  if (!(lr >= 0)) {
    throw ConfigError("SGD: the learning rate must not be negative, got " + std::to_string(lr));
  }
  lr_ = lr;
}

void SGD::zero_grad() {
  for (Parameter* p : params_) p->grad.fill_(0);
}

void SGD::step() {
  const auto lr = static_cast<float>(lr_);
  const bool momentum = options_.momentum != 0;
  const auto m = static_cast<float>(options_.momentum);
  const auto keep = static_cast<float>(1 - options_.dampening);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Parameter* p = params_[k];
    float* data = p->data.data_ptr<float>();
    const float* grad = p->grad.data_ptr<float>();
    const std::int64_t n = p->data.numel();
    if (!momentum) {
      if (p->data.is_cuda()) {
        gpu::sgd_step(data, grad, n, lr, p->data.device().index());
        continue;
      }
      for (std::int64_t i = 0; i < n; ++i) data[i] = nn_math::sgd(data[i], grad[i], lr);
      continue;
    }
    const bool first = buffers_[k].numel() == 0;  // torch: no momentum_buffer yet
    if (first) buffers_[k] = Tensor(n, kFloat32, p->data.device());
    float* buf = buffers_[k].data_ptr<float>();
    if (p->data.is_cuda()) {
      gpu::sgd_momentum_step(data, grad, buf, first, n, lr, m, keep, options_.nesterov,
                             p->data.device().index());
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      data[i] =
          nn_math::sgd_momentum(data[i], grad[i], buf[i], first, lr, m, keep, options_.nesterov);
    }
  }
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, std::int64_t t_max, double eta_min)
    : optimizer_(&optimizer), t_max_(t_max), eta_min_(eta_min), base_lr_(optimizer.lr()) {
  if (t_max < 1) {
    throw ConfigError(
        "CosineAnnealingLR: t_max is the number of steps to anneal over, at least "
        "1, got " +
        std::to_string(t_max));
  }
}

void CosineAnnealingLR::step() {
  // torch 1.13's CosineAnnealingLR.get_lr(), for a schedule that started at step 0, term by term
  // in the same order: the same doubles, and glibc's cos as Python's math.cos calls it.
  constexpr double kPi = 3.141592653589793;  // Python's math.pi
  const std::int64_t t = ++last_epoch_;
  const double lr = optimizer_->lr();
  double next = 0;
  if ((t - 1 - t_max_) % (2 * t_max_) == 0) {  // just past the bottom: the cosine turns up
    next = lr + (base_lr_ - eta_min_) * (1 - std::cos(kPi / static_cast<double>(t_max_))) / 2;
  } else {
    next = (1 + std::cos(kPi * static_cast<double>(t) / static_cast<double>(t_max_))) /
               (1 + std::cos(kPi * static_cast<double>(t - 1) / static_cast<double>(t_max_))) *
               (lr - eta_min_) +
           eta_min_;
  }
  optimizer_->set_lr(next);
}

Adam::Adam(std::vector<Parameter*> params, double lr, AdamOptions options)
    : params_(std::move(params)),
      lr_(lr),
      options_(options),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()) {
  check_option(!params_.empty(),
               "got an empty parameter list (as torch.optim.Adam refuses it); pass "
               "model.parameters()");
  check_option(lr >= 0, "the learning rate must not be negative, got " + std::to_string(lr));
  check_option(options.eps >= 0, "eps must not be negative, got " + std::to_string(options.eps));
  check_option(options.beta1 >= 0 && options.beta1 < 1,
               "beta1 must be in [0, 1), got " + std::to_string(options.beta1));
  check_option(options.beta2 >= 0 && options.beta2 < 1,
               "beta2 must be in [0, 1), got " + std::to_string(options.beta2));
  check_option(options.weight_decay >= 0,
               "weight_decay must not be negative, got " + std::to_string(options.weight_decay));
  for (const Parameter* p : params_) {
    check_option(p != nullptr, "a parameter pointer is null");
    check_option(p->data.dtype() == kFloat32, "the parameter " + p->name + " is " +
                                                  std::string(dtype_name(p->data.dtype())) +
                                                  "; Adam updates float32 parameters");
  }
}

void Adam::set_lr(double lr) {
  check_option(lr >= 0, "the learning rate must not be negative, got " + std::to_string(lr));
  lr_ = lr;
}

void Adam::zero_grad() {
  for (Parameter* p : params_) p->grad.fill_(0);
}

std::int64_t Adam::state_bytes() const {
  std::int64_t bytes = 0;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    bytes += static_cast<std::int64_t>(exp_avg_[k].nbytes() + exp_avg_sq_[k].nbytes());
  }
  return bytes;
}

void Adam::load_state(std::int64_t steps, const std::vector<Tensor>& exp_avg,
                      const std::vector<Tensor>& exp_avg_sq) {
  if (exp_avg.size() != params_.size() || exp_avg_sq.size() != params_.size()) {
    throw ConfigError("Adam::load_state: got " + std::to_string(exp_avg.size()) + " exp_avg and " +
                      std::to_string(exp_avg_sq.size()) + " exp_avg_sq tensors for " +
                      std::to_string(params_.size()) +
                      " parameters; save and load the same model's optimizer");
  }
  if (steps < 0 || steps > kLastExactStep) {
    throw ConfigError("Adam::load_state: steps must be in [0, 2^24], got " + std::to_string(steps));
  }
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const Parameter& p = *params_[k];
    for (const Tensor* t : {&exp_avg[k], &exp_avg_sq[k]}) {
      const char* which = t == &exp_avg[k] ? "exp_avg" : "exp_avg_sq";
      const std::int64_t want = steps == 0 ? 0 : p.data.numel();
      if (t->numel() != want || (want != 0 && t->dtype() != kFloat32)) {
        throw ConfigError("Adam::load_state: the " + std::string(which) + " of " + p.name +
                          " has " + std::to_string(t->numel()) + " values of " +
                          std::string(dtype_name(t->dtype())) + "; after " + std::to_string(steps) +
                          " steps it must have " + std::to_string(want) +
                          " of torch.float32 (none before the first step)");
      }
    }
  }
  steps_ = steps;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const Device device = params_[k]->data.device();
    exp_avg_[k] = steps == 0 ? Tensor() : exp_avg[k].to(device);
    exp_avg_sq_[k] = steps == 0 ? Tensor() : exp_avg_sq[k].to(device);
  }
}

void Adam::step() {
  for (const Parameter* p : params_) {
    if (p->grad.numel() != p->data.numel() || p->grad.dtype() != kFloat32 ||
        p->grad.device() != p->data.device()) {
      throw ConfigError(
          "Adam.step: the grad of " + p->name + " has " + std::to_string(p->grad.numel()) +
          " values of " + std::string(dtype_name(p->grad.dtype())) + " on " +
          p->grad.device().str() + ", the parameter " + std::to_string(p->data.numel()) +
          " of torch.float32 on " + p->data.device().str() + "; run backward before step");
    }
  }
  // torch 1.13, _single_tensor_adam: step_t += 1, then in Python (doubles) from step_t.item():
  // bias_correction1 = 1 - beta1 ** step, bias_correction2 = 1 - beta2 ** step,
  // step_size = lr / bias_correction1, bias_correction2_sqrt = math.sqrt(bias_correction2).
  // Each tensor op then rounds its scalar argument to float32 (1 - beta1 is taken in double first).
  if (steps_ < kLastExactStep) ++steps_;
  const double step = static_cast<double>(steps_);
  const double bias_correction1 = 1 - std::pow(options_.beta1, step);
  const double bias_correction2 = 1 - std::pow(options_.beta2, step);
  const double step_size = lr_ / bias_correction1;
  const nn_math::AdamScalars scalars{
      .beta1 = static_cast<float>(options_.beta1),
      .one_minus_beta1 = static_cast<float>(1 - options_.beta1),
      .beta2 = static_cast<float>(options_.beta2),
      .one_minus_beta2 = static_cast<float>(1 - options_.beta2),
      .eps = static_cast<float>(options_.eps),
      .weight_decay = static_cast<float>(options_.weight_decay),
      .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
      .minus_step_size = static_cast<float>(-step_size),
  };
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Parameter* p = params_[k];
    const std::int64_t n = p->data.numel();
    if (exp_avg_[k].numel() != n) {  // torch: the state is made, zero-filled, at the first step
      exp_avg_[k] = Tensor(n, kFloat32, p->data.device());
      exp_avg_sq_[k] = Tensor(n, kFloat32, p->data.device());
    }
    float* data = p->data.data_ptr<float>();
    const float* grad = p->grad.data_ptr<float>();
    float* m = exp_avg_[k].data_ptr<float>();
    float* v = exp_avg_sq_[k].data_ptr<float>();
    if (p->data.is_cuda()) {
      gpu::adam_step(data, grad, m, v, n, scalars, p->data.device().index());
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i)
      data[i] = nn_math::adam(data[i], grad[i], m[i], v[i], scalars);
  }
}

}  // namespace dist
