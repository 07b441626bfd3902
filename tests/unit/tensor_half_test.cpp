// float16 and bfloat16 (dist/half.h, dist/tensor.h): rounding to nearest even against a reference
// that shares no code with the library's, and the tensor behaviour torch 1.13 shows for them
// (each expected value below is what torch 1.13 gives; tensor_cast_parity.py and
// tensor_repr_parity.py check thousands more against torch itself).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dist/half.h"
#include "dist/tensor.h"

namespace {

using dist::BFloat16;
using dist::Half;
using dist::Tensor;

constexpr double kInf = std::numeric_limits<double>::infinity();

template <typename E = dist::Error, typename F>
std::string ThrownMessage(F&& body) {
  try {
    body();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, needle, haystack)

// The value of a float16 bit pattern, decoded from the IEEE binary16 definition in double
// arithmetic: (-1)^s * 2^(e-15) * (1 + m/1024), or 2^-14 * m/1024 when e == 0.
double Binary16Value(std::uint16_t bits) {
  const int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
  const double sign = (bits & 0x8000) != 0 ? -1 : 1;
  if (e == 0x1f) return m == 0 ? sign * kInf : std::nan("");
  if (e == 0) return sign * std::ldexp(m / 1024.0, -14);
  return sign * std::ldexp(1 + m / 1024.0, e - 15);
}

// The value of a bfloat16 bit pattern: (-1)^s * 2^(e-127) * (1 + m/128), or 2^-126 * m/128.
double Binary16BrainValue(std::uint16_t bits) {
  const int e = (bits >> 7) & 0xff, m = bits & 0x7f;
  const double sign = (bits & 0x8000) != 0 ? -1 : 1;
  if (e == 0xff) return m == 0 ? sign * kInf : std::nan("");
  if (e == 0) return sign * std::ldexp(m / 128.0, -126);
  return sign * std::ldexp(1 + m / 128.0, e - 127);
}

// Round to nearest, ties to even, by search: the two neighbours of |x| among the non-negative
// finite patterns 0..max_finite (increasing with their bits), the nearer one, the even one on a
// tie; past the largest finite, inf once |x| reaches the midpoint to the next power of two.
template <typename Decode>
std::uint16_t NearestEven(double x, std::uint16_t max_finite, double overflow_at, Decode decode) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (a >= overflow_at) return sign | static_cast<std::uint16_t>(max_finite + 1);  // inf's bits
  std::uint16_t lo = 0, hi = max_finite;  // decode(lo) <= a < decode(hi + 1) after the search
  while (lo < hi) {
    const auto mid = static_cast<std::uint16_t>((lo + hi + 1) / 2);
    if (decode(mid) <= a) {
      lo = mid;
    } else {
      hi = static_cast<std::uint16_t>(mid - 1);
    }
  }
  if (lo == max_finite) return sign | lo;  // between max_finite and the overflow point
  const double below = a - decode(lo), above = decode(lo + 1) - a;
  const bool up = above < below || (above == below && (lo & 1) != 0);
  return sign | static_cast<std::uint16_t>(up ? lo + 1 : lo);
}

std::uint16_t ReferenceHalf(float x) {
  return NearestEven(x, 0x7bff, 65520.0, Binary16Value);
}
std::uint16_t ReferenceBFloat16(float x) {
  // The midpoint between the largest finite bfloat16 (2^128 - 2^120) and 2^128.
  return NearestEven(x, 0x7f7f, std::ldexp(1.0, 128) - std::ldexp(1.0, 119), Binary16BrainValue);
}

// Floats that probe every kind of rounding: every bit pattern near the ties and the ends of the
// ranges, and random ones.
std::vector<float> ProbeFloats() {
  std::vector<float> out;
  for (float base : {1.0f, 1.5f, 2048.0f, 65504.0f, 65520.0f, 0x1p-14f, 0x1p-24f, 0x1p-25f,
                     0x1p-126f, 3.0e38f, std::numeric_limits<float>::max()}) {
    float v = base;
    for (int i = 0; i < 300; ++i) v = std::nextafter(v, 0.0f);
    for (int i = 0; i < 600; ++i) {
      out.push_back(v);
      out.push_back(-v);
      v = std::nextafter(v, std::numeric_limits<float>::infinity());
    }
  }
  std::mt19937 rng(31);
  std::uniform_int_distribution<std::uint32_t> any_bits;
  for (int i = 0; i < 200000; ++i) {
    const float f = std::bit_cast<float>(any_bits(rng));
    if (!std::isnan(f)) out.push_back(f);
  }
  // Every kind of tie: the midpoint between random neighbours of each format (exact in a
  // float), and the floats on either side of it.
  std::uniform_int_distribution<std::uint16_t> half_bits(0, 0x7bfe), brain_bits(0, 0x7f7e);
  for (int i = 0; i < 20000; ++i) {
    const auto h = half_bits(rng), b = brain_bits(rng);
    const double mids[] = {(Binary16Value(h) + Binary16Value(h + 1)) / 2,
                           (Binary16BrainValue(b) + Binary16BrainValue(b + 1)) / 2};
    for (double mid : mids) {
      const auto m = static_cast<float>(mid);
      for (float f : {m, std::nextafter(m, 0.0f), std::nextafter(m, INFINITY)}) {
        out.push_back(f);
        out.push_back(-f);
      }
    }
  }
  for (int e = -30; e <= 17; ++e) {  // float16's whole range, densely
    std::uniform_real_distribution<float> in(std::ldexp(1.0f, e), std::ldexp(1.0f, e + 1));
    for (int i = 0; i < 2000; ++i) out.push_back(in(rng));
  }
  return out;
}

// --- Rounding, element by element ---

TEST(HalfRounding, MatchesRoundToNearestEvenEverywhere) {
  int wrong_half = 0, wrong_bfloat16 = 0;
  for (float f : ProbeFloats()) {
    if (Half(f).bits != ReferenceHalf(f) && ++wrong_half <= 5) {
      ADD_FAILURE() << "float16 of " << f << " (" << std::hexfloat << f << std::defaultfloat
                    << "): got 0x" << std::hex << Half(f).bits << ", expected 0x"
                    << ReferenceHalf(f);
    }
    if (BFloat16(f).bits != ReferenceBFloat16(f) && ++wrong_bfloat16 <= 5) {
      ADD_FAILURE() << "bfloat16 of " << f << " (" << std::hexfloat << f << std::defaultfloat
                    << "): got 0x" << std::hex << BFloat16(f).bits << ", expected 0x"
                    << ReferenceBFloat16(f);
    }
  }
  EXPECT_EQ(wrong_half, 0);
  EXPECT_EQ(wrong_bfloat16, 0);
}

TEST(HalfRounding, TiesGoToTheEvenNeighbour) {
  EXPECT_EQ(Half(1.0f + 0x1p-11f).bits, 0x3c00);         // halfway 1 .. 1+2^-10: down to even 1
  EXPECT_EQ(Half(1.0f + 3 * 0x1p-11f).bits, 0x3c02);     // halfway, up to even 1+2^-9
  EXPECT_EQ(Half(0x1p-25f).bits, 0x0000);                // half the smallest subnormal: 0
  EXPECT_EQ(Half(3 * 0x1p-25f).bits, 0x0002);            // 1.5 units of 2^-24: 2 units
  EXPECT_EQ(Half(0x1p-14f - 0x1p-25f).bits, 0x0400);     // the top subnormal tie carries to normal
  EXPECT_EQ(BFloat16(1.0f + 0x1p-8f).bits, 0x3f80);      // halfway 1 .. 1+2^-7: down to 1
  EXPECT_EQ(BFloat16(1.0f + 3 * 0x1p-8f).bits, 0x3f82);  // up to even
}

TEST(HalfRounding, OverflowIsInfAndNaNStaysNaN) {
  EXPECT_EQ(Half(65504.0f).bits, 0x7bff);   // the largest finite float16
  EXPECT_EQ(Half(65519.99f).bits, 0x7bff);  // below the midpoint to 2^16
  EXPECT_EQ(Half(65520.0f).bits, 0x7c00);   // the midpoint: inf (even)
  EXPECT_EQ(Half(-1e6f).bits, 0xfc00);      // -inf
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // inf, as in torch
  EXPECT_EQ(Half(-0.0f).bits, 0x8000);
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(std::nanf("")))));
  EXPECT_TRUE(std::isnan(static_cast<float>(BFloat16(-std::nanf("")))));
  EXPECT_EQ(Half(std::nanf("")).bits, 0x7e00);  // c10's NaNs
  EXPECT_EQ(BFloat16(-std::nanf("")).bits, 0x7fc0);
}

