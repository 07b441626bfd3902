// Why a process has no usable GPU, in words (see gpu.h). Shared by both presets: the census
// behind it comes from cuda_runtime.cpp or no_cuda.cpp.
#include <cstdlib>
#include <string>

#include "gpu/gpu.h"

namespace dist::gpu {

std::string no_gpu_reason(const Census& c) {
  if (!c.built_with_cuda) {
    return "this program was built without the GPU path (a CPU-only preset); build it with "
           "`cmake --workflow --preset cuda` on a machine with the CUDA toolkit";
  }
  if (c.device_count > 0) return "";
  // Without any NVIDIA driver the CUDA runtime says "driver version is insufficient", which sends
  // people looking for a driver upgrade they do not need.
  if (!c.driver_loaded) {
    return "no NVIDIA driver is loaded on this machine (/proc/driver/nvidia is missing), so it "
           "has no usable GPU";
  }
  if (c.runtime_error == kCudaErrorInsufficientDriver) {
    return "the NVIDIA driver is older than this CUDA toolkit needs (CUDA says: " +
           c.runtime_error_text + "); upgrade the driver";
  }
  if (c.runtime_error == kCudaErrorNoDevice || c.runtime_error == 0) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    return std::string("the NVIDIA driver is loaded but this process sees no GPU") +
           (visible != nullptr
                ? " (CUDA_VISIBLE_DEVICES=\"" + std::string(visible) + "\" hides them?)"
                : "") +
           "; check `nvidia-smi`";
  }
  return "CUDA cannot use this machine's GPUs (CUDA says: " + c.runtime_error_text +
         "); check `nvidia-smi`";
}

}  // namespace dist::gpu
