// The six dtypes in one table: how torch and C++ code spell each one, its size and whether it is
// floating, each written once; and the dtype functions of dist/tensor.h that read a row
// (element_size, is_floating_point, dtype_name, detail::dtype_constant_name and dtype_cpp_name) and
// torch's promotion rule. Which C++ type holds a dtype's elements is not in the table but in
// visit_dtype (dist/tensor.h), the one place that pairs the two; the table takes size and
// floating-or-not from that type.
// What a tensor does with its dtype (storage, casts, arithmetic) is in tensor.cpp, printing in
// tensor_repr.cpp.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <string_view>
#include <type_traits>

#include "dist/tensor.h"

namespace dist {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view torch_name;     // "torch.float32": dtype_name(), so every message and repr
  std::string_view constant_name;  // "dist::kFloat32": for hints that show the fix
  std::string_view cpp_name;       // "float": how data_ptr<T>() spells the element type
  std::size_t size;                // bytes per element
  bool is_floating;
};

// A row from the names it is spelled by; size and floating-or-not come from the element type that
// visit_dtype pairs with `dtype`.
constexpr DTypeInfo describe(DType dtype, std::string_view torch_name,
                             std::string_view constant_name, std::string_view cpp_name) {
  return visit_dtype(dtype, [&]<typename T>(std::type_identity<T>) {
    return DTypeInfo{.dtype = dtype,
                     .torch_name = torch_name,
                     .constant_name = constant_name,
                     .cpp_name = cpp_name,
                     .size = sizeof(T),
                     .is_floating = is_floating_element_v<T>};
  });
}

constexpr DTypeInfo kDTypes[] = {
    describe(kFloat32, "torch.float32", "dist::kFloat32", "float"),
    describe(kFloat64, "torch.float64", "dist::kFloat64", "double"),
    describe(kInt32, "torch.int32", "dist::kInt32", "std::int32_t"),
    describe(kInt64, "torch.int64", "dist::kInt64", "std::int64_t"),
    describe(kFloat16, "torch.float16", "dist::kFloat16", "dist::Half"),
    describe(kBFloat16, "torch.bfloat16", "dist::kBFloat16", "dist::BFloat16"),
};

// nullptr for a value outside the enum.
const DTypeInfo* find_row(DType dtype) {
  const DTypeInfo* row = std::ranges::find(kDTypes, dtype, &DTypeInfo::dtype);
  return row == std::end(kDTypes) ? nullptr : row;
}

}  // namespace

namespace detail {

void throw_invalid_dtype(DType dtype, std::string_view who) {
  throw Error(std::string(who) + "invalid dtype value " + std::to_string(static_cast<int>(dtype)) +
              "; use one of dist::kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16");
}

}  // namespace detail

namespace {

// The row of `dtype`; throws dist::Error for a value outside the enum (only a cast makes one).
const DTypeInfo& dtype_info(DType dtype) {
  if (const DTypeInfo* row = find_row(dtype)) return *row;
  detail::throw_invalid_dtype(dtype, "dist::Tensor: ");
}

}  // namespace

namespace detail {

std::string_view dtype_constant_name(DType dtype) {
  return dtype_info(dtype).constant_name;
}

std::string_view dtype_cpp_name(DType dtype) {
  return dtype_info(dtype).cpp_name;
}

}  // namespace detail

std::size_t element_size(DType dtype) {
  return dtype_info(dtype).size;
}

// Asking is never an error: a value outside the enum is simply not floating.
bool is_floating_point(DType dtype) {
  const DTypeInfo* row = find_row(dtype);
  return row != nullptr && row->is_floating;
}

std::string_view dtype_name(DType dtype) {
  return dtype_info(dtype).torch_name;
}

DType promote_types(DType a, DType b) {
  // Floating beats integer whatever the widths (int64 + float16 is float16); within a kind, the
  // wider type wins. float16 and bfloat16 have the same width and neither holds the other (one
  // has the range, the other the precision): torch promotes the pair to float32.
  if (is_floating_point(a) != is_floating_point(b)) return is_floating_point(a) ? a : b;
  if ((a == kFloat16 && b == kBFloat16) || (a == kBFloat16 && b == kFloat16)) return kFloat32;
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace dist
