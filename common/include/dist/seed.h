// dist/seed.h — random numbers that are reproducible, and different on every rank.
//
//   dist::init_seeds(seed + dist::get_rank());      // post C's fix: one stream per rank
//   dist::Tensor picks = dist::randint(0, 1000, 6); // == torch.randint(0, 1000, (6,)) after
//                                                   //    torch.manual_seed(seed + rank)
//
// The generator is PyTorch's CPU generator, draw for draw: a Mersenne Twister (mt19937) seeded
// with the low 32 bits of the seed, as torch.manual_seed(seed) seeds it; randint(low, high, n)
// takes one 32-bit draw per element, `low + draw % (high - low)` (two draws, high word first, when
// the range needs 64 bits), exactly as torch.randint does on the CPU in PyTorch 1.13. Chapter 06's
// parity test compares the values with PyTorch's. Draws made by torch on a GPU (Philox) differ.
//
// What init_seeds does, next to post C's Python helper:
//   random.seed(s); np.random.seed(s)    no counterpart: this library has one generator
//   torch.manual_seed(s)                 dist::manual_seed(s): the default generator
//   cudnn.deterministic / .benchmark     dist::use_deterministic_algorithms(on): a switch, like
//                                        torch.use_deterministic_algorithms. There is no cuDNN
//                                        here and nothing in this library picks kernels by speed:
//                                        every operation it has already adds in the same order
//                                        each time (CPU arithmetic; collectives, whose order
//                                        depends on the world size and the message size, and for
//                                        NCCL on the same GPUs and settings). Code that could not
//                                        (a GPU kernel adding floats with atomics, in whatever
//                                        order the threads arrive) must ask the switch.
//
// Without init_seeds the default generator is seeded from std::random_device, so an unseeded
// program draws differently on every run, as PyTorch's default generator does. Generators are
// not thread-safe: give each thread its own.
//
// Taught in: chapter 06 (seeds).
// Built in: common/src/seed.cpp.
#pragma once

#include <cstdint>
#include <random>

#include "dist/tensor.h"

namespace dist {

class Generator {
 public:
  // The seed torch.Generator() starts from when it is given none.
  static constexpr std::uint64_t kDefaultSeed = 67280421310721ULL;

  explicit Generator(std::uint64_t seed = kDefaultSeed) { manual_seed(seed); }

  // Restarts the stream: the same seed gives the same draws again.
  void manual_seed(std::uint64_t seed);
  std::uint64_t initial_seed() const { return seed_; }
  std::uint32_t random() { return static_cast<std::uint32_t>(engine_()); }  // the next 32 bits
  std::uint64_t random64();  // two draws, the first one the high word (as torch)

 private:
  std::uint64_t seed_ = 0;
  std::mt19937 engine_;
};

// --8<-- [start:torch_api]
// torch's default CPU generator, and torch.manual_seed / torch.initial_seed.
Generator& default_generator();
void manual_seed(std::uint64_t seed);
std::uint64_t initial_seed();

// torch.randint(low, high, (n,), generator=g): n int64 values in [low, high), on the CPU.
// Throws dist::ConfigError unless low < high and n >= 0.
Tensor randint(std::int64_t low, std::int64_t high, std::int64_t n,
               Generator& generator = default_generator());

// torch.use_deterministic_algorithms / torch.are_deterministic_algorithms_enabled (off by default).
void use_deterministic_algorithms(bool on);
bool are_deterministic_algorithms_enabled();

// Post C's init_seeds(seed, cuda_deterministic): seeds the default generator and sets the
// deterministic switch. Call it with seed + rank, so that ranks draw different augmentations.
void init_seeds(std::uint64_t seed, bool deterministic = true);
// --8<-- [end:torch_api]

}  // namespace dist
