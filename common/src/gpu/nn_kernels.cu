// The kernels of dist/nn.h on a GPU (cuda preset). See gpu.h for the contract: the same sums as
// the CPU loops in nn.cpp, in double and in the same index order, each kernel finished when its
// function returns. They are written to be read, not to be fast: one thread per output value,
// and the loss reduced by one block, so the order of additions (and so every bit) is fixed.
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

}  // namespace

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
