// The kernels of dist/nn.h on a GPU (cuda preset). See gpu.h for the contract: the same sums as
// the CPU loops in nn.cpp, in double and in the same index order, each kernel finished when its
// function returns. They are written to be read, not to be fast: one thread per output value,
// and the loss reduced by one block, so the order of additions (and so every bit) is fixed.
// This file is compiled with --fmad=false (common/CMakeLists.txt): nvcc would otherwise fuse
// a * b + c into one rounding (SGD's p - lr * g, BatchNorm's weight * xhat + bias), and the
// results would differ from the CPU's in the last bit. Adam's fused multiply-adds, which torch's
// CPU kernels have too, are written out (nn_math::fused_multiply_add: __fmaf_rn here).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "dist/check.h"
#include "gpu/cuda_check.h"
#include "gpu/device_guard.h"
#include "gpu/gpu.h"
#include "nn/nn_math.h"

namespace dist::gpu {
namespace {

constexpr int kThreads = 256;

unsigned int blocks_for(std::int64_t n) {
  return static_cast<unsigned int>((n + kThreads - 1) / kThreads);
}

// Waits for the kernel just launched and turns a launch or run error into a dist::Error.
void finish(const char* what, int device) {
  cudaError_t rc = cudaGetLastError();
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(cudaStreamLegacy);
  check_cuda(rc, std::string(what) + " on cuda:" + std::to_string(device));
}

// One thread per output value; the arithmetic is nn_math.h's, which the CPU loops share.
__global__ void linear_forward_kernel(const float* x, const float* weight, const float* bias,
                                      float* out, std::int64_t rows, std::int64_t in,
                                      std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < rows * out_features) out[k] = nn_math::linear_out(x, weight, bias, k, in, out_features);
}

// One thread per weight (j, i); the thread of i == 0 also does bias j: one writer per value.
__global__ void linear_grad_params_kernel(const float* x, const float* grad_out, float* grad_weight,
                                          float* grad_bias, std::int64_t rows, std::int64_t in,
                                          std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= out_features * in) return;
  grad_weight[k] =
      nn_math::linear_grad_weight(x, grad_out, grad_weight[k], k, rows, in, out_features);
  if (k % in == 0) {
    const std::int64_t j = k / in;
    grad_bias[j] = nn_math::linear_grad_bias(grad_out, grad_bias[j], j, rows, out_features);
  }
}

__global__ void linear_grad_input_kernel(const float* grad_out, const float* weight, float* grad_x,
                                         std::int64_t rows, std::int64_t in,
                                         std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < rows * in) grad_x[k] = nn_math::linear_grad_input(grad_out, weight, k, in, out_features);
}

// One block: grad[i] = 2 (out[i] - target[i]) / n, and *sum = sum_i (out[i] - target[i])^2. Each
// thread sums a fixed stride of the elements, then the partial sums meet in a fixed tree: the
// result does not depend on timing (it can differ from the CPU's index-order sum in the last bits).
__global__ void mse_kernel(const float* out, const float* target, float* grad, std::int64_t n,
                           double* sum) {
  __shared__ double partial[kThreads];
  double acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = double{out[i]} - target[i];
    acc += d * d;
    grad[i] = static_cast<float>(2.0 * d / static_cast<double>(n));
  }
  partial[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum = partial[0];
}

__global__ void sgd_kernel(float* param, const float* grad, std::int64_t n, float lr) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) param[k] = nn_math::sgd(param[k], grad[k], lr);
}

__global__ void sgd_momentum_kernel(float* param, const float* grad, float* buf, bool first,
                                    std::int64_t n, float lr, float momentum, float keep,
                                    bool nesterov) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) {
    param[k] =
        nn_math::sgd_momentum(param[k], grad[k], buf[k], first, lr, momentum, keep, nesterov);
  }
}

// Adam's scalars travel by value: one copy per launch, in the kernel's parameter space.
__global__ void adam_kernel(float* param, const float* grad, float* m, float* v, std::int64_t n,
                            nn_math::AdamScalars scalars) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) param[k] = nn_math::adam(param[k], grad[k], m[k], v[k], scalars);
}

__global__ void relu_forward_kernel(const float* x, float* out, std::int64_t n) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = nn_math::relu(x[k]);
}

__global__ void relu_backward_kernel(const float* x, const float* g, float* gx, std::int64_t n) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) gx[k] = nn_math::relu_grad(x[k], g[k]);
}

// One thread per feature, rows in order.
__global__ void batchnorm_sums_kernel(const float* a, const float* b, double* sums,
                                      std::int64_t rows, std::int64_t features) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c < features) nn_math::batchnorm_sums(a, b, sums, c, rows, features);
}

__global__ void batchnorm_apply_kernel(const float* x, const double* mean, const double* invstd,
                                       const float* weight, const float* bias, float* xhat,
                                       float* out, std::int64_t rows, std::int64_t features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < rows * features) {
    nn_math::batchnorm_apply(x, mean, invstd, weight, bias, xhat, out, k, features);
  }
}

__global__ void batchnorm_grad_input_kernel(const float* g, const float* xhat, const float* weight,
                                            const double* invstd, const double* sums, double count,
                                            float* gx, std::int64_t rows, std::int64_t features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < rows * features) {
    gx[k] = nn_math::batchnorm_grad_input(g, xhat, weight, invstd, sums, count, k, features);
  }
}

// One thread per row.
__global__ void cross_entropy_kernel(const float* logits, const std::int64_t* labels, float* grad,
                                     double* loss, std::int64_t* correct, std::int64_t rows,
                                     std::int64_t classes) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r < rows) nn_math::cross_entropy_row(logits, labels, grad, loss, correct, r, rows, classes);
}

}  // namespace

