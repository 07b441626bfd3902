// dist::gpu without CUDA (every preset but cuda). See gpu.h. There is no GPU to report, and
// asking for GPU memory is a configuration error that says how to build the GPU path.
#include <string>

#include "dist/check.h"
#include "gpu/gpu.h"

namespace dist::gpu {
namespace {

[[noreturn]] void no_gpu_path(const std::string& what) {
  throw ConfigError(what + " needs the GPU path, which this build does not have (it was made " +
                    "with a CPU-only preset): build with `cmake --workflow --preset cuda` on a " +
                    "machine with the CUDA toolkit, or keep tensors on the CPU");
}

}  // namespace

const Census& census() {
  static const Census none{};  // built_with_cuda = false, no devices
  return none;
}

void* allocate(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  no_gpu_path("a tensor on cuda:" + std::to_string(device));
}

void release(void*, int) noexcept {}

void copy(void*, const void*, std::size_t bytes, int device) {
  if (bytes == 0) return;
  no_gpu_path("copying to or from cuda:" + std::to_string(device));
}

// A GPU tensor cannot exist in this build (allocate() refuses), so these are never reached with
// one; they are here so that dist/nn.h links, and they say why if they are.
void linear_forward(const float*, const float*, const float*, float*, std::int64_t, std::int64_t,
                    std::int64_t, int device) {
  no_gpu_path("Linear.forward on cuda:" + std::to_string(device));
}
void linear_backward(const float*, const float*, const float*, float*, float*, float*, std::int64_t,
                     std::int64_t, std::int64_t, int device) {
  no_gpu_path("Linear.backward on cuda:" + std::to_string(device));
}
double mse_loss(const float*, const float*, float*, std::int64_t, int device) {
  no_gpu_path("mse_loss on cuda:" + std::to_string(device));
}
void sgd_step(float*, const float*, std::int64_t, float, int device) {
  no_gpu_path("SGD.step on cuda:" + std::to_string(device));
}
void sgd_momentum_step(float*, const float*, float*, bool, std::int64_t, float, float, float, bool,
                       int device) {
  no_gpu_path("SGD.step on cuda:" + std::to_string(device));
}
void adam_step(float*, const float*, float*, float*, std::int64_t, const nn_math::AdamScalars&,
               int device) {
  no_gpu_path("Adam.step on cuda:" + std::to_string(device));
}

void relu_forward(const float*, float*, std::int64_t, int device) {
  no_gpu_path("ReLU.forward on cuda:" + std::to_string(device));
}
void relu_backward(const float*, const float*, float*, std::int64_t, int device) {
  no_gpu_path("ReLU.backward on cuda:" + std::to_string(device));
}
void batchnorm_sums(const float*, const float*, double*, std::int64_t, std::int64_t, int device) {
  no_gpu_path("BatchNorm1d on cuda:" + std::to_string(device));
}
void batchnorm_apply(const float*, const double*, const double*, const float*, const float*, float*,
                     float*, std::int64_t, std::int64_t, int device) {
  no_gpu_path("BatchNorm1d on cuda:" + std::to_string(device));
}
void batchnorm_grad_input(const float*, const float*, const float*, const double*, const double*,
                          double, float*, std::int64_t, std::int64_t, int device) {
  no_gpu_path("BatchNorm1d on cuda:" + std::to_string(device));
}
void cross_entropy(const float*, const std::int64_t*, float*, double*, std::int64_t*, std::int64_t,
                   std::int64_t, int device) {
  no_gpu_path("cross_entropy on cuda:" + std::to_string(device));
}

}  // namespace dist::gpu