TEST(HalfRounding, ReadingBackIsExact) {
  for (std::uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto b = static_cast<std::uint16_t>(bits);
    const double half = Binary16Value(b), brain = Binary16BrainValue(b);
    if (!std::isnan(half)) {
      ASSERT_EQ(static_cast<double>(Half::from_bits(b)), half) << std::hex << bits;
      ASSERT_EQ(Half(static_cast<float>(Half::from_bits(b))).bits, b) << std::hex << bits;
    } else {
      ASSERT_TRUE(std::isnan(static_cast<float>(Half::from_bits(b)))) << std::hex << bits;
    }
    if (!std::isnan(brain)) {
      ASSERT_EQ(static_cast<double>(BFloat16::from_bits(b)), brain) << std::hex << bits;
    } else {
      ASSERT_TRUE(std::isnan(static_cast<float>(BFloat16::from_bits(b)))) << std::hex << bits;
    }
  }
}

TEST(HalfArithmetic, IsComputedInFloatAndRoundedOnce) {
  // 2049 is halfway between the float16 neighbours 2048 and 2050: ties to even, 2048.
  EXPECT_EQ(static_cast<float>(Half(2048.0f) + Half(1.0f)), 2048.0f);
  EXPECT_EQ(static_cast<float>(Half(2048.0f) + Half(3.0f)), 2052.0f);  // 2051: up to even 2052
  EXPECT_EQ(static_cast<float>(Half(1.0f) / Half(3.0f)), 0.333251953125f);
  EXPECT_EQ(static_cast<float>(BFloat16(256.0f) + BFloat16(1.0f)), 256.0f);
  EXPECT_EQ(static_cast<float>(-Half(1.5f)), -1.5f);
  static_assert(std::is_same_v<decltype(Half(1.0f) * Half(2.0f)), Half>);
  static_assert(std::is_same_v<decltype(Half(1.0f) * 2.0f), float>);
}

