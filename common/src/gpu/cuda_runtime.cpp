// dist::gpu on the CUDA runtime (the cuda preset). See gpu.h.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <string>

#include "backends/choice.h"
#include "dist/check.h"
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

namespace {

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

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (device != previous_)
    check_cuda(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
}

DeviceGuard::~DeviceGuard() {
  cudaSetDevice(previous_);
}

void* allocate(std::size_t bytes, int device) {
  if (bytes == 0) return nullptr;
  if (const Census& c = census(); device >= c.device_count) {
    throw ConfigError(c.device_count == 0
                          ? "a tensor on cuda:" + std::to_string(device) + " needs a GPU, but " +
                                backends::no_gpu_reason(c)
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
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  cudaSetDevice(device);
  cudaFree(ptr);
  cudaSetDevice(previous);
  cudaGetLastError();
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
