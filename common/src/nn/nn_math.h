// The arithmetic of dist/nn.h and dist/optim.h, one output value at a time (internal). The CPU
// loops in nn.cpp and optim.cpp and the CUDA kernels in gpu/nn_kernels.cu all call these functions,
// so both devices compute every value with the same operations in the same order: in double,
// rounded once to float32, or in float32 where torch computes in float32 (the optimizers). The
// kernels are built without implicit fused multiply-adds, which would round differently; Adam's
// three are asked for by name (fused_multiply_add). Shapes: a batch of `rows` rows, row-major;
// weight[j][i] at j * in + i.
#pragma once

#include <math.h>  // exp and log, declared for device code by nvcc as well

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define DIST_HOST_DEVICE __host__ __device__
#else
#define DIST_HOST_DEVICE
#endif

namespace dist::nn_math {

// Linear: out[n][j] = bias[j] + sum_i x[n][i] * weight[j][i], for k = n * out + j.
DIST_HOST_DEVICE inline float linear_out(const float* x, const float* weight, const float* bias,
                                         std::int64_t k, std::int64_t in, std::int64_t out) {
  const std::int64_t n = k / out, j = k % out;
  double acc = bias[j];
  for (std::int64_t i = 0; i < in; ++i) acc += double{x[n * in + i]} * weight[j * in + i];
  return static_cast<float>(acc);
}

// grad_weight[j][i] + sum_n grad_out[n][j] * x[n][i], for k = j * in + i.
DIST_HOST_DEVICE inline float linear_grad_weight(const float* x, const float* grad_out,
                                                 float current, std::int64_t k, std::int64_t rows,
                                                 std::int64_t in, std::int64_t out) {
  const std::int64_t j = k / in, i = k % in;
  double dw = 0;
  for (std::int64_t n = 0; n < rows; ++n) dw += double{grad_out[n * out + j]} * x[n * in + i];
  return static_cast<float>(current + dw);
}

// grad_bias[j] + sum_n grad_out[n][j].
DIST_HOST_DEVICE inline float linear_grad_bias(const float* grad_out, float current, std::int64_t j,
                                               std::int64_t rows, std::int64_t out) {
  double db = 0;
  for (std::int64_t n = 0; n < rows; ++n) db += grad_out[n * out + j];
  return static_cast<float>(current + db);
}

// grad_x[n][i] = sum_j grad_out[n][j] * weight[j][i], for k = n * in + i.
DIST_HOST_DEVICE inline float linear_grad_input(const float* grad_out, const float* weight,
                                                std::int64_t k, std::int64_t in, std::int64_t out) {
  const std::int64_t n = k / in, i = k % in;
  double acc = 0;
  for (std::int64_t j = 0; j < out; ++j) acc += double{grad_out[n * out + j]} * weight[j * in + i];
  return static_cast<float>(acc);
}

DIST_HOST_DEVICE inline float relu(float x) {
  return x > 0 ? x : 0.0f;
}
DIST_HOST_DEVICE inline float relu_grad(float x, float g) {
  return x > 0 ? g : 0.0f;
}

// Feature c's two sums over the rows, rows in order: with b == nullptr, sum a and sum a^2
// (forward); else sum a * b and sum a (backward: a = grad_out, b = xhat).
DIST_HOST_DEVICE inline void batchnorm_sums(const float* a, const float* b, double* sums,
                                            std::int64_t c, std::int64_t rows,
                                            std::int64_t features) {
  double first = 0, second = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double v = a[r * features + c];
    if (b != nullptr) {
      first += v * b[r * features + c];
      second += v;
    } else {
      first += v;
      second += v * v;
    }
  }
  sums[c] = first;
  sums[features + c] = second;
}

// out = weight * xhat + bias with xhat = (x - mean) * invstd, for value k; xhat kept if asked.
DIST_HOST_DEVICE inline void batchnorm_apply(const float* x, const double* mean,
                                             const double* invstd, const float* weight,
                                             const float* bias, float* xhat, float* out,
                                             std::int64_t k, std::int64_t features) {
  const std::int64_t c = k % features;
  const double h = (x[k] - mean[c]) * invstd[c];
  if (xhat != nullptr) xhat[k] = static_cast<float>(h);
  out[k] = static_cast<float>(weight[c] * h + bias[c]);
}

// dx = weight * invstd * (dy - mean(dy) - xhat * mean(dy * xhat)), the means over `count` rows
// (all ranks' for SyncBatchNorm), from sums = [sum dy * xhat, sum dy].
DIST_HOST_DEVICE inline float batchnorm_grad_input(const float* grad_out, const float* xhat,
                                                   const float* weight, const double* invstd,
                                                   const double* sums, double count, std::int64_t k,
                                                   std::int64_t features) {
  const std::int64_t c = k % features;
  const double mean_dy_xhat = sums[c] / count, mean_dy = sums[features + c] / count;
  return static_cast<float>(weight[c] * invstd[c] *
                            (grad_out[k] - mean_dy - xhat[k] * mean_dy_xhat));
}

