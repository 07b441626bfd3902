// gpu_probe — is there a GPU this machine can really use?
//
// `./tutorial doctor` runs it to decide which backend the chapters will use. It asks the CUDA
// runtime for devices, prints each one, and runs one tiny kernel on each (add 1 to 1024 numbers)
// to prove that the driver, the toolkit and the device work together: a device that is listed
// but cannot run our code is not usable. Exit codes: 0 usable, 77 no usable GPU (with the reason),
// 1 a device that misbehaved.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int kExitNoGpu = 77;

__global__ void add_one(int* values, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) values[i] += 1;
}

// Runs add_one on `device` and checks every element; prints what went wrong otherwise.
bool kernel_runs_on(int device) {
  constexpr int n = 1024;
  std::vector<int> host(n);
  for (int i = 0; i < n; ++i) host[i] = i;
  int* dev = nullptr;
  cudaError_t rc = cudaSetDevice(device);
  if (rc == cudaSuccess) rc = cudaMalloc(&dev, n * sizeof(int));
  if (rc == cudaSuccess) rc = cudaMemcpy(dev, host.data(), n * sizeof(int), cudaMemcpyHostToDevice);
  if (rc == cudaSuccess) {
    add_one<<<(n + 255) / 256, 256>>>(dev, n);
    rc = cudaGetLastError();
  }
  if (rc == cudaSuccess) rc = cudaMemcpy(host.data(), dev, n * sizeof(int), cudaMemcpyDeviceToHost);
  if (dev != nullptr) cudaFree(dev);
  if (rc != cudaSuccess) {
    std::printf("gpu_probe: device %d cannot run a kernel: %s\n", device, cudaGetErrorString(rc));
    return false;
  }
  for (int i = 0; i < n; ++i) {
    if (host[i] != i + 1) {
      std::printf("gpu_probe: device %d computed %d for element %d, expected %d\n", device, host[i],
                  i, i + 1);
      return false;
    }
  }
  return true;
}

// Why there is no device, in the words a user can act on. Without any NVIDIA driver the CUDA
// runtime says "driver version is insufficient", which sends people looking for an upgrade.
const char* no_gpu_reason(cudaError_t rc) {
  if (rc == cudaSuccess) return "the CUDA runtime found 0 devices";
  const bool driver_loaded = ::access("/proc/driver/nvidia/version", F_OK) == 0;
  if (rc == cudaErrorInsufficientDriver && driver_loaded) {
    return "the NVIDIA driver is older than this CUDA toolkit needs: upgrade the driver";
  }
  if (rc == cudaErrorInsufficientDriver || rc == cudaErrorNoDevice) {
    return "no NVIDIA driver or device on this machine";
  }
  return cudaGetErrorString(rc);
}

}  // namespace

int main() {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess || count == 0) {
    std::printf("gpu_probe: no usable GPU: %s\n", no_gpu_reason(rc));
    return kExitNoGpu;
  }
  int usable = 0;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    cudaGetDeviceProperties(&prop, d);
    const bool ok = kernel_runs_on(d);
    std::printf("gpu_probe: device %d: %s, compute capability %d.%d, %.1f GiB: %s\n", d, prop.name,
                prop.major, prop.minor, static_cast<double>(prop.totalGlobalMem) / (1 << 30),
                ok ? "usable" : "NOT usable");
    usable += ok;
  }
  std::printf("gpu_probe: %d of %d devices usable\n", usable, count);
  return usable == count ? 0 : 1;
}
