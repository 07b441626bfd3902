// torch's repr of a tensor (internal): dist::Tensor::repr() is repr_as_if_on(the values on the
// host, the tensor's device). Separate so that tests/unit/tensor_repr_driver can check the
// device suffix against torch on a machine without a GPU.
#pragma once

#include <string>

#include "dist/device.h"
#include "dist/tensor.h"

namespace dist {

// `host` must be on the CPU; `shown` is the device the repr names.
std::string repr_as_if_on(const Tensor& host, Device shown);

}  // namespace dist
