// dist/half.h — the element types of dist::kFloat16 and dist::kBFloat16: torch's c10::Half and
// c10::BFloat16, 16 bits each.
//
//   dist::Half h(0.1f);                // the float16 nearest to 0.1: 0.0999755859375
//   float f = static_cast<float>(h);   // exact: every float16 and bfloat16 is a float
//   dist::Half sum = h + h;            // computed in float, rounded once to float16
//
// Both keep a float32's sign bit and cut its precision; they differ in where the other 15 bits go:
//   float16  (IEEE binary16)  5 exponent bits, 10 mantissa bits: 11 significant bits (about 3
//            decimal digits), largest finite 65504, smallest normal 2^-14 (6.1e-5), subnormals
//            down to 2^-24 (6.0e-8). A gradient of at most 2^-25 becomes 0, one beyond 65504
//            inf: the reasons for loss scaling.
//   bfloat16 (brain float)    8 exponent bits, 7 mantissa bits: float32's range (largest finite
//            3.39e38) with 8 significant bits (about 2 decimal digits). It is the top half of a
//            float32: widening it back is a shift.
// g++ 12 has no std::float16_t or std::bfloat16_t (C++23, <stdfloat>), so each is a struct that
// holds the bits, as in torch.
//
// How torch converts, and these types do the same (c10/util/Half.h, BFloat16.h in torch 1.13):
//   * float -> float16/bfloat16 rounds to nearest, ties to even. A finite value at or past the
//     halfway point to the next power of two beyond the largest finite (65520 for float16)
//     becomes inf; a NaN stays a NaN (these write c10's scalar NaNs: 0x7E00 with the sign for
//     float16, 0x7FC0 for bfloat16; torch's vectorised kernels may write other NaN bits);
//   * float16/bfloat16 -> float is exact;
//   * double -> float16/bfloat16 goes through float: two roundings, as c10 converts (it has no
//     direct double constructor), so 1 + 2^-11 + 2^-40 becomes 1, not the nearer 1 + 2^-10;
//   * arithmetic converts both operands to float, computes, and rounds the result to 16 bits.
//     For + - * / that equals rounding the exact result once (float's 24 significant bits are at
//     least 2p + 2 for float16's p = 11 and bfloat16's 8), so it is IEEE arithmetic in 16 bits.
// Unlike c10's constructors, these are explicit (`dist::Half h = 1.5f;` does not compile): a
// rounding should be visible where it happens. Reading back is implicit, as in torch, so a Half
// compares and prints as the float it is.
//
// Taught in: chapter 13 (DDP in practice: half precision).
// Built in: this header; dist::Tensor's kFloat16/kBFloat16 (dist/tensor.h) store them.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace dist {

namespace detail {

// float -> binary16 bits, rounded to nearest even.
constexpr std::uint16_t half_bits_from_float(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN: a quiet NaN, sign kept
  if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // |value| >= 65520, or inf: inf
  if (magnitude >= 0x38800000u) {
    // A normal float16 (|value| >= 2^-14): drop 13 mantissa bits, rounding half to even (a
    // carry into the exponent is the right answer), and move the exponent bias from 127 to 15.
    const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return sign | static_cast<std::uint16_t>((rounded >> 13) - ((127u - 15u) << 10));
  }
  // A subnormal float16 or zero: the result is round(|value| * 2^24) units of 2^-24. |value| is
  // M * 2^(E - 150) for the float's biased exponent E and 24-bit significand M, so the units are
  // M / 2^(126 - E); below 2^-25 (E < 102) that is under one half.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) return sign;
  const std::uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126 - exponent;  // 14 .. 24
  std::uint32_t units = significand >> shift;
  const std::uint32_t rest = significand & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (units & 1u) != 0)) ++units;
  return sign | static_cast<std::uint16_t>(units);  // 0x400, the smallest normal, if it carried
}

constexpr float float_from_half_bits(std::uint16_t half) {
  const std::uint32_t sign = static_cast<std::uint32_t>(half & 0x8000u) << 16;
  const std::uint32_t exponent = (half >> 10) & 0x1fu;
  const std::uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa units of 2^-24, exact in a float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
}

// float -> bfloat16 bits: the float's top 16 bits, rounded to nearest even on the 16 dropped.
constexpr std::uint16_t bfloat16_bits_from_float(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;  // NaN, as c10 writes it
  return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

constexpr float float_from_bfloat16_bits(std::uint16_t bfloat16) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bfloat16) << 16);
}

}  // namespace detail

struct Half {
  std::uint16_t bits = 0;

  Half() = default;  // +0
  constexpr explicit Half(float value) : bits(detail::half_bits_from_float(value)) {}
  static constexpr Half from_bits(std::uint16_t bits) {
    Half h;
    h.bits = bits;
    return h;
  }
  constexpr operator float() const { return detail::float_from_half_bits(bits); }
};

struct BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;  // +0
  constexpr explicit BFloat16(float value) : bits(detail::bfloat16_bits_from_float(value)) {}
  static constexpr BFloat16 from_bits(std::uint16_t bits) {
    BFloat16 b;
    b.bits = bits;
    return b;
  }
  constexpr operator float() const { return detail::float_from_bfloat16_bits(bits); }
};

static_assert(sizeof(Half) == 2 && std::is_trivially_copyable_v<Half>);
static_assert(sizeof(BFloat16) == 2 && std::is_trivially_copyable_v<BFloat16>);

// Either 16-bit type.
template <typename T>
concept SixteenBitFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Arithmetic in 16 bits: computed in float, rounded once (see above). With a float or a double, a
// Half reads as a float and the result is that wider type, as with c10::Half.
template <SixteenBitFloat T>
constexpr T operator+(T a, T b) {
  return T(static_cast<float>(a) + static_cast<float>(b));
}
template <SixteenBitFloat T>
constexpr T operator-(T a, T b) {
  return T(static_cast<float>(a) - static_cast<float>(b));
}
template <SixteenBitFloat T>
constexpr T operator*(T a, T b) {
  return T(static_cast<float>(a) * static_cast<float>(b));
}
template <SixteenBitFloat T>
constexpr T operator/(T a, T b) {
  return T(static_cast<float>(a) / static_cast<float>(b));
}
template <SixteenBitFloat T>
constexpr T operator-(T a) {  // flips the sign bit, NaN's too
  return T::from_bits(static_cast<std::uint16_t>(a.bits ^ 0x8000u));
}

// Whether T is a floating element type: float, double, Half or BFloat16 (std::is_floating_point
// knows only the first two).
template <typename T>
inline constexpr bool is_floating_element_v = std::is_floating_point_v<T> || SixteenBitFloat<T>;

}  // namespace dist
