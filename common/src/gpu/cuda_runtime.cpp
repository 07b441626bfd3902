// dist::gpu on the CUDA runtime (the cuda preset). See gpu.h.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <string>

#include "dist/check.h"
#include "gpu/cuda_check.h"
#include "gpu/device_guard.h"
#include "gpu/gpu.h"

namespace dist::gpu {

const Census& census() {
  static const Census taken = [] {
    Census c;
    c.built_with_cuda = true;
    c.driver_loaded = ::access("/proc/driver/nvidia/version", F_OK) == 0;
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    c.runtime_error = static_cast<int>(rc);  // what backends/choice.cpp explains
    if (rc != cudaSuccess) {
      c.runtime_error_text = cudaGetErrorString(rc);
      cudaGetLastError();  // clear it, so the next CUDA call does not report it again
    } else {
      c.device_count = count;
    }
    return c;
  }();
  return taken;
}

static_assert(kCudaErrorInsufficientDriver == cudaErrorInsufficientDriver);
static_assert(kCudaErrorNoDevice == cudaErrorNoDevice);

void check_cuda(cudaError_t rc, const std::string& what) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();
  if (rc == cudaErrorMemoryAllocation) {
    throw Error(what + " failed: the GPU is out of memory (CUDA says: " + cudaGetErrorString(rc) +
                "); use smaller tensors or fewer ranks per GPU");
  }
  throw Error(what + " failed: " + std::string(cudaGetErrorString(rc)) +
              ". Check `nvidia-smi`, and that every rank uses its own GPU (LOCAL_RANK)");
}

namespace {

// Whether GPU `device` already has its (primary) context. Since CUDA 12, cudaSetDevice creates
// the context of the device it selects, so switching "back" to a device the thread never used
// (a thread that chose nothing reports device 0) would put a context of several hundred MiB on
// GPU 0 for every rank of the machine. The driver's answer is reached through the runtime, so no
// link to libcuda is needed.
bool context_exists(int device) {
  using GetState = int (*)(int, unsigned int*, int*);  // cuDevicePrimaryCtxGetState
  static const GetState get_state = []() -> GetState {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                         cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    return reinterpret_cast<GetState>(fn);
  }();
  if (get_state == nullptr) return true;  // cannot tell: restore, as a plain guard would
  unsigned int flags = 0;
  int active = 0;
  return get_state(device, &flags, &active) == 0 && active != 0;
}

// Clears the error state that our own failed calls left, but never an error the program's code
// left pending before (its next cudaGetLastError() must still see it).
class KeepTheProgramsErrors {
 public:
  KeepTheProgramsErrors() : clean_(cudaPeekAtLastError() == cudaSuccess) {}
  ~KeepTheProgramsErrors() {
    if (clean_) cudaGetLastError();
  }
  KeepTheProgramsErrors(const KeepTheProgramsErrors&) = delete;
  KeepTheProgramsErrors& operator=(const KeepTheProgramsErrors&) = delete;

 private:
  bool clean_;
};

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  restore_ = device != previous_ && context_exists(previous_);
  if (device != previous_) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
  }
}

DeviceGuard::~DeviceGuard() {
  if (!restore_) return;
  const KeepTheProgramsErrors keep;
  cudaSetDevice(previous_);
}

void* allocate(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  if (const Census& c = census(); device >= c.device_count) {
    throw ConfigError(c.device_count == 0
                          ? "a tensor on cuda:" + std::to_string(device) + " needs a GPU, but " +
                                no_gpu_reason(c)
                          : "cuda:" + std::to_string(device) + " does not exist: this process " +
                                "sees " + std::to_string(c.device_count) +
                                " GPU(s), cuda:0 to cuda:" + std::to_string(c.device_count - 1));
  }
  const DeviceGuard guard(device);
  void* ptr = nullptr;
  check_cuda(cudaMalloc(&ptr, bytes),
             "allocating " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device));
  // cudaMemset is asynchronous; finish it, so the memory reads as zeros on every stream.
  cudaError_t rc = cudaMemset(ptr, 0, bytes);
  if (rc == cudaSuccess) rc = cudaStreamSynchronize(cudaStreamLegacy);
  if (rc != cudaSuccess) {
    cudaFree(ptr);
    check_cuda(
        rc, "zero-filling " + std::to_string(bytes) + " bytes on cuda:" + std::to_string(device));
  }
  return ptr;
}

void release(void* ptr, int device) noexcept {
  if (ptr == nullptr) return;
  const KeepTheProgramsErrors keep;
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  const bool restore = device != previous && context_exists(previous);
  if (device != previous) cudaSetDevice(device);
  cudaFree(ptr);
  if (restore) cudaSetDevice(previous);
}

void copy(void* dst, const void* src, std::size_t bytes, int device) {
  if (bytes == 0) return;
  const DeviceGuard guard(device);
  // cudaMemcpyDefault works out each side from the pointer (unified addressing). cudaMemcpy is
  // not fully synchronous in every direction (a host-to-device copy from pageable memory may
  // return before the DMA ends, a device-to-device copy does not wait at all), so wait for the
  // default stream it ran on: then the copy is complete for every stream, NCCL's included.
  check_cuda(
      cudaMemcpy(dst, src, bytes, cudaMemcpyDefault),
      "copying " + std::to_string(bytes) + " bytes to or from cuda:" + std::to_string(device));
  check_cuda(cudaStreamSynchronize(cudaStreamLegacy),
             "waiting for a copy to or from cuda:" + std::to_string(device));
}

}  // namespace dist::gpu
