// dist/nn.h: Linear, ReLU, BatchNorm1d, the losses, fingerprint. The CPU loops are here; the same
// computations as CUDA kernels are in gpu/nn_kernels.cu (cuda preset). Every sum is taken in
// double, then rounded once to float32: the CPU and the GPU give the same bits for Linear, ReLU,
// BatchNorm and SGD (the losses, and cross_entropy's gradient, which go through exp and log, whose
// CUDA and glibc versions may differ in the last bit, agree to rounding).
#include "dist/nn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "dist/check.h"
#include "gpu/gpu.h"
#include "nn_math.h"
#include "util/fnv1a.h"

namespace dist {
namespace {

void require_float32(const Tensor& t, const char* what) {
  if (t.dtype() != kFloat32) {
    throw ConfigError(std::string(what) + " must be float32 (dist::kFloat32), got " +
                      std::string(dtype_name(t.dtype())));
  }
}

bool is_half(DType dtype) {
  return dtype == kFloat16 || dtype == kBFloat16;
}

// float32, or float16/bfloat16 (which the layers run as torch's autocast runs them).
void require_float32_or_half(const Tensor& t, const char* what) {
  if (t.dtype() != kFloat32 && !is_half(t.dtype())) {
    throw ConfigError(std::string(what) + " must be float32, float16 or bfloat16, got " +
                      std::string(dtype_name(t.dtype())));
  }
}

void require_same_device(const Tensor& t, Device device, const char* what) {
  if (t.device() != device) {
    throw ConfigError(std::string(what) + " is on " + t.device().str() + " but the model is on " +
                      device.str() + "; move it first with .to(device), as in torch");
  }
}

Tensor from_floats(const std::vector<float>& values, Device device) {
  return Tensor::from(values, device);
}

std::int64_t whole_rows(const Tensor& x, std::int64_t features, const char* what) {
  if (x.numel() % features != 0) {
    throw ConfigError(std::string(what) + ": " + std::to_string(x.numel()) +
                      " values are not whole rows of " + std::to_string(features) + " features");
  }
  return x.numel() / features;
}

// The CPU loops of the kernels in gpu.h: the same nn_math.h functions, value by value.
namespace cpu {

void batchnorm_sums(const float* a, const float* b, double* sums, std::int64_t rows,
                    std::int64_t features) {
  for (std::int64_t c = 0; c < features; ++c)
    nn_math::batchnorm_sums(a, b, sums, c, rows, features);
}

void batchnorm_apply(const float* x, const double* mean, const double* invstd, const float* weight,
                     const float* bias, float* xhat, float* out, std::int64_t rows,
                     std::int64_t features) {
  for (std::int64_t k = 0; k < rows * features; ++k) {
    nn_math::batchnorm_apply(x, mean, invstd, weight, bias, xhat, out, k, features);
  }
}

void batchnorm_grad_input(const float* g, const float* xhat, const float* weight,
                          const double* invstd, const double* sums, double count, float* gx,
                          std::int64_t rows, std::int64_t features) {
  for (std::int64_t k = 0; k < rows * features; ++k) {
    gx[k] = nn_math::batchnorm_grad_input(g, xhat, weight, invstd, sums, count, k, features);
  }
}

void cross_entropy(const float* logits, const std::int64_t* labels, float* grad, double* loss,
                   std::int64_t* correct, std::int64_t rows, std::int64_t classes) {
  for (std::int64_t r = 0; r < rows; ++r) {
    nn_math::cross_entropy_row(logits, labels, grad, loss, correct, r, rows, classes);
  }
}

}  // namespace cpu

// Linear on the CPU. Every output value goes through exactly the operations of its nn_math
// function (the CUDA kernels' arithmetic): the same terms, in the same order, in double, rounded
// once. Only the loop order differs: the innermost loop runs over independent outputs, each with
// an accumulator of its own, so the compiler vectorises it and no add waits for the one before.
// (A per-value loop waits on each add: about 4x slower here.) The operand the inner loop reads
// is converted to double once, up front. tests/unit/nn_test.cpp compares both, bit for bit.
void cpu_linear_forward(const float* x, const float* w, const float* b, float* o, std::int64_t rows,
                        std::int64_t in, std::int64_t out) {
  std::vector<double> xt(static_cast<std::size_t>(in * rows)), acc(static_cast<std::size_t>(rows));
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t i = 0; i < in; ++i)
      xt[static_cast<std::size_t>(i * rows + n)] = x[n * in + i];
  }
  double* __restrict a = acc.data();
  for (std::int64_t j = 0; j < out; ++j) {
    for (std::int64_t n = 0; n < rows; ++n) a[n] = b[j];
    for (std::int64_t i = 0; i < in; ++i) {
      const double wji = w[j * in + i];
      const double* __restrict col = xt.data() + i * rows;
      for (std::int64_t n = 0; n < rows; ++n) a[n] += col[n] * wji;
    }
    for (std::int64_t n = 0; n < rows; ++n) o[n * out + j] = static_cast<float>(a[n]);
  }
}

