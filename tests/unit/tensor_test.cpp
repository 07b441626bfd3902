// dist::Tensor behaves like the torch tensors the source posts use: the same factories, the same
// type promotion, the same refusals, and repr() that prints what torch prints (each expected string
// below is what PyTorch 1.13 prints for the same tensor; tensor_repr_parity.py checks hundreds
// more).
#include "dist/tensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using dist::Tensor;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// The what() of the exception of type E that `body` throws; fails the test if none is thrown.
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

Tensor Ints(std::vector<std::int64_t> values) {
  return Tensor::from(values);
}
Tensor Floats(std::vector<float> values) {
  return Tensor::from(values);
}
Tensor Doubles(std::vector<double> values) {
  return Tensor::from(values);
}
Tensor Int32s(std::vector<std::int32_t> values) {
  return Tensor::from(values);
}

// --- Factories ---

TEST(TensorFactories, DefaultDtypesAreTorchs) {
  EXPECT_EQ(Tensor().dtype(), dist::kFloat32);
  EXPECT_EQ(Tensor().numel(), 0);
  EXPECT_EQ(dist::zeros(3).dtype(), dist::kFloat32);
  EXPECT_EQ(dist::full(3, 1.5).dtype(), dist::kFloat32);
  EXPECT_EQ(dist::arange(3).dtype(), dist::kInt64);  // torch.arange(3) is int64
}

TEST(TensorFactories, ZerosFullArange) {
  EXPECT_EQ(dist::zeros(3).repr(), "tensor([0., 0., 0.])");
  EXPECT_EQ(dist::full(2, 1.5).repr(), "tensor([1.5000, 1.5000])");
  EXPECT_EQ(dist::arange(4).repr(), "tensor([0, 1, 2, 3])");
  EXPECT_EQ(dist::arange(4, dist::kFloat64).repr(),
            "tensor([0., 1., 2., 3.], dtype=torch.float64)");
  EXPECT_EQ(dist::zeros(2, dist::kInt32).nbytes(), 2 * sizeof(std::int32_t));
}

TEST(TensorFactories, FullWithAnIntegerDtypeTruncatesTheValue) {
  // torch.full((3,), 2.7, dtype=torch.int64) -> tensor([2, 2, 2])
  EXPECT_EQ(dist::full(3, 2.7, dist::kInt64).repr(), "tensor([2, 2, 2])");
  EXPECT_EQ(dist::full(2, -2.7, dist::kInt32).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{-2, -2}));
}

TEST(TensorFactories, FullRefusesNaNForAnIntegerDtype) {
  // torch: "value cannot be converted to type int64_t without overflow"
  const std::string msg = ThrownMessage([] { dist::full(2, kNaN, dist::kInt64); });
  EXPECT_CONTAINS(msg, "cannot convert nan to torch.int64");
}

TEST(TensorFactories, NegativeSizeIsAConfigurationError) {
  const std::string msg = ThrownMessage<dist::ConfigError>([] { dist::zeros(-3); });
  EXPECT_CONTAINS(msg, "-3");
  EXPECT_EQ(dist::ConfigError("x").exit_code(), dist::kExitUsage);
  EXPECT_THROW(dist::arange(-1), dist::ConfigError);
  EXPECT_THROW(Tensor(-1, dist::kInt32), dist::ConfigError);
}

TEST(TensorFactories, FromCopiesTheValues) {
  const Tensor t = Tensor::from<std::int32_t>({7, 8, 9});
  EXPECT_EQ(t.dtype(), dist::kInt32);
  EXPECT_EQ(t.to_vector<std::int32_t>(), (std::vector<std::int32_t>{7, 8, 9}));
}

TEST(TensorFactories, CopiesAreDeep) {
  Tensor a = dist::arange(3);
  Tensor b = a;  // unlike torch, a copy does not share storage
  b.set(0, 42);
  EXPECT_EQ(a.item(0), 0);
  EXPECT_EQ(a.clone().repr(), "tensor([0, 1, 2])");
}

// --- Type promotion ---

