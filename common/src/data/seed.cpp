// Per-rank seeds and PyTorch's CPU generator, draw for draw (dist/seed.h; taught in chapter 06).
#include "dist/seed.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dist/check.h"

namespace dist {
namespace {

std::atomic<bool> deterministic_algorithms{false};

// torch's uniform_real_distribution on [0, 1): the low 24 bits of a 32-bit draw for float32, the
// low 53 bits of a 64-bit draw for float64, scaled by 2^-24 or 2^-53.
float uniform_float(Generator& g) {
  return static_cast<float>(g.random() & ((1U << 24) - 1)) * std::ldexp(1.0f, -24);
}
double uniform_double(Generator& g) {
  return static_cast<double>(g.random64() & ((1ULL << 53) - 1)) * std::ldexp(1.0, -53);
}

// a * b + c rounded once, as the compiler fuses torch's AVX2 multiply-then-add steps.
float fmadd(float a, float b, float c) {
  return std::fma(a, b, c);
}

// The natural log of torch's AVX2 kernels (ATen's avx_mathfun.h, after Cephes' logf), one lane:
// x = m 2^e with m in [sqrt(1/2), sqrt(2)), then a degree-9 polynomial in m - 1.
float avx2_log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  const bool invalid = x <= 0;
  x = std::max(x, kMinNormal);
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  float e = static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 127) + 1.0f;
  float m = std::bit_cast<float>((bits & ~0x7f800000U) | std::bit_cast<std::uint32_t>(0.5f));
  const bool below = m < 0.707106781186547524f;
  const float extra = below ? m : 0.0f;
  m = m - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  m = m + extra;
  const float z = m * m;
  constexpr float kP[] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                          -1.2420140846E-1f, 1.4249322787E-1f,  -1.6668057665E-1f,
                          2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
  float y = kP[0];
  for (int i = 1; i < 9; ++i) y = fmadd(y, m, kP[i]);
  y = y * m;
  y = fmadd(y, z, e * -2.12194440e-4f);  // the compiler fuses this product, not e's
  y = fmadd(-z, 0.5f, y);
  const float r = fmadd(e, 0.693359375f, m + y);
  return invalid ? std::numeric_limits<float>::quiet_NaN() : r;
}

// sin and cos of x >= 0 as torch's AVX2 sincos (avx_mathfun.h, after Cephes' sinf and cosf):
// reduce by multiples of pi/4 in three parts, then one of two polynomials each.
void avx2_sincos(float x, float& sin_out, float& cos_out) {
  const float sign_in = std::signbit(x) ? -1.0f : 1.0f;
  x = std::fabs(x);
  std::int32_t j = static_cast<std::int32_t>(x * 1.27323954473516f);  // 4 / pi, truncated
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const bool sin_negative = ((j & 4) != 0) != (sign_in < 0);
  const bool cos_negative = ((~(j - 2)) & 4) != 0;
  const bool first_poly_is_sin = (j & 2) == 0;  // the second polynomial gives the sine
  x = fmadd(y, -0.78515625f, x);
  x = fmadd(y, -2.4187564849853515625e-4f, x);
  x = fmadd(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float c = 2.443315711809948E-005f;
  c = fmadd(c, z, -1.388731625493765E-003f);
  c = fmadd(c, z, 4.166664568298827E-002f);
  c = c * z;
  c = fmadd(c, z, -(z * 0.5f));  // as in the log, the compiler fuses this product
  c = c + 1.0f;
  float s = -1.9515295891E-4f;
  s = fmadd(s, z, 8.3321608736E-3f);
  s = fmadd(s, z, -1.6666654611E-1f);
  s = s * z;
  s = fmadd(s, x, x);
  float sine = first_poly_is_sin ? s : c;
  float cosine = first_poly_is_sin ? c : s;
  sin_out = sin_negative ? -sine : sine;
  cos_out = cos_negative ? -cosine : cosine;
}

// Box-Muller on 16 uniforms in place: values 0-7 against 8-15, as torch's normal_fill_16_AVX2.
void normal_fill_16(float* data) {
  const auto two_pi = static_cast<float>(2.0f * 3.14159265358979323846);
  for (int k = 0; k < 8; ++k) {
    const float u1 = 1.0f - data[k];  // (0, 1], for the log
    const float u2 = data[k + 8];
    const float radius = std::sqrt(-2.0f * avx2_log(u1));
    float sine = 0, cosine = 0;
    avx2_sincos(two_pi * u2, sine, cosine);
    data[k] = radius * cosine;
    data[k + 8] = radius * sine;
  }
}

}  // namespace

void Generator::manual_seed(std::uint64_t seed) {
  seed_ = seed;
  next_double_normal_.reset();
  // torch's mt19937 keeps the low 32 bits of the seed, and so does std::mt19937::seed.
  engine_.seed(static_cast<std::uint32_t>(seed));
}

Tensor Generator::get_state() const {
  std::ostringstream text;  // the standard's text form of the engine: its words and position
  text << engine_;
  std::vector<std::int64_t> values{static_cast<std::int64_t>(seed_)};
  std::istringstream numbers(text.str());
  for (std::uint64_t v = 0; numbers >> v;) values.push_back(static_cast<std::int64_t>(v));
  return Tensor::from(values);
}

