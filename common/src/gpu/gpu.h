// The few CUDA runtime services the library needs (internal), behind plain functions so that the
// rest of the library compiles without CUDA headers. Two implementations, chosen by CMake:
// cuda_runtime.cpp (the cuda preset) and no_cuda.cpp (every other preset), whose functions
// explain how to build the GPU path instead of doing anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dist::nn_math {
struct AdamScalars;  // nn_math.h
}  // namespace dist::nn_math

namespace dist::gpu {

// What this process can see, taken once and cached: the answers cannot change while it runs
// (CUDA_VISIBLE_DEVICES is read when CUDA starts).
struct Census {
  bool built_with_cuda = false;
  bool driver_loaded = false;  // /proc/driver/nvidia exists: the kernel module is loaded
  int runtime_error = 0;       // cudaGetDeviceCount's error code; 0 when it succeeded
  std::string runtime_error_text;
  int device_count = 0;
};
const Census& census();

// Why the census leaves this process without any GPU, as a sentence that says what to do
// (census.cpp); "" when it sees at least one.
std::string no_gpu_reason(const Census& census);

// cudaGetDeviceCount's answers that mean "nothing to use here" (checked against cuda_runtime_api.h
// in cuda_runtime.cpp), named so that code without CUDA headers can explain them.
inline constexpr int kCudaErrorInsufficientDriver = 35;
inline constexpr int kCudaErrorNoDevice = 100;

// Device memory. allocate() returns zero-filled memory on GPU `device` (nullptr for 0 bytes);
// release() never throws. Both keep the calling thread's current device unchanged.
void* allocate(std::size_t bytes, int device);
void release(void* ptr, int device) noexcept;

// Copies `bytes` between host memory and GPU memory (either way, or GPU to GPU; `device` is the
// GPU involved, the destination's if both are) and returns only when the copy has finished:
// after it, any CUDA stream (NCCL's included) sees the data.
void copy(void* dst, const void* src, std::size_t bytes, int device);

// The kernels of dist/nn.h on GPU `device` (nn_kernels.cu), each finished when it returns. Shapes
// and meanings are those of the CPU loops in nn.cpp: a batch of `batch` rows, row-major; every
// sum is taken in double, in a fixed order, so a run repeats bit for bit.
void linear_forward(const float* x, const float* weight, const float* bias, float* out,
                    std::int64_t batch, std::int64_t in, std::int64_t out_features, int device);
void linear_backward(const float* x, const float* grad_out, const float* weight, float* grad_weight,
                     float* grad_bias, float* grad_x, std::int64_t batch, std::int64_t in,
                     std::int64_t out_features, int device);
double mse_loss(const float* out, const float* target, float* grad, std::int64_t n, int device);
void sgd_step(float* param, const float* grad, std::int64_t n, float lr, int device);
// nn_math::sgd_momentum on every value: updates the momentum buffer `buf` and the parameter.
void sgd_momentum_step(float* param, const float* grad, float* buf, bool first, std::int64_t n,
                       float lr, float momentum, float one_minus_dampening, bool nesterov,
                       int device);
// nn_math::adam on every value (dist::Adam): updates exp_avg `m`, exp_avg_sq `v` and the parameter.
void adam_step(float* param, const float* grad, float* m, float* v, std::int64_t n,
               const nn_math::AdamScalars& scalars, int device);
void relu_forward(const float* x, float* out, std::int64_t n, int device);
void relu_backward(const float* x, const float* grad_out, float* grad_x, std::int64_t n,
                   int device);
// sums[c] = sum_r a[r][c] * (b ? b[r][c] : 1) and sums[C + c] = sum_r a[r][c]^2 (b == nullptr) or
// sum_r a[r][c] (b != nullptr): BatchNorm's per-feature reductions, into float64 `sums` (2C).
void batchnorm_sums(const float* a, const float* b, double* sums, std::int64_t rows,
                    std::int64_t features, int device);
// out = weight * (x - mean) * invstd + bias, and xhat = (x - mean) * invstd when xhat != nullptr.
void batchnorm_apply(const float* x, const double* mean, const double* invstd, const float* weight,
                     const float* bias, float* xhat, float* out, std::int64_t rows,
                     std::int64_t features, int device);
// dx = weight * invstd * (dy - sum_dy / count - xhat * sum_dy_xhat / count), with the sums
// (sum_dy_xhat first, then sum_dy: batchnorm_sums(dy, xhat) order) over `count` rows.
void batchnorm_grad_input(const float* grad_out, const float* xhat, const float* weight,
                          const double* invstd, const double* sums, double count, float* grad_x,
                          std::int64_t rows, std::int64_t features, int device);
// Per row: loss[r] = logsumexp(logits[r]) - logits[r][label], grad = (softmax - one_hot) / rows,
// correct[r] = 1 when the label's logit is the largest (the first largest, as argmax).
void cross_entropy(const float* logits, const std::int64_t* labels, float* grad, double* loss,
                   std::int64_t* correct, std::int64_t rows, std::int64_t classes, int device);

}  // namespace dist::gpu