TEST(TensorPromotion, PromoteTypesMatchesTorch) {
  EXPECT_EQ(dist::promote_types(dist::kInt32, dist::kInt64), dist::kInt64);
  EXPECT_EQ(dist::promote_types(dist::kInt64, dist::kFloat32), dist::kFloat32);  // not float64
  EXPECT_EQ(dist::promote_types(dist::kInt32, dist::kFloat64), dist::kFloat64);
  EXPECT_EQ(dist::promote_types(dist::kFloat32, dist::kFloat64), dist::kFloat64);
  EXPECT_EQ(dist::promote_types(dist::kFloat32, dist::kFloat32), dist::kFloat32);
}

TEST(TensorPromotion, DtypeNamesAreTorchs) {
  EXPECT_EQ(dist::dtype_name(dist::kFloat32), "torch.float32");
  EXPECT_EQ(dist::dtype_name(dist::kFloat64), "torch.float64");
  EXPECT_EQ(dist::dtype_name(dist::kInt32), "torch.int32");
  EXPECT_EQ(dist::dtype_name(dist::kInt64), "torch.int64");
  EXPECT_TRUE(dist::is_floating_point(dist::kFloat64));
  EXPECT_FALSE(dist::is_floating_point(dist::kInt64));
  EXPECT_EQ(dist::element_size(dist::kFloat64), 8u);
}

TEST(TensorPromotion, TensorsOfMixedDtypesPromote) {
  EXPECT_EQ((Int32s({1, 2}) + Ints({1, 2})).repr(), "tensor([2, 4])");  // int64
  EXPECT_EQ((Ints({1, 2}) + Floats({0.5f, 0.5f})).repr(), "tensor([1.5000, 2.5000])");
  EXPECT_EQ((Floats({1, 2}) + Doubles({1, 2})).repr(), "tensor([2., 4.], dtype=torch.float64)");
}

TEST(TensorPromotion, AnIntegerScalarKeepsTheTensorDtype) {
  EXPECT_EQ((Int32s({1, 2}) * 3).repr(), "tensor([3, 6], dtype=torch.int32)");
  EXPECT_EQ((Floats({1.5f}) + 1).dtype(), dist::kFloat32);
  EXPECT_EQ((2 * dist::arange(3)).repr(), "tensor([0, 2, 4])");
}

TEST(TensorPromotion, AFloatingScalarMakesAnIntegerTensorFloat32) {
  EXPECT_EQ((Ints({1, 2, 3}) * 2.5).repr(), "tensor([2.5000, 5.0000, 7.5000])");
  EXPECT_EQ((Doubles({1}) * 2.5).dtype(), dist::kFloat64);
}

TEST(TensorPromotion, ScalarsAreRoundedToTheTensorDtypeFirst) {
  // torch adds float(1.00000001) == 1.0f in float arithmetic; the exact sum would round up.
  EXPECT_EQ((Floats({16777216.0f}) + 1.00000001).repr(), "tensor([16777216.])");
}

TEST(TensorPromotion, DivisionIsTrueDivision) {
  EXPECT_EQ((Ints({1, 2, 3}) / 2).repr(), "tensor([0.5000, 1.0000, 1.5000])");
  EXPECT_EQ((Ints({1, 2}) / Ints({2, 2})).dtype(), dist::kFloat32);
  EXPECT_EQ((dist::full(3, 1.0) / 3).repr(), "tensor([0.3333, 0.3333, 0.3333])");
  EXPECT_EQ((Doubles({1}) / 2).dtype(), dist::kFloat64);
}

TEST(TensorPromotion, IntegerDivisionByZeroGivesInfAndNaN) {
  // The operands become float32 first, so there is no integer division to trap.
  EXPECT_EQ((Ints({1, 0, -1}) / 0).repr(), "tensor([inf, nan, -inf])");
}

TEST(TensorPromotion, IntegerOverflowWrapsLikeTorch) {
  EXPECT_EQ((Ints({std::int64_t{1} << 62}) * 4).repr(), "tensor([0])");
  EXPECT_EQ((Int32s({std::numeric_limits<std::int32_t>::max()}) + 1).repr(),
            "tensor([-2147483648], dtype=torch.int32)");
  // An int64 scalar wraps into an int32 tensor's dtype: 2^40 is 0 modulo 2^32.
  EXPECT_EQ((Int32s({1, 2}) + (std::int64_t{1} << 40)).repr(), "tensor([1, 2], dtype=torch.int32)");
}

TEST(TensorPromotion, SizesMustMatch) {
  const std::string msg = ThrownMessage([] { Ints({1, 2, 3}) + Ints({1, 2}); });
  EXPECT_CONTAINS(msg, "a has 3 elements, b has 2");
}

