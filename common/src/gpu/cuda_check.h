// The one way the library reports a failed CUDA runtime call (internal, cuda preset only).
//
//   check_cuda(cudaMemcpy(...), "copying 8 bytes to cuda:0");
//   // dist::Error: copying 8 bytes to cuda:0 failed: <CUDA's words>. Check `nvidia-smi`, ...
//
// It clears CUDA's sticky "last error" that the failed call left, so the next, unrelated CUDA
// call does not report it again, and says what to check. Out of memory gets a hint of its own.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace dist::gpu {

void check_cuda(cudaError_t rc, const std::string& what);

}  // namespace dist::gpu
