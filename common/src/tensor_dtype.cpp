// The dtype table of tensor_dtype.h, and the public dtype functions of dist/tensor.h: the ones
// that read a dtype's row (element_size, is_floating_point, dtype_name) and torch's promotion rule.
// What a tensor does with its dtype (storage, casts, arithmetic) is in tensor.cpp, printing in
// tensor_repr.cpp.
#include "tensor_dtype.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <type_traits>

namespace dist {
namespace {

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
                     .is_floating = std::is_floating_point_v<T>};
  });
}

constexpr DTypeInfo kDTypes[] = {
    describe(kFloat32, "torch.float32", "dist::kFloat32", "float"),
    describe(kFloat64, "torch.float64", "dist::kFloat64", "double"),
    describe(kInt32, "torch.int32", "dist::kInt32", "std::int32_t"),
    describe(kInt64, "torch.int64", "dist::kInt64", "std::int64_t"),
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
              "; use one of dist::kFloat32, kFloat64, kInt32, kInt64");
}

}  // namespace detail

const DTypeInfo& dtype_info(DType dtype) {
  if (const DTypeInfo* row = find_row(dtype)) return *row;
  detail::throw_invalid_dtype(dtype, "dist::Tensor: ");
}

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
  // Floating beats integer whatever the widths (int64 + float32 is float32); within a kind, the
  // wider type wins.
  if (is_floating_point(a) != is_floating_point(b)) return is_floating_point(a) ? a : b;
  return element_size(a) >= element_size(b) ? a : b;
}

}  // namespace dist