// --- Compound assignment ---

TEST(TensorCompoundAssignment, KeepsTheLeftDtype) {
  Tensor f = Floats({1.5f, 2.5f});
  f += Ints({1, 1});  // float32 result, stored as float32
  EXPECT_EQ(f.repr(), "tensor([2.5000, 3.5000])");
  Tensor i = Int32s({1, 2});
  i += Ints({(std::int64_t{1} << 32) + 5, 1});  // computed in int64, stored as int32 (wraps)
  EXPECT_EQ(i.repr(), "tensor([6, 3], dtype=torch.int32)");
  i *= 2;
  EXPECT_EQ(i.repr(), "tensor([12,  6], dtype=torch.int32)");
  Tensor d = Floats({1, 2});
  d /= 2;
  EXPECT_EQ(d.repr(), "tensor([0.5000, 1.0000])");
}

TEST(TensorCompoundAssignment, AnIntegerTensorCannotHoldAFloatingResult) {
  // torch: "result type Float can't be cast to the desired output type Long"
  Tensor t = dist::arange(3);
  const std::string msg = ThrownMessage([&] { t /= 2; });
  EXPECT_CONTAINS(msg,
                  "result type torch.float32 can't be cast to the desired output type "
                  "torch.int64");
  EXPECT_CONTAINS(msg, "t = t.to(dist::kFloat32)");
  EXPECT_THROW(t *= 2.5, dist::Error);
  EXPECT_THROW(t += 2.0, dist::Error);  // an integral double is still a Python float
  EXPECT_THROW(t -= Floats({1, 1, 1}), dist::Error);
  EXPECT_THROW(t /= dist::arange(3), dist::Error);
  EXPECT_EQ(t.repr(), "tensor([0, 1, 2])");  // untouched by the failed updates
}

TEST(TensorCompoundAssignment, SubtractionAndMultiplicationOfTensors) {
  Tensor t = Doubles({5, 6});
  t -= Doubles({1, 2});
  t *= Doubles({2, 0.5});
  EXPECT_EQ(t.repr(), "tensor([8., 2.], dtype=torch.float64)");
  t -= std::int64_t{1};
  t /= Doubles({2, 2});
  EXPECT_EQ(t.repr(), "tensor([3.5000, 0.5000], dtype=torch.float64)");
  t -= 0.5;
  EXPECT_EQ(t.repr(), "tensor([3., 0.], dtype=torch.float64)");
}

// --- Conversion ---

TEST(TensorConversion, FloatToIntTruncatesTowardZero) {
  EXPECT_EQ(Floats({2.7f, -2.7f, 0.9f}).to(dist::kInt64).repr(), "tensor([ 2, -2,  0])");
}

TEST(TensorConversion, NaNInfAndOutOfRangeValuesHaveNoIntegerValue) {
  EXPECT_CONTAINS(ThrownMessage([] {
                    Doubles({1, kNaN}).to(dist::kInt32);
                  }),
                  "cannot convert nan to torch.int32");
  EXPECT_CONTAINS(ThrownMessage([] { Doubles({-kInf}).to(dist::kInt64); }), "-inf");
  EXPECT_CONTAINS(ThrownMessage([] { Doubles({3e9}).to(dist::kInt32); }),
                  "cannot convert 3e+09 to torch.int32");
  EXPECT_CONTAINS(ThrownMessage([] { Doubles({1e19}).to(dist::kInt64); }), "1e+19");
  // The extremes themselves convert.
  EXPECT_EQ(Doubles({-2147483648.0, 2147483647.9}).to(dist::kInt32).repr(),
            "tensor([-2147483648,  2147483647], dtype=torch.int32)");
}

TEST(TensorConversion, NarrowingIntegersWraps) {
  EXPECT_EQ(Ints({(std::int64_t{1} << 32) + 7}).to(dist::kInt32).repr(),
            "tensor([7], dtype=torch.int32)");
}

TEST(TensorConversion, Float64BeyondFloat32RangeBecomesInf) {
  EXPECT_EQ(Doubles({1e300, -1e300, 2.5}).to(dist::kFloat32).repr(),
            "tensor([   inf,   -inf, 2.5000])");
  const double just_above_max = static_cast<double>(std::numeric_limits<float>::max()) * (1 + 1e-9);
  EXPECT_EQ(Doubles({just_above_max}).to(dist::kFloat32).item(0),
            static_cast<double>(std::numeric_limits<float>::max()));  // rounds down, as IEEE does
}

