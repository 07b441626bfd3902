// dist::Device and the torch.cuda-style questions (dist/device.h).
#include "dist/device.h"

#include <string>

#include "dist/check.h"
#include "dist/env.h"
#include "gpu/gpu.h"

namespace dist {

Device Device::cuda(int index) {
  if (index < 0) {
    throw ConfigError("dist::Device::cuda(" + std::to_string(index) +
                      "): a GPU index is 0 or more (cuda:0 is the first GPU this process sees)");
  }
  return Device(Type::kCUDA, index);
}

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    const std::string index(text.substr(5));
    return cuda(parse_int("the device \"" + std::string(text) + "\"", index, 0, 1 << 16));
  }
  throw ConfigError("unknown device \"" + std::string(text) +
                    "\": use cpu, cuda or cuda:N (N = the GPU's index, e.g. LOCAL_RANK)");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index_);
}

bool cuda_is_available() {
  return gpu::census().device_count > 0;
}

int cuda_device_count() {
  return gpu::census().device_count;
}

std::string cuda_unavailable_reason() {
  return gpu::no_gpu_reason(gpu::census());
}

}  // namespace dist