void relu_forward(const float* x, float* out, std::int64_t n, int device) {
  if (n == 0) return;
  const DeviceGuard guard(device);
  relu_forward_kernel<<<blocks_for(n), kThreads>>>(x, out, n);
  finish("ReLU.forward", device);
}

void relu_backward(const float* x, const float* grad_out, float* grad_x, std::int64_t n,
                   int device) {
  if (n == 0) return;
  const DeviceGuard guard(device);
  relu_backward_kernel<<<blocks_for(n), kThreads>>>(x, grad_out, grad_x, n);
  finish("ReLU.backward", device);
}

void batchnorm_sums(const float* a, const float* b, double* sums, std::int64_t rows,
                    std::int64_t features, int device) {
  const DeviceGuard guard(device);
  batchnorm_sums_kernel<<<blocks_for(features), kThreads>>>(a, b, sums, rows, features);
  finish("BatchNorm1d (sums)", device);
}

void batchnorm_apply(const float* x, const double* mean, const double* invstd, const float* weight,
                     const float* bias, float* xhat, float* out, std::int64_t rows,
                     std::int64_t features, int device) {
  if (rows == 0) return;
  const DeviceGuard guard(device);
  batchnorm_apply_kernel<<<blocks_for(rows * features), kThreads>>>(x, mean, invstd, weight, bias,
                                                                    xhat, out, rows, features);
  finish("BatchNorm1d (normalise)", device);
}

void batchnorm_grad_input(const float* grad_out, const float* xhat, const float* weight,
                          const double* invstd, const double* sums, double count, float* grad_x,
                          std::int64_t rows, std::int64_t features, int device) {
  if (rows == 0) return;
  const DeviceGuard guard(device);
  batchnorm_grad_input_kernel<<<blocks_for(rows * features), kThreads>>>(
      grad_out, xhat, weight, invstd, sums, count, grad_x, rows, features);
  finish("BatchNorm1d.backward", device);
}

void cross_entropy(const float* logits, const std::int64_t* labels, float* grad, double* loss,
                   std::int64_t* correct, std::int64_t rows, std::int64_t classes, int device) {
  if (rows == 0) return;
  const DeviceGuard guard(device);
  cross_entropy_kernel<<<blocks_for(rows), kThreads>>>(logits, labels, grad, loss, correct, rows,
                                                       classes);
  finish("cross_entropy", device);
}

void linear_forward(const float* x, const float* weight, const float* bias, float* out,
                    std::int64_t batch, std::int64_t in, std::int64_t out_features, int device) {
  if (batch == 0) return;
  const DeviceGuard guard(device);
  linear_forward_kernel<<<blocks_for(batch * out_features), kThreads>>>(x, weight, bias, out, batch,
                                                                        in, out_features);
  finish("Linear.forward", device);
}

void linear_backward(const float* x, const float* grad_out, const float* weight, float* grad_weight,
                     float* grad_bias, float* grad_x, std::int64_t batch, std::int64_t in,
                     std::int64_t out_features, int device) {
  const DeviceGuard guard(device);
  linear_grad_params_kernel<<<blocks_for(out_features * in), kThreads>>>(
      x, grad_out, grad_weight, grad_bias, batch, in, out_features);
  finish("Linear.backward (parameter gradients)", device);
  if (batch == 0) return;
  linear_grad_input_kernel<<<blocks_for(batch * in), kThreads>>>(grad_out, weight, grad_x, batch,
                                                                 in, out_features);
  finish("Linear.backward (input gradient)", device);
}

double mse_loss(const float* out, const float* target, float* grad, std::int64_t n, int device) {
  const DeviceGuard guard(device);
  const std::string where = "mse_loss on cuda:" + std::to_string(device);
  double* sum = nullptr;
  check_cuda(cudaMalloc(&sum, sizeof(double)), where + ": allocating 8 bytes");
  double host = 0;
  try {
    mse_kernel<<<1, kThreads>>>(out, target, grad, n, sum);
    finish("mse_loss", device);
    check_cuda(cudaMemcpy(&host, sum, sizeof(double), cudaMemcpyDeviceToHost),
               where + ": reading the sum");
  } catch (...) {
    cudaFree(sum);
    throw;
  }
  cudaFree(sum);
  return host / static_cast<double>(n);
}

void sgd_step(float* param, const float* grad, std::int64_t n, float lr, int device) {
  if (n == 0) return;
  const DeviceGuard guard(device);
  sgd_kernel<<<blocks_for(n), kThreads>>>(param, grad, n, lr);
  finish("SGD.step", device);
}

void sgd_momentum_step(float* param, const float* grad, float* buf, bool first, std::int64_t n,
                       float lr, float momentum, float one_minus_dampening, bool nesterov,
                       int device) {
  if (n == 0) return;
  const DeviceGuard guard(device);
  sgd_momentum_kernel<<<blocks_for(n), kThreads>>>(param, grad, buf, first, n, lr, momentum,
                                                   one_minus_dampening, nesterov);
  finish("SGD.step", device);
}

void adam_step(float* param, const float* grad, float* m, float* v, std::int64_t n,
               const nn_math::AdamScalars& scalars, int device) {
  if (n == 0) return;
  const DeviceGuard guard(device);
  adam_kernel<<<blocks_for(n), kThreads>>>(param, grad, m, v, n, scalars);
  finish("Adam.step", device);
}

}  // namespace dist::gpu