// --- Tensors ---

TEST(HalfTensor, DtypeTableKnowsBoth) {
  EXPECT_EQ(dist::dtype_name(dist::kFloat16), "torch.float16");
  EXPECT_EQ(dist::dtype_name(dist::kBFloat16), "torch.bfloat16");
  EXPECT_EQ(dist::element_size(dist::kFloat16), 2u);
  EXPECT_EQ(dist::element_size(dist::kBFloat16), 2u);
  EXPECT_TRUE(dist::is_floating_point(dist::kFloat16));
  EXPECT_TRUE(dist::is_floating_point(dist::kBFloat16));
  EXPECT_EQ(dist::dtype_of<Half>(), dist::kFloat16);
  EXPECT_EQ(dist::dtype_of<BFloat16>(), dist::kBFloat16);
  EXPECT_EQ(dist::detail::dtype_constant_name(dist::kBFloat16), "dist::kBFloat16");
  EXPECT_EQ(dist::detail::dtype_cpp_name(dist::kFloat16), "dist::Half");
  // The numbers that go on the wire keep their values.
  EXPECT_EQ(static_cast<int>(dist::kInt64), 3);
  EXPECT_EQ(static_cast<int>(dist::kFloat16), 4);
  EXPECT_EQ(static_cast<int>(dist::kBFloat16), 5);
}

