// The four dtypes in one table (internal): how torch and C++ code spell each one, its size and
// whether it is floating, each written once. Which C++ type holds a dtype's elements is not in the
// table but in visit_dtype (dist/tensor.h), the one place that pairs the two; the table takes size
// and floating-or-not from that type. tensor_dtype.cpp holds the table, tensor.cpp's messages read
// it.
#pragma once

#include <cstddef>
#include <string_view>

#include "dist/tensor.h"

namespace dist {

struct DTypeInfo {
  DType dtype;
  std::string_view torch_name;     // "torch.float32": dtype_name(), so every message and repr
  std::string_view constant_name;  // "dist::kFloat32": for hints that show the fix
  std::string_view cpp_name;       // "float": how data_ptr<T>() spells the element type
  std::size_t size;                // bytes per element
  bool is_floating;
};

// The row of `dtype`; throws dist::Error for a value outside the enum (only a cast makes one).
const DTypeInfo& dtype_info(DType dtype);

}  // namespace dist