void cpu_linear_backward(const float* x, const float* g, const float* w, float* gw, float* gb,
                         float* gx, std::int64_t rows, std::int64_t in, std::int64_t out) {
  for (std::int64_t j = 0; j < out; ++j) gb[j] = nn_math::linear_grad_bias(g, gb[j], j, rows, out);
  // grad_weight[j][i] += sum over n of g[n][j] * x[n][i], inner loop over i.
  std::vector<double> xd(x, x + rows * in), sum(static_cast<std::size_t>(std::max(in, out)));
  double* __restrict s = sum.data();
  for (std::int64_t j = 0; j < out; ++j) {
    std::fill(s, s + in, 0.0);
    for (std::int64_t n = 0; n < rows; ++n) {
      const double gnj = g[n * out + j];
      const double* __restrict xn = xd.data() + n * in;
      for (std::int64_t i = 0; i < in; ++i) s[i] += gnj * xn[i];
    }
    for (std::int64_t i = 0; i < in; ++i) {
      gw[j * in + i] = static_cast<float>(gw[j * in + i] + s[i]);  // += until zero_grad
    }
  }
  // grad_x[n][i] = sum over j of g[n][j] * w[j][i], inner loop over i.
  const std::vector<double> wd(w, w + out * in);
  for (std::int64_t n = 0; n < rows; ++n) {
    std::fill(s, s + in, 0.0);
    for (std::int64_t j = 0; j < out; ++j) {
      const double gnj = g[n * out + j];
      const double* __restrict wj = wd.data() + j * in;
      for (std::int64_t i = 0; i < in; ++i) s[i] += gnj * wj[i];
    }
    for (std::int64_t i = 0; i < in; ++i) gx[n * in + i] = static_cast<float>(s[i]);
  }
}

}  // namespace

Linear::Linear(std::int64_t in_features, std::int64_t out_features, const LinearInit& init,
               Device device)
    : in_(in_features), out_(out_features) {
  if (in_ < 1 || out_ < 1) {
    throw ConfigError("Linear(" + std::to_string(in_) + ", " + std::to_string(out_) +
                      "): in_features and out_features must be at least 1");
  }
  if (static_cast<std::int64_t>(init.weight.size()) != in_ * out_ ||
      static_cast<std::int64_t>(init.bias.size()) != out_) {
    throw ConfigError("Linear(" + std::to_string(in_) + ", " + std::to_string(out_) + ") needs " +
                      std::to_string(in_ * out_) + " initial weights and " + std::to_string(out_) +
                      " biases, got " + std::to_string(init.weight.size()) + " and " +
                      std::to_string(init.bias.size()));
  }
  weight_ = {
      "weight", from_floats(init.weight, device), zeros(in_ * out_, kFloat32, device), {out_, in_}};
  bias_ = {"bias", from_floats(init.bias, device), zeros(out_, kFloat32, device)};
}

