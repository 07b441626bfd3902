// DeviceGuard (internal, cuda preset only): makes GPU `device` current for one scope and restores
// the caller's device after, so library calls never change which GPU the program's own CUDA code
// talks to.
#pragma once

namespace dist::gpu {

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace dist::gpu