// Row r of cross_entropy: loss = logsumexp(logits) - logits[label] (shifted by the largest logit),
// grad = (softmax - one_hot(label)) / rows, correct = 1 when the first largest logit is the label.
DIST_HOST_DEVICE inline void cross_entropy_row(const float* logits, const std::int64_t* labels,
                                               float* grad, double* loss, std::int64_t* correct,
                                               std::int64_t r, std::int64_t rows,
                                               std::int64_t classes) {
  const float* row = logits + r * classes;
  std::int64_t best = 0;
  for (std::int64_t k = 1; k < classes; ++k) best = row[k] > row[best] ? k : best;
  double total = 0;
  for (std::int64_t k = 0; k < classes; ++k) total += exp(double{row[k]} - row[best]);
  const std::int64_t label = labels[r];
  loss[r] = log(total) + row[best] - row[label];
  correct[r] = best == label ? 1 : 0;
  for (std::int64_t k = 0; k < classes; ++k) {
    const double p = exp(double{row[k]} - row[best]) / total;
    grad[r * classes + k] =
        static_cast<float>((p - (k == label ? 1.0 : 0.0)) / static_cast<double>(rows));
  }
}

// a * b + c rounded once, as a fused multiply-add: called by name, on the host (std::fmaf) and
// in a kernel (__fmaf_rn), so that it is fused on every build and never anywhere else. Where torch
// fuses (Adam below), this is how the same bits come out; the kernels' file is built with
// --fmad=false, and the CPU build does not contract, so every other a * b + c rounds twice.
DIST_HOST_DEVICE inline float fused_multiply_add(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fmaf(a, b, c);
#endif
}

// SGD as torch 1.13's _single_tensor_sgd writes it: param.add_(d_p, alpha=-lr), and with momentum
// buf.mul_(momentum).add_(d_p, alpha=1 - dampening) and, for nesterov, d_p.add(buf,
// alpha=momentum). torch's add with alpha is a fused multiply-add in its vectorised CPU kernel
// (on an AVX2 CPU: a + alpha * b rounded once; 8,802 of 100,000 values differ from rounding the
// product first, checked with torch 1.13 here) and in its CUDA kernel (nvcc contracts it), so it
// is fused here too. mul_ rounds on its own. Updates `buf` and returns the new parameter.
DIST_HOST_DEVICE inline float sgd(float param, float grad, float lr) {
  return fused_multiply_add(grad, -lr, param);
}

DIST_HOST_DEVICE inline float sgd_momentum(float param, float grad, float& buf, bool first,
                                           float lr, float momentum, float one_minus_dampening,
                                           bool nesterov) {
  if (first) {
    buf = grad;
  } else {
    const float decayed = buf * momentum;
    buf = fused_multiply_add(grad, one_minus_dampening, decayed);
  }
  const float direction = nesterov ? fused_multiply_add(buf, momentum, grad) : buf;
  return sgd(param, direction, lr);
}

// The scalars of one Adam step, worked out once per step in double as torch's Python does, then
// each rounded to float32 as a tensor op rounds its scalar argument (see Adam::step in optim.cpp).
struct AdamScalars {
  float beta1, one_minus_beta1;  // 1 - beta1 computed in double, then rounded
  float beta2, one_minus_beta2;
  float eps;
  float weight_decay;           // 0: none (torch skips the add)
  float bias_correction2_sqrt;  // sqrt(1 - beta2^step), in double, then rounded
  float minus_step_size;        // -lr / (1 - beta1^step), in double, then rounded
};

// Adam, one value, as torch 1.13's _single_tensor_adam computes it on the CPU (amsgrad and
// maximize off): every operation rounds to float32 once, and the three that torch's CPU kernels
// fuse are fused here too. Updates the moments m and v and returns the new parameter.
DIST_HOST_DEVICE inline float adam(float param, float grad, float& m, float& v,
                                   const AdamScalars& s) {
  // grad = grad.add(param, alpha=weight_decay)
  if (s.weight_decay != 0) grad = fused_multiply_add(param, s.weight_decay, grad);
  // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
  m = fused_multiply_add(s.one_minus_beta1, grad, m * s.beta1);
  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2): value * grad rounded first
  const float scaled = s.one_minus_beta2 * grad;
  v = fused_multiply_add(scaled, grad, v * s.beta2);
  // denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
  const float denom = sqrtf(v) / s.bias_correction2_sqrt + s.eps;
  // param.addcdiv_(exp_avg, denom, value=-step_size): (value * exp_avg) / denom + param
  return param + (s.minus_step_size * m) / denom;
}

}  // namespace dist::nn_math
