// +, -, * as torch computes them (internal): integers wrap modulo 2^bits. Signed overflow is
// undefined in C++, so integers go through their unsigned type, where wrapping is the defined
// behaviour; floating-point values are left to IEEE arithmetic. Tensor arithmetic and the Gloo
// backend's reductions both use these, so a SUM over ranks wraps exactly as `a + b` does.
#pragma once

#include <functional>
#include <type_traits>

namespace dist::util {

template <typename Op>
struct Wrapping {
  template <typename T>
  T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(Op{}(static_cast<U>(a), static_cast<U>(b)));
    } else {
      return Op{}(a, b);
    }
  }
};
using WrappingAdd = Wrapping<std::plus<>>;
using WrappingSubtract = Wrapping<std::minus<>>;
using WrappingMultiply = Wrapping<std::multiplies<>>;

}  // namespace dist::util
