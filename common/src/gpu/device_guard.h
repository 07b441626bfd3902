// DeviceGuard (internal, cuda preset only): makes GPU `device` current for one scope and restores
// the caller's device after, so library calls never change which GPU the program's own CUDA code
// talks to. One exception, as in torch: a caller's device that has no context yet (a thread that
// never chose a GPU reports device 0) is not restored, because switching to it would create a
// context there; the thread stays on `device`.
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
  bool restore_ = false;
};

}  // namespace dist::gpu