TEST(HalfTensor, PromoteTypesMatchesTorch) {
  using dist::promote_types;
  EXPECT_EQ(promote_types(dist::kFloat16, dist::kBFloat16), dist::kFloat32);
  EXPECT_EQ(promote_types(dist::kBFloat16, dist::kFloat16), dist::kFloat32);
  EXPECT_EQ(promote_types(dist::kFloat16, dist::kFloat16), dist::kFloat16);
  EXPECT_EQ(promote_types(dist::kFloat16, dist::kInt64), dist::kFloat16);
  EXPECT_EQ(promote_types(dist::kInt32, dist::kBFloat16), dist::kBFloat16);
  EXPECT_EQ(promote_types(dist::kBFloat16, dist::kFloat32), dist::kFloat32);
  EXPECT_EQ(promote_types(dist::kFloat16, dist::kFloat64), dist::kFloat64);
}

TEST(HalfTensor, ArithmeticStaysHalfAndRoundsPerOperation) {
  Tensor t = dist::full(1, 2048.0, dist::kFloat16);
  t += 1;  // 2049 -> 2048
  t += 1;  // again: one rounding per operation, not 2050 for the pair
  EXPECT_EQ(t.dtype(), dist::kFloat16);
  EXPECT_EQ(t.item(0), 2048.0);
  EXPECT_EQ((dist::full(2, 1.0, dist::kFloat16) + dist::full(2, 2.0, dist::kBFloat16)).repr(),
            "tensor([3., 3.])");  // float16 + bfloat16 is float32
  EXPECT_EQ((dist::arange(2) + dist::full(2, 0.5, dist::kFloat16)).dtype(), dist::kFloat16);
  EXPECT_EQ((dist::arange(2, dist::kInt32).to(dist::kFloat16) / 2).repr(),
            "tensor([0.0000, 0.5000], dtype=torch.float16)");
}

TEST(HalfTensor, AFloatScalarIsRoundedToHalfFirst) {
  // torch 1.13: tensor([3.], dtype=float16) * 0.1 is 0.2998046875: 3 * 0.0999755859375 (0.1 in
  // float16) rounded, not 0.300048828125 (3 * 0.1 rounded).
  EXPECT_EQ((dist::full(1, 3.0, dist::kFloat16) * 0.1).item(0), 0.2998046875);
  EXPECT_EQ((dist::full(1, 7.0, dist::kFloat16) * 0.1).item(0), 0.69970703125);
  EXPECT_EQ((dist::full(1, 3.0, dist::kFloat16) * 0.1).dtype(), dist::kFloat16);
}

TEST(HalfTensor, Float64GoesThroughFloat32LikeTorch) {
  // 1 + 2^-11 + 2^-40 is nearer 1 + 2^-10 than 1, but float32 first rounds it to the tie
  // 1 + 2^-11, which float16 rounds to even: torch 1.13 gives 1 (bits 0x3c00).
  const double x = 1 + 0x1p-11 + 0x1p-40;
  EXPECT_EQ(dist::full(1, x, dist::kFloat64).to(dist::kFloat16).item(0), 1.0);
  EXPECT_EQ(dist::full(1, x, dist::kFloat16).item(0), 1.0);  // full and set do the same
  const double y = 1 + 0x1p-8 + 0x1p-40;                     // bfloat16's tie, likewise
  EXPECT_EQ(dist::full(1, y, dist::kFloat64).to(dist::kBFloat16).item(0), 1.0);
  // Past float32's range a float64 is inf for both, as in torch.
  EXPECT_EQ(dist::full(1, 1e300, dist::kFloat64).to(dist::kBFloat16).item(0), kInf);
}

