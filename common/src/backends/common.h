// Tensor plumbing the backends share (internal). The argument checks and the naming of calls are
// ProcessGroup's (common/src/process_group.cpp), so a backend never repeats them.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/tensor.h"

namespace dist::backends {

// inputs[0], inputs[1], ... end to end, in one tensor on `device`.
Tensor concatenate(const std::vector<Tensor>& inputs, Device device);

// The reverse: outputs[r] = the r-th run of `n` elements of `flat`, for `size` runs.
void split(const Tensor& flat, std::int64_t n, int size, std::vector<Tensor>& outputs);

}  // namespace dist::backends