namespace {

// out = x W^T + b in float32, where the tensors are (the model's device).
Tensor linear_forward_f32(const Tensor& x, const Tensor& weight, const Tensor& bias,
                          std::int64_t in, std::int64_t out_features) {
  const Device device = weight.device();
  const std::int64_t batch = x.numel() / in;
  Tensor out(batch * out_features, kFloat32, device);
  const float* xs = x.data_ptr<float>();
  const float* w = weight.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (device.is_cuda()) {
    gpu::linear_forward(xs, w, b, o, batch, in, out_features, device.index());
  } else {
    cpu_linear_forward(xs, w, b, o, batch, in, out_features);
  }
  return out;
}

// Adds d loss / d W and d loss / d b to grad_weight and grad_bias; returns d loss / d x.
Tensor linear_backward_f32(const Tensor& x, const Tensor& grad_out, const Tensor& weight,
                           Tensor& grad_weight, Tensor& grad_bias, std::int64_t in,
                           std::int64_t out_features) {
  const Device device = weight.device();
  const std::int64_t batch = x.numel() / in;
  Tensor grad_x(batch * in, kFloat32, device);
  const float* xs = x.data_ptr<float>();
  const float* g = grad_out.data_ptr<float>();
  const float* w = weight.data_ptr<float>();
  float* gw = grad_weight.data_ptr<float>();
  float* gb = grad_bias.data_ptr<float>();
  float* gx = grad_x.data_ptr<float>();
  if (device.is_cuda()) {
    gpu::linear_backward(xs, g, w, gw, gb, gx, batch, in, out_features, device.index());
  } else {
    cpu_linear_backward(xs, g, w, gw, gb, gx, batch, in, out_features);
  }
  return grad_x;
}

}  // namespace

Tensor Linear::forward(const Tensor& x) {
  const Device device = weight_.data.device();
  require_float32_or_half(x, "Linear.forward's input");
  require_same_device(x, device, "Linear.forward's input");
  if (x.numel() % in_ != 0) {
    throw ConfigError("Linear.forward: " + std::to_string(x.numel()) +
                      " input values are not whole rows of in_features = " + std::to_string(in_));
  }
  compute_ = x.dtype();
  if (compute_ == kFloat32) {
    input_ = x;
    half_weight_ = Tensor();
    return linear_forward_f32(x, weight_.data, bias_.data, in_, out_);
  }
  // torch's autocast: the weight and bias rounded to the input's dtype (a half copy; the float32
  // master weights stay as they are), the sums as in float32 (here in double, rounded once to
  // float32), the output rounded to the input's dtype. Half values widen to float32 exactly.
  input_ = x.to(kFloat32);
  half_weight_ = weight_.data.to(compute_).to(kFloat32);
  const Tensor half_bias = bias_.data.to(compute_).to(kFloat32);
  return linear_forward_f32(input_, half_weight_, half_bias, in_, out_).to(compute_);
}

Tensor Linear::backward(const Tensor& grad_out) {
  const Device device = weight_.data.device();
  if (compute_ == kFloat32) {
    require_float32(grad_out, "Linear.backward's gradient");
  } else if (grad_out.dtype() != kFloat32 && grad_out.dtype() != compute_) {
    throw ConfigError("Linear.backward's gradient must be " + std::string(dtype_name(compute_)) +
                      " (the forward's dtype) or float32, got " +
                      std::string(dtype_name(grad_out.dtype())));
  }
  require_same_device(grad_out, device, "Linear.backward's gradient");
  const std::int64_t batch = input_.numel() / in_;
  if (grad_out.numel() != batch * out_) {
    throw ConfigError("Linear.backward: the gradient has " + std::to_string(grad_out.numel()) +
                      " values, but the last forward produced " + std::to_string(batch * out_) +
                      "; call forward before backward, on the same batch");
  }
  if (compute_ == kFloat32) {
    return linear_backward_f32(input_, grad_out, weight_.data, weight_.grad, bias_.grad, in_, out_);
  }
  // Half: the gradient rounded to the forward's dtype first (a float32 one, from a loss that
  // autocast ran in float32, times a GradScaler's scale: rounded only now, as torch rounds it
  // where the forward cast to half); d loss / d W and d loss / d b come out in half precision, as
  // torch's half matmul gives them, and are added to the float32 master gradients (autocast's
  // cast back to float32); d loss / d x is returned in half precision.
  const Tensor g = grad_out.to(compute_).to(kFloat32);
  Tensor grad_w(in_ * out_, kFloat32, device), grad_b(out_, kFloat32, device);
  const Tensor grad_x = linear_backward_f32(input_, g, half_weight_, grad_w, grad_b, in_, out_);
  weight_.grad += grad_w.to(compute_).to(kFloat32);
  bias_.grad += grad_b.to(compute_).to(kFloat32);
  return grad_x.to(compute_);
}

Linear::Saved Linear::take_saved() {
  Saved saved{std::move(input_), compute_, std::move(half_weight_)};
  input_ = Tensor();
  half_weight_ = Tensor();
  compute_ = kFloat32;
  return saved;
}