TEST(TensorConversion, CopyFillAndSetConvert) {
  Tensor t = dist::zeros(3, dist::kInt32);
  t.copy_(Doubles({1.9, -1.9, 3}));
  EXPECT_EQ(t.repr(), "tensor([ 1, -1,  3], dtype=torch.int32)");
  t.fill_(4);
  t.set(1, 5.5);
  EXPECT_EQ(t.repr(), "tensor([4, 5, 4], dtype=torch.int32)");
  EXPECT_CONTAINS(ThrownMessage([&] { t.copy_(dist::zeros(2)); }),
                  "source has 2 elements, destination has 3");
  EXPECT_THROW(t.set(0, kInf), dist::Error);
}

// --- Element access, slices, equality ---

TEST(TensorAccess, ItemAndSetAreBoundsChecked) {
  Tensor t = dist::arange(3);
  EXPECT_EQ(t.item(2), 2.0);
  EXPECT_CONTAINS(ThrownMessage([&] { t.item(3); }), "item(3)");
  EXPECT_CONTAINS(ThrownMessage([&] { t.item(-1); }), "with 3 elements");
  EXPECT_CONTAINS(ThrownMessage([&] { t.set(5, 1); }), "set(5, ...)");
}

TEST(TensorAccess, Int64ItemsAreExactUpTo2To53) {
  const std::int64_t big = std::int64_t{1} << 53;
  EXPECT_EQ(Ints({big}).item(0), 9007199254740992.0);
}

TEST(TensorAccess, DataPtrChecksTheElementType) {
  Tensor t = dist::arange(2);
  EXPECT_EQ(t.data_ptr<std::int64_t>()[1], 1);
  const std::string msg = ThrownMessage([&] { t.data_ptr<float>(); });
  EXPECT_CONTAINS(msg, "data_ptr<float>() on a torch.int64 tensor");
  EXPECT_CONTAINS(msg, ".to(dist::kFloat32)");
}

TEST(TensorAccess, SliceAndAssignSlice) {
  Tensor t = dist::arange(6);
  EXPECT_EQ(t.slice(2, 3).repr(), "tensor([2, 3, 4])");
  EXPECT_EQ(t.slice(6, 0).repr(), "tensor([], dtype=torch.int64)");
  t.assign_slice(4, Floats({9.5f, -1.5f}));  // converted to int64, truncating
  EXPECT_EQ(t.repr(), "tensor([ 0,  1,  2,  3,  9, -1])");
}

TEST(TensorAccess, SlicesAreBoundsChecked) {
  Tensor t = dist::arange(6);
  EXPECT_CONTAINS(ThrownMessage([&] { t.slice(4, 3); }),
                  "slice(start=4, length=3) does not fit in a tensor with 6 elements");
  EXPECT_THROW(t.slice(-1, 1), dist::Error);
  EXPECT_THROW(t.slice(0, -1), dist::Error);
  EXPECT_THROW(t.slice(7, 0), dist::Error);
  EXPECT_CONTAINS(ThrownMessage([&] { t.assign_slice(5, dist::arange(2)); }),
                  "assign_slice(start=5, 2 values)");
  EXPECT_THROW(t.assign_slice(-1, dist::arange(1)), dist::Error);
}

TEST(TensorEqual, NeedsSameDtypeSizeAndValues) {
  EXPECT_TRUE(dist::arange(3).equal(Ints({0, 1, 2})));
  EXPECT_FALSE(dist::arange(3).equal(Int32s({0, 1, 2})));  // same values, other dtype
  EXPECT_FALSE(dist::arange(3).equal(dist::arange(2)));
  EXPECT_FALSE(dist::arange(3).equal(Ints({0, 1, 3})));
  EXPECT_TRUE(Tensor().equal(dist::zeros(0)));
}

TEST(TensorEqual, NaNNeverEqualsAndMinusZeroEqualsZero) {
  EXPECT_FALSE(Doubles({kNaN}).equal(Doubles({kNaN})));  // torch.equal agrees
  EXPECT_TRUE(Doubles({-0.0}).equal(Doubles({0.0})));
}

