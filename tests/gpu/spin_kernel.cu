// A kernel that keeps the GPU's default stream busy for a while (tests only): the stand-in for
// a rank that never reaches a collective, so the NCCL watchdog has something to time out on.
#include <cuda_runtime.h>

#include "spin_kernel.h"

namespace {

__device__ unsigned long long global_nanoseconds() {
  unsigned long long ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void spin_for(unsigned long long nanoseconds) {
  const unsigned long long start = global_nanoseconds();
  while (global_nanoseconds() - start < nanoseconds) __nanosleep(10000);
}

}  // namespace

namespace dist::testing {

bool spin_on_default_stream(std::chrono::milliseconds duration) {
  spin_for<<<1, 1>>>(static_cast<unsigned long long>(duration.count()) * 1000000ull);
  return cudaGetLastError() == cudaSuccess;
}

bool wait_for_the_gpu() {
  return cudaDeviceSynchronize() == cudaSuccess;
}

}  // namespace dist::testing
