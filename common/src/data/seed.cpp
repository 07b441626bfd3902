// Per-rank seeds and PyTorch's CPU generator, draw for draw (dist/seed.h; taught in chapter 06).
#include "dist/seed.h"

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "dist/check.h"

namespace dist {
namespace {

std::atomic<bool> deterministic_algorithms{false};

}  // namespace

void Generator::manual_seed(std::uint64_t seed) {
  seed_ = seed;
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