void Linear::restore_saved(Saved saved) {
  input_ = std::move(saved.input);
  compute_ = saved.compute;
  half_weight_ = std::move(saved.half_weight);
}

Tensor ReLU::forward(const Tensor& x) {
  // Half: max(x, 0) of a half value is that value, so widening, and rounding back, are exact.
  if (is_half(x.dtype())) return forward(x.to(kFloat32)).to(x.dtype());
  require_float32(x, "ReLU.forward's input");
  Tensor out(x.numel(), kFloat32, x.device());
  const float* in = x.data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (x.is_cuda()) {
    gpu::relu_forward(in, o, x.numel(), x.device().index());
  } else {
    for (std::int64_t k = 0; k < x.numel(); ++k) o[k] = nn_math::relu(in[k]);
  }
  input_ = x;
  return out;
}

Tensor ReLU::backward(const Tensor& grad_out) {
  if (is_half(grad_out.dtype())) return backward(grad_out.to(kFloat32)).to(grad_out.dtype());
  require_float32(grad_out, "ReLU.backward's gradient");
  require_same_device(grad_out, input_.device(), "ReLU.backward's gradient");
  if (grad_out.numel() != input_.numel()) {
    throw ConfigError("ReLU.backward: the gradient has " + std::to_string(grad_out.numel()) +
                      " values, the last forward had " + std::to_string(input_.numel()));
  }
  Tensor grad_x(grad_out.numel(), kFloat32, grad_out.device());
  const float* x = input_.data_ptr<float>();
  const float* g = grad_out.data_ptr<float>();
  float* gx = grad_x.data_ptr<float>();
  if (grad_out.is_cuda()) {
    gpu::relu_backward(x, g, gx, grad_out.numel(), grad_out.device().index());
  } else {
    for (std::int64_t k = 0; k < grad_out.numel(); ++k) gx[k] = nn_math::relu_grad(x[k], g[k]);
  }
  return grad_x;
}

BatchNorm1d::BatchNorm1d(std::int64_t features, Device device, ProcessGroup* sync_group, double eps,
                         double momentum)
    : features_(features), sync_group_(sync_group), eps_(eps), momentum_(momentum) {
  if (features < 1) throw ConfigError("BatchNorm1d needs at least 1 feature");
  const std::vector<float> ones(static_cast<std::size_t>(features), 1.0f);
  weight_ = {"weight", from_floats(ones, device), zeros(features, kFloat32, device)};
  bias_ = {"bias", zeros(features, kFloat32, device), zeros(features, kFloat32, device)};
  running_mean_ = zeros(features, kFloat32, device);
  running_var_ = from_floats(ones, device);
}