TEST(TensorSum, IsADouble) {
  EXPECT_EQ(dist::arange(101).sum(), 5050.0);
  EXPECT_EQ(Floats({0.5f, 0.25f}).sum(), 0.75);
  EXPECT_EQ(Tensor().sum(), 0.0);
}

// --- repr: what torch prints ---

TEST(TensorRepr, IntegersPrintLikeTorch) {
  EXPECT_EQ(Ints({4, 6}).repr(), "tensor([4, 6])");
  EXPECT_EQ(Ints({-5, 100, 7}).repr(), "tensor([ -5, 100,   7])");  // right-aligned to the widest
  EXPECT_EQ(Ints({std::numeric_limits<std::int64_t>::max(), -5}).repr(),
            "tensor([9223372036854775807,                  -5])");
}

TEST(TensorRepr, DtypesOtherThanFloat32AndInt64AreNamed) {
  // float32 and int64 are what torch.tensor infers from Python floats and ints.
  EXPECT_EQ(Int32s({1, 2}).repr(), "tensor([1, 2], dtype=torch.int32)");
  EXPECT_EQ(Ints({1, 2}).repr(), "tensor([1, 2])");
  EXPECT_EQ(Floats({1.5f, 2}).repr(), "tensor([1.5000, 2.0000])");
  EXPECT_EQ(Doubles({1.5, 2}).repr(), "tensor([1.5000, 2.0000], dtype=torch.float64)");
}

TEST(TensorRepr, EmptyTensorsNameEveryDtypeButFloat32) {
  EXPECT_EQ(Tensor().repr(), "tensor([])");
  EXPECT_EQ(dist::zeros(0, dist::kFloat64).repr(), "tensor([], dtype=torch.float64)");
  EXPECT_EQ(dist::zeros(0, dist::kInt32).repr(), "tensor([], dtype=torch.int32)");
  EXPECT_EQ(dist::arange(0).repr(), "tensor([], dtype=torch.int64)");
}

TEST(TensorRepr, IntegerValuedFloatsEndInADot) {
  EXPECT_EQ(Floats({1, 2, 100}).repr(), "tensor([  1.,   2., 100.])");
  EXPECT_EQ(Floats({0, -0.0f, 3}).repr(), "tensor([0., -0., 3.])");
  EXPECT_EQ(Floats({-0.0f}).repr(), "tensor([-0.])");
  EXPECT_EQ(Floats({1, 1000}).repr(), "tensor([   1., 1000.])");  // a ratio of exactly 1000
}

TEST(TensorRepr, FractionsGetFourDecimals) {
  EXPECT_EQ(Floats({123.456f, -0.5f}).repr(), "tensor([123.4560,  -0.5000])");
  EXPECT_EQ(Floats({0.1f}).repr(), "tensor([0.1000])");  // 0.1f is 0.10000000149..., as in torch
  EXPECT_EQ(Doubles({0.03125}).repr(), "tensor([0.0312], dtype=torch.float64)");  // ties to even
}

TEST(TensorRepr, WideRangesSwitchToScientific) {
  EXPECT_EQ(Floats({1, 1001}).repr(), "tensor([1.0000e+00, 1.0010e+03])");      // ratio over 1000
  EXPECT_EQ(Floats({1e9f, 1}).repr(), "tensor([1.0000e+09, 1.0000e+00])");      // over 1e8
  EXPECT_EQ(Floats({1e-5f, 0.5f}).repr(), "tensor([1.0000e-05, 5.0000e-01])");  // under 1e-4
  EXPECT_EQ(Doubles({1e100, 1e-100}).repr(),
            "tensor([1.0000e+100, 1.0000e-100], dtype=torch.float64)");
}

TEST(TensorRepr, NaNAndInfinitiesInEveryMode) {
  EXPECT_EQ(Floats({NAN, INFINITY, -INFINITY, 0}).repr(), "tensor([nan, inf, -inf, 0.])");
  EXPECT_EQ(Floats({NAN, 1.5f, -INFINITY}).repr(), "tensor([   nan, 1.5000,   -inf])");
  EXPECT_EQ(Floats({NAN, 1e9f, -0.0f}).repr(), "tensor([       nan, 1.0000e+09, -0.0000e+00])");
  EXPECT_EQ(Floats({-NAN}).repr(), "tensor([nan])");  // Python prints no sign on a NaN
}

TEST(TensorRepr, LongTensorsWrapAtEightyColumns) {
  EXPECT_EQ(dist::arange(30).repr(),
            "tensor([ 0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 17,\n"
            "        18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29])");
}

