// Tensor plumbing the backends share (see common.h).
#include "backends/common.h"

namespace dist::backends {

Tensor concatenate(const std::vector<Tensor>& inputs, Device device) {
  std::int64_t total = 0;
  for (const Tensor& t : inputs) total += t.numel();
  Tensor flat(total, inputs.empty() ? kFloat32 : inputs.front().dtype(), device);
  std::int64_t at = 0;
  for (const Tensor& t : inputs) {
    flat.assign_slice(at, t);
    at += t.numel();
  }
  return flat;
}

void split(const Tensor& flat, std::int64_t n, int size, std::vector<Tensor>& outputs) {
  outputs.resize(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) outputs[static_cast<std::size_t>(r)] = flat.slice(r * n, n);
}

}  // namespace dist::backends