Tensor BatchNorm1d::forward(const Tensor& x) {
  const Device device = weight_.data.device();
  require_float32(x, "BatchNorm1d.forward's input");
  require_same_device(x, device, "BatchNorm1d.forward's input");
  const std::int64_t rows = whole_rows(x, features_, "BatchNorm1d.forward");
  const auto c_count = static_cast<std::size_t>(features_);
  std::vector<double> mean(c_count), invstd(c_count);
  if (training_) {
    // Sum and sum of squares per feature, and the row count: this rank's, or with SyncBatchNorm
    // every rank's (one all_reduce of 2C + 1 float64 values).
    Tensor stats(2 * features_ + 1, kFloat64, device);
    if (device.is_cuda()) {
      gpu::batchnorm_sums(x.data_ptr<float>(), nullptr, stats.data_ptr<double>(), rows, features_,
                          device.index());
    } else {
      cpu::batchnorm_sums(x.data_ptr<float>(), nullptr, stats.data_ptr<double>(), rows, features_);
    }
    stats.set(2 * features_, static_cast<double>(rows));
    if (sync_group_ != nullptr) sync_group_->all_reduce(stats, ReduceOp::SUM);
    const std::vector<double> s = stats.to_vector<double>();
    const double count = s[2 * c_count];
    if (count < 2) {
      throw ConfigError("BatchNorm1d in training needs more than 1 row in the batch" +
                        std::string(sync_group_ ? " (over all ranks)" : "") + ", got " +
                        std::to_string(static_cast<std::int64_t>(count)) +
                        ": the variance of one value is 0; use a larger batch");
    }
    std::vector<float> run_mean = running_mean_.to_vector<float>();
    std::vector<float> run_var = running_var_.to_vector<float>();
    for (std::size_t c = 0; c < c_count; ++c) {
      mean[c] = s[c] / count;
      const double var = std::max(s[c_count + c] / count - mean[c] * mean[c], 0.0);
      invstd[c] = 1.0 / std::sqrt(var + eps_);
      // torch keeps the unbiased variance in running_var.
      run_mean[c] = static_cast<float>((1 - momentum_) * run_mean[c] + momentum_ * mean[c]);
      run_var[c] =
          static_cast<float>((1 - momentum_) * run_var[c] + momentum_ * var * count / (count - 1));
    }
    running_mean_ = from_floats(run_mean, device);
    running_var_ = from_floats(run_var, device);
    rows_ = rows;
    global_rows_ = static_cast<std::int64_t>(count);
  } else {
    const std::vector<float> run_mean = running_mean_.to_vector<float>();
    const std::vector<float> run_var = running_var_.to_vector<float>();
    for (std::size_t c = 0; c < c_count; ++c) {
      mean[c] = run_mean[c];
      invstd[c] = 1.0 / std::sqrt(double{run_var[c]} + eps_);
    }
  }
  const Tensor mean_t = Tensor::from(mean, device);
  // backward needs the training forward's 1 / sqrt(var + eps); an evaluation in between must
  // not replace it.
  const Tensor invstd_t = Tensor::from(invstd, device);
  if (training_) invstd_ = invstd_t;
  Tensor out(x.numel(), kFloat32, device);
  if (training_) xhat_ = Tensor(x.numel(), kFloat32, device);
  float* xhat = training_ ? xhat_.data_ptr<float>() : nullptr;
  if (device.is_cuda()) {
    gpu::batchnorm_apply(x.data_ptr<float>(), mean_t.data_ptr<double>(),
                         invstd_t.data_ptr<double>(), weight_.data.data_ptr<float>(),
                         bias_.data.data_ptr<float>(), xhat, out.data_ptr<float>(), rows, features_,
                         device.index());
  } else {
    cpu::batchnorm_apply(x.data_ptr<float>(), mean_t.data_ptr<double>(),
                         invstd_t.data_ptr<double>(), weight_.data.data_ptr<float>(),
                         bias_.data.data_ptr<float>(), xhat, out.data_ptr<float>(), rows,
                         features_);
  }
  return out;
}

Tensor BatchNorm1d::backward(const Tensor& grad_out) {
  const Device device = weight_.data.device();
  require_float32(grad_out, "BatchNorm1d.backward's gradient");
  require_same_device(grad_out, device, "BatchNorm1d.backward's gradient");
  if (!training_ || grad_out.numel() != rows_ * features_) {
    throw ConfigError(
        "BatchNorm1d.backward needs the gradient of the last training-mode "
        "forward (" +
        std::to_string(rows_ * features_) + " values), got " + std::to_string(grad_out.numel()));
  }
  // sum(dy * xhat) and sum(dy) per feature: this rank's are the gradients of weight and bias;
  // their sum over every rank (SyncBatchNorm) is what the input's gradient needs.
  Tensor sums(2 * features_, kFloat64, device);
  if (device.is_cuda()) {
    gpu::batchnorm_sums(grad_out.data_ptr<float>(), xhat_.data_ptr<float>(),
                        sums.data_ptr<double>(), rows_, features_, device.index());
  } else {
    cpu::batchnorm_sums(grad_out.data_ptr<float>(), xhat_.data_ptr<float>(),
                        sums.data_ptr<double>(), rows_, features_);
  }
  const Tensor local = sums.to(kFloat32);
  weight_.grad += local.slice(0, features_);
  bias_.grad += local.slice(features_, features_);
  if (sync_group_ != nullptr) sync_group_->all_reduce(sums, ReduceOp::SUM);
  Tensor grad_x(grad_out.numel(), kFloat32, device);
  if (device.is_cuda()) {
    gpu::batchnorm_grad_input(grad_out.data_ptr<float>(), xhat_.data_ptr<float>(),
                              weight_.data.data_ptr<float>(), invstd_.data_ptr<double>(),
                              sums.data_ptr<double>(), static_cast<double>(global_rows_),
                              grad_x.data_ptr<float>(), rows_, features_, device.index());
  } else {
    cpu::batchnorm_grad_input(grad_out.data_ptr<float>(), xhat_.data_ptr<float>(),
                              weight_.data.data_ptr<float>(), invstd_.data_ptr<double>(),
                              sums.data_ptr<double>(), static_cast<double>(global_rows_),
                              grad_x.data_ptr<float>(), rows_, features_);
  }
  return grad_x;
}