void Generator::set_state(const Tensor& state) {
  const std::int64_t expected = get_state().numel();
  if (state.dtype() != kInt64 || state.numel() != expected) {
    throw ConfigError("Generator::set_state: want the int64 tensor of " + std::to_string(expected) +
                      " values that get_state makes, got " + std::to_string(state.numel()) +
                      " values of " + std::string(dtype_name(state.dtype())));
  }
  const std::vector<std::int64_t> values = state.to_vector<std::int64_t>();
  std::ostringstream text;
  for (std::size_t i = 1; i < values.size(); ++i) text << values[i] << ' ';
  std::istringstream in(text.str());
  std::mt19937 engine;
  if (!(in >> engine)) {
    throw ConfigError("Generator::set_state: the tensor is not a state get_state made");
  }
  seed_ = static_cast<std::uint64_t>(values[0]);
  engine_ = engine;
  next_double_normal_.reset();
}

std::uint64_t Generator::random64() {
  const std::uint64_t high = random();
  const std::uint64_t low = random();
  return (high << 32) | low;
}

Generator& default_generator() {
  // Unseeded programs differ from run to run, as with PyTorch: only init_seeds makes them repeat.
  static Generator generator{(static_cast<std::uint64_t>(std::random_device{}()) << 32) |
                             std::random_device{}()};
  return generator;
}

void manual_seed(std::uint64_t seed) {
  default_generator().manual_seed(seed);
}

std::uint64_t initial_seed() {
  return default_generator().initial_seed();
}

Tensor randint(std::int64_t low, std::int64_t high, std::int64_t n, Generator& generator) {
  if (low >= high) {
    throw ConfigError("randint: low (" + std::to_string(low) + ") must be less than high (" +
                      std::to_string(high) + "): it draws from [low, high)");
  }
  if (n < 0) throw ConfigError("randint: n = " + std::to_string(n) + " must be 0 or more");
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  Tensor values(n, kInt64);
  std::int64_t* v = values.data_ptr<std::int64_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    // One draw per element, in order, as torch's serial CPU kernel takes them. The modulo has a
    // tiny bias for ranges that do not divide 2^32; torch accepts it, and so must we to match.
    const std::uint64_t draw = range >= (1ULL << 32) ? generator.random64() : generator.random();
    v[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + draw % range);
  }
  return values;
}

Tensor randn(std::int64_t n, Generator& generator) {
  if (n < 0) throw ConfigError("randn: n = " + std::to_string(n) + " must be 0 or more");
  Tensor values(n, kFloat32);
  float* v = values.data_ptr<float>();
  if (n < 16) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::optional<double>& cached = generator.next_double_normal_sample();
      if (cached) {
        v[i] = static_cast<float>(*cached);
        cached.reset();
        continue;
      }
      const double u1 = uniform_double(generator);
      const double u2 = uniform_double(generator);
      const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
      const double theta = 2.0 * 3.14159265358979323846 * u1;
      generator.next_double_normal_sample() = r * std::sin(theta);
      v[i] = static_cast<float>(r * std::cos(theta));
    }
    return values;
  }
  for (std::int64_t i = 0; i < n; ++i) v[i] = uniform_float(generator);
  for (std::int64_t i = 0; i + 16 <= n; i += 16) normal_fill_16(v + i);
  if (n % 16 != 0) {  // the tail: 16 fresh uniforms for the last 16 values
    float* last = v + n - 16;
    for (int i = 0; i < 16; ++i) last[i] = uniform_float(generator);
    normal_fill_16(last);
  }
  return values;
}

std::int64_t NumpyRandomState::randint(std::int64_t high) {
  if (high <= 0 || high > (std::int64_t{1} << 32)) {
    throw ConfigError("NumpyRandomState::randint: high = " + std::to_string(high) +
                      " must be in [1, 2^32]");
  }
  const auto range = static_cast<std::uint32_t>(high - 1);  // the largest value to return
  std::uint32_t mask = range;                               // the smallest 2^k - 1 that covers it
  for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
  if (range == 0) return 0;
  std::uint32_t value = 0;
  do {
    value = static_cast<std::uint32_t>(engine_()) & mask;
  } while (value > range);
  return value;
}

std::int64_t dataloader_base_seed(Generator& generator) {
  // random_() on an int64 tensor: random64() % (INT64_MAX + 1), that is the low 63 bits.
  return static_cast<std::int64_t>(generator.random64() & static_cast<std::uint64_t>(INT64_MAX));
}

std::uint64_t dataloader_worker_seed(std::int64_t base_seed, int worker_id) {
  if (worker_id < 0) {
    throw ConfigError("dataloader_worker_seed: worker_id = " + std::to_string(worker_id) +
                      " must be 0 or more");
  }
  return static_cast<std::uint64_t>(base_seed) + static_cast<std::uint64_t>(worker_id);
}

void use_deterministic_algorithms(bool on) {
  deterministic_algorithms = on;
}

bool are_deterministic_algorithms_enabled() {
  return deterministic_algorithms;
}

void init_seeds(std::uint64_t seed, bool deterministic) {
  manual_seed(seed);
  use_deterministic_algorithms(deterministic);
}

}  // namespace dist
