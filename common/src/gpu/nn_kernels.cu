// The kernels of dist/nn.h on a GPU (cuda preset). See gpu.h for the contract: the same sums as
// the CPU loops in nn.cpp, in double and in the same index order, each kernel finished when its
// function returns. They are written to be read, not to be fast: one thread per output value,
// and the loss reduced by one block, so the order of additions (and so every bit) is fixed.
// This file is compiled with --fmad=false (common/CMakeLists.txt): nvcc would otherwise fuse
// a * b + c into one rounding (SGD's p - lr * g, BatchNorm's weight * xhat + bias), and the
// results would differ from the CPU's in the last bit.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "dist/check.h"
#include "gpu/device_guard.h"
#include "gpu/gpu.h"

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
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw Error(std::string(what) + " on cuda:" + std::to_string(device) +
                " failed: " + cudaGetErrorString(rc) +
                ". Check `nvidia-smi`, and that every rank uses its own GPU (LOCAL_RANK)");
  }
}

// out[n][j] = bias[j] + sum_i x[n][i] * weight[j][i]; one thread per (n, j).
__global__ void linear_forward_kernel(const float* x, const float* weight, const float* bias,
                                      float* out, std::int64_t batch, std::int64_t in,
                                      std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= batch * out_features) return;
  const std::int64_t n = k / out_features, j = k % out_features;
  double acc = bias[j];
  for (std::int64_t i = 0; i < in; ++i) acc += double{x[n * in + i]} * weight[j * in + i];
  out[k] = static_cast<float>(acc);
}

// grad_weight[j][i] += sum_n grad_out[n][j] * x[n][i], and for i == 0 also
// grad_bias[j] += sum_n grad_out[n][j]; one thread per (j, i).
__global__ void linear_grad_params_kernel(const float* x, const float* grad_out, float* grad_weight,
                                          float* grad_bias, std::int64_t batch, std::int64_t in,
                                          std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= out_features * in) return;
  const std::int64_t j = k / in, i = k % in;
  double dw = 0;
  for (std::int64_t n = 0; n < batch; ++n)
    dw += double{grad_out[n * out_features + j]} * x[n * in + i];
  grad_weight[k] = static_cast<float>(grad_weight[k] + dw);
  if (i == 0) {
    double db = 0;
    for (std::int64_t n = 0; n < batch; ++n) db += grad_out[n * out_features + j];
    grad_bias[j] = static_cast<float>(grad_bias[j] + db);
  }
}

// grad_x[n][i] = sum_j grad_out[n][j] * weight[j][i]; one thread per (n, i).
__global__ void linear_grad_input_kernel(const float* grad_out, const float* weight, float* grad_x,
                                         std::int64_t batch, std::int64_t in,
                                         std::int64_t out_features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= batch * in) return;
  const std::int64_t n = k / in, i = k % in;
  double acc = 0;
  for (std::int64_t j = 0; j < out_features; ++j)
    acc += double{grad_out[n * out_features + j]} * weight[j * in + i];
  grad_x[k] = static_cast<float>(acc);
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
  if (k < n) param[k] -= lr * grad[k];
}

__global__ void relu_forward_kernel(const float* x, float* out, std::int64_t n) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) out[k] = x[k] > 0 ? x[k] : 0.0f;
}

__global__ void relu_backward_kernel(const float* x, const float* g, float* gx, std::int64_t n) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k < n) gx[k] = x[k] > 0 ? g[k] : 0.0f;
}

// One thread per feature, rows in order: the same sums, in the same order, as the CPU loop.
__global__ void batchnorm_sums_kernel(const float* a, const float* b, double* sums,
                                      std::int64_t rows, std::int64_t features) {
  const std::int64_t c = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (c >= features) return;
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

__global__ void batchnorm_apply_kernel(const float* x, const double* mean, const double* invstd,
                                       const float* weight, const float* bias, float* xhat,
                                       float* out, std::int64_t rows, std::int64_t features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= rows * features) return;
  const std::int64_t c = k % features;
  const double h = (x[k] - mean[c]) * invstd[c];
  if (xhat != nullptr) xhat[k] = static_cast<float>(h);
  out[k] = static_cast<float>(weight[c] * h + bias[c]);
}

__global__ void batchnorm_grad_input_kernel(const float* g, const float* xhat, const float* weight,
                                            const double* invstd, const double* sums, double count,
                                            float* gx, std::int64_t rows, std::int64_t features) {
  const std::int64_t k = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (k >= rows * features) return;
  const std::int64_t c = k % features;
  const double mean_dy_xhat = sums[c] / count, mean_dy = sums[features + c] / count;
  gx[k] = static_cast<float>(weight[c] * invstd[c] * (g[k] - mean_dy - xhat[k] * mean_dy_xhat));
}

// One thread per row: a log-sum-exp shifted by the row's largest logit, in double.
__global__ void cross_entropy_kernel(const float* logits, const std::int64_t* labels, float* grad,
                                     double* loss, std::int64_t* correct, std::int64_t rows,
                                     std::int64_t classes) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (r >= rows) return;
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
    grad[r * classes + k] = static_cast<float>((p - (k == label ? 1.0 : 0.0)) / rows);
  }
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
  double* sum = nullptr;
  cudaError_t rc = cudaMalloc(&sum, sizeof(double));
  if (rc != cudaSuccess) {
    cudaGetLastError();
    throw Error("mse_loss on cuda:" + std::to_string(device) +
                ": allocating 8 bytes failed: " + cudaGetErrorString(rc));
  }
  double host = 0;
  try {
    mse_kernel<<<1, kThreads>>>(out, target, grad, n, sum);
    finish("mse_loss", device);
    rc = cudaMemcpy(&host, sum, sizeof(double), cudaMemcpyDeviceToHost);
    if (rc != cudaSuccess) {
      cudaGetLastError();
      throw Error("mse_loss on cuda:" + std::to_string(device) +
                  ": reading the sum failed: " + cudaGetErrorString(rc));
    }
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

}  // namespace dist::gpu