CrossEntropy cross_entropy(const Tensor& logits, const Tensor& labels, std::int64_t classes) {
  // torch's autocast runs cross_entropy in float32: the half logits widened (exactly), the loss
  // and its gradient in float32. The gradient is rounded to half by the backward it goes to.
  if (is_half(logits.dtype())) return cross_entropy(logits.to(kFloat32), labels, classes);
  require_float32(logits, "cross_entropy's logits");
  if (classes < 1) {
    throw ConfigError("cross_entropy needs at least 1 class, got " + std::to_string(classes));
  }
  require_same_device(labels, logits.device(), "cross_entropy's labels");
  if (labels.dtype() != kInt64) {
    throw ConfigError("cross_entropy's labels must be int64 (dist::kInt64), got " +
                      std::string(dtype_name(labels.dtype())));
  }
  const std::int64_t rows = whole_rows(logits, classes, "cross_entropy");
  if (rows != labels.numel() || rows == 0) {
    throw ConfigError("cross_entropy: " + std::to_string(rows) + " rows of logits but " +
                      std::to_string(labels.numel()) + " labels; one label per row, and not 0");
  }
  for (std::int64_t label : labels.to_vector<std::int64_t>()) {
    if (label < 0 || label >= classes) {
      throw ConfigError("cross_entropy: label " + std::to_string(label) + " is outside [0, " +
                        std::to_string(classes - 1) + "]");
    }
  }
  const Device device = logits.device();
  CrossEntropy result{0, Tensor(logits.numel(), kFloat32, device), 0};
  Tensor loss(rows, kFloat64, device), correct(rows, kInt64, device);
  if (device.is_cuda()) {
    gpu::cross_entropy(logits.data_ptr<float>(), labels.data_ptr<std::int64_t>(),
                       result.grad.data_ptr<float>(), loss.data_ptr<double>(),
                       correct.data_ptr<std::int64_t>(), rows, classes, device.index());
  } else {
    cpu::cross_entropy(logits.data_ptr<float>(), labels.data_ptr<std::int64_t>(),
                       result.grad.data_ptr<float>(), loss.data_ptr<double>(),
                       correct.data_ptr<std::int64_t>(), rows, classes);
  }
  double total = 0;
  for (double l : loss.to_vector<double>()) total += l;
  result.loss = total / static_cast<double>(rows);
  for (std::int64_t c : correct.to_vector<std::int64_t>()) result.correct += c;
  return result;
}

MseLoss mse_loss(const Tensor& out, const Tensor& target) {
  require_float32(out, "mse_loss's input");
  require_float32(target, "mse_loss's target");
  require_same_device(target, out.device(), "mse_loss's target");
  if (out.numel() != target.numel() || out.numel() == 0) {
    throw ConfigError("mse_loss: the input has " + std::to_string(out.numel()) +
                      " values and the target " + std::to_string(target.numel()) +
                      "; they must be the same, and not 0");
  }
  const std::int64_t n = out.numel();
  MseLoss result{0, Tensor(n, kFloat32, out.device())};
  const float* o = out.data_ptr<float>();
  const float* t = target.data_ptr<float>();
  float* g = result.grad.data_ptr<float>();
  if (out.is_cuda()) {
    result.loss = gpu::mse_loss(o, t, g, n, out.device().index());
    return result;
  }
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = double{o[i]} - t[i];
    sum += d * d;
    g[i] = static_cast<float>(2.0 * d / static_cast<double>(n));
  }
  result.loss = sum / static_cast<double>(n);
  return result;
}

std::string fingerprint(const std::vector<Parameter*>& parameters,
                        const std::vector<Tensor*>& buffers) {
  util::Fnv1a hash;
  for (const Parameter* p : parameters) {
    const std::vector<float> values = p->data.to_vector<float>();
    hash.add(values.data(), values.size() * sizeof(float));
  }
  for (const Tensor* b : buffers) {
    const std::vector<float> values = b->to_vector<float>();
    hash.add(values.data(), values.size() * sizeof(float));
  }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash.value()));
  return text;
}

}  // namespace dist