TEST(TensorRepr, TheDtypeMovesToItsOwnLineWhenTheLineIsFull) {
  EXPECT_EQ(dist::full(13, 10, dist::kInt32).repr(),
            "tensor([10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10], dtype=torch.int32)");
  EXPECT_EQ(dist::full(18, 1, dist::kInt32).repr(),
            "tensor([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],\n"
            "       dtype=torch.int32)");
}

TEST(TensorRepr, MoreThanAThousandElementsAreSummarized) {
  EXPECT_EQ(dist::arange(2000).repr(), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  // The formatter only sees the six values shown, so 1000 elements print in full and the
  // summary's scientific mode comes from 0, 1/7, ..., 714.14.
  EXPECT_EQ(dist::arange(1000).repr().find("..."), std::string::npos);
  EXPECT_EQ((dist::arange(5000, dist::kFloat32) / 7).repr(),
            "tensor([0.0000e+00, 1.4286e-01, 2.8571e-01,  ..., 7.1386e+02, 7.1400e+02,\n"
            "        7.1414e+02])");
}

TEST(TensorRepr, StreamingPrintsTheRepr) {
  std::ostringstream os;
  os << Int32s({1, 2});
  EXPECT_EQ(os.str(), "tensor([1, 2], dtype=torch.int32)");
}

// The storage counters (torch.cuda.memory_allocated and max_memory_allocated, for the CPU too):
// every byte of tensor storage made and freed, exactly; copies count, moves and empty tensors
// do not. Counted from a base: gtest itself holds no tensors, but other tests' statics might.
TEST(MemoryStats, CountLiveAndPeakBytesOfTensorStorageExactly) {
  const std::int64_t base = dist::memory_allocated();
  dist::reset_peak_memory_stats();
  EXPECT_EQ(dist::max_memory_allocated(), base);
  {
    Tensor a(1000, dist::kFloat32);  // 4000 bytes
    EXPECT_EQ(dist::memory_allocated(), base + 4000);
    Tensor b = Tensor::full(250, 1.5, dist::kFloat64);  // 2000 bytes
    EXPECT_EQ(dist::memory_allocated(), base + 6000);
    Tensor c = b;  // a copy copies the storage
    EXPECT_EQ(dist::memory_allocated(), base + 8000);
    Tensor d = std::move(c);  // a move does not
    Tensor empty;
    EXPECT_EQ(dist::memory_allocated(), base + 8000);
    a = Tensor();  // a's 4000 bytes freed
    EXPECT_EQ(dist::memory_allocated(), base + 4000);
    EXPECT_EQ(dist::max_memory_allocated(), base + 8000);
    dist::reset_peak_memory_stats();  // the peak starts again from what is live
    EXPECT_EQ(dist::max_memory_allocated(), base + 4000);
    Tensor e = Tensor::arange(3, dist::kInt32);  // 12 bytes
    EXPECT_EQ(dist::max_memory_allocated(), base + 4012);
    d = e;  // a 12-byte copy made first, then d's 2000 bytes freed: 24 more at the peak
    EXPECT_EQ(dist::memory_allocated(), base + 2024);
    EXPECT_EQ(dist::max_memory_allocated(), base + 4024);
  }
  EXPECT_EQ(dist::memory_allocated(), base);
  EXPECT_EQ(dist::max_memory_allocated(), base + 4024);
  EXPECT_EQ(dist::memory_allocated(dist::Device::cuda(0)), 0);  // a CPU tensor is not a GPU's
}

// Atomic counters: threads making and freeing tensors at once lose no update, and the peak is
// at least the largest single moment and at most everything at once.
TEST(MemoryStats, ThreadsLoseNoUpdate) {
  const std::int64_t base = dist::memory_allocated();
  dist::reset_peak_memory_stats();
  constexpr int kThreads = 4, kRounds = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kRounds; ++i) {
        Tensor x(16 + t, dist::kFloat32);
        Tensor y = x;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(dist::memory_allocated(), base);
  const std::int64_t all_at_once = 2 * 4 * (16 + 17 + 18 + 19);
  EXPECT_GE(dist::max_memory_allocated(), base + 2 * 4 * 16);
  EXPECT_LE(dist::max_memory_allocated(), base + all_at_once);
}

}  // namespace