TEST(HalfTensor, CastsRoundAndOverflowToInf) {
  const Tensor t = Tensor::from<float>({65504, 65519, 65520, -1e6f, 1.0f / 3, 1e-8f});
  EXPECT_EQ(t.to(dist::kFloat16).to(dist::kFloat32).to_vector<float>(),
            (std::vector<float>{65504, 65504, INFINITY, -INFINITY, 0.333251953125f, 0}));
  EXPECT_EQ(
      t.to(dist::kBFloat16).to(dist::kFloat32).to_vector<float>(),
      (std::vector<float>{65536, 65536, 65536, -999424, 0.333984375f, 1.0011717677116394e-8f}));
  // To integers, truncation toward zero as from any float; infinity has no integer value.
  EXPECT_EQ(dist::full(1, -2.7, dist::kBFloat16).to(dist::kInt64).item(0), -2);
  EXPECT_CONTAINS(ThrownMessage([&] { t.to(dist::kFloat16).to(dist::kInt32); }),
                  "cannot convert inf to torch.int32");
}

TEST(HalfTensor, FullFillAndSetRefuseValuesBeyondTheRangeLikeTorch) {
  // torch.full((1,), 65519., dtype=torch.float16): "value cannot be converted to type at::Half
  // without overflow", though .to() would round 65519 to 65504.
  const std::string message = ThrownMessage([] { dist::full(1, 65519.0, dist::kFloat16); });
  EXPECT_CONTAINS(message, "value 65519 cannot be converted to torch.float16 without overflow");
  EXPECT_CONTAINS(message, "at::Half");
  EXPECT_CONTAINS(message, "largest finite value is 65504");
  Tensor t = dist::zeros(2, dist::kBFloat16);
  EXPECT_CONTAINS(ThrownMessage([&] { t.set(1, -1e39); }), "at::BFloat16");
  EXPECT_CONTAINS(ThrownMessage([&] { t.fill_(1e39); }), "torch.bfloat16 without overflow");
  t.set(0, 1e6);  // bfloat16 holds it (rounded to 999424, as torch does)
  EXPECT_EQ(t.item(0), 999424.0);
  EXPECT_EQ(dist::full(1, 65504.0, dist::kFloat16).item(0), 65504.0);
  EXPECT_EQ(dist::full(1, -kInf, dist::kFloat16).item(0), -kInf);  // infinities pass
  EXPECT_TRUE(std::isnan(dist::full(1, std::nan(""), dist::kBFloat16).item(0)));
}

TEST(HalfTensor, DataPtrAndFrom) {
  const Tensor t = Tensor::from({Half(1.5f), Half(-2.0f)});
  EXPECT_EQ(t.dtype(), dist::kFloat16);
  EXPECT_EQ(t.data_ptr<Half>()[0].bits, 0x3e00);
  EXPECT_CONTAINS(ThrownMessage([&] { t.data_ptr<BFloat16>(); }),
                  "use data_ptr<dist::Half>() or convert first with .to(dist::kBFloat16)");
  EXPECT_EQ(t.to(dist::kFloat32).to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(dist::arange(3, dist::kBFloat16).to(dist::kFloat32).to_vector<float>(),
            (std::vector<float>{0, 1, 2}));
}

TEST(HalfTensor, PrintsLikeTorch) {
  EXPECT_EQ(Tensor::from({Half(1.5f), Half(2.0f)}).repr(),
            "tensor([1.5000, 2.0000], dtype=torch.float16)");
  EXPECT_EQ(dist::zeros(0, dist::kBFloat16).repr(), "tensor([], dtype=torch.bfloat16)");
  EXPECT_EQ(Tensor::from<double>({65504, 1e-7, 6e-8, 1.0 / 3, -0.0}).to(dist::kFloat16).repr(),
            "tensor([6.5504e+04, 1.1921e-07, 5.9605e-08, 3.3325e-01, -0.0000e+00],\n"
            "       dtype=torch.float16)");
  EXPECT_EQ(
      Tensor::from<double>({3.3895313892515355e+38, 1e-40, 1.0 / 3}).to(dist::kBFloat16).repr(),
      "tensor([3.3895e+38, 9.1835e-41, 3.3398e-01], dtype=torch.bfloat16)");
  EXPECT_EQ(Tensor::from<float>({1, INFINITY, NAN}).to(dist::kFloat16).repr(),
            "tensor([1., inf, nan], dtype=torch.float16)");
}

}  // namespace
