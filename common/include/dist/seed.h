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
// DataLoader workers (torch.utils.data, the same in 1.13 and today's 2.x): each time an epoch
// starts (iter(loader)), the loader draws one base_seed from its generator, and worker w seeds
// torch and Python's random with base_seed + w (NumPy with a hash of both) before it loads
// anything. So a worker's augmentations follow from the generator of the rank that started it: the
// same seed on every rank gives worker w of every rank the same draws. dataloader_base_seed and
// dataloader_worker_seed compute those seeds, bit for bit (chapter 06's parity test runs a real
// DataLoader beside them).
//
// Without init_seeds the default generator is seeded from std::random_device, so an unseeded
// program draws differently on every run, as PyTorch's default generator does. Generators are
// not thread-safe: give each thread its own.
//
// Taught in: chapter 06 (seeds); a generator's state, saved and restored, in chapter 11
// (fault_tolerance).
// Built in: common/src/data/seed.cpp.
#pragma once

#include <cstdint>
#include <optional>
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
  // The second value of torch's last Box-Muller pair for float64 normals, kept for the next
  // draw (torch's next_double_normal_sample); manual_seed and set_state forget it.
  std::optional<double>& next_double_normal_sample() { return next_double_normal_; }

  // g.get_state() / g.set_state(state), as torch.Generator's: the whole generator, the draws to
  // come included, as a tensor (int64: the seed, then the Mersenne Twister's words and position,
  // 626 values with libstdc++). What a snapshot saves, so that a resumed run draws what the
  // uninterrupted one would have drawn (chapter 11); a tensor, so ranks can gather theirs.
  // torch's state is a ByteTensor in its own layout: the two do not mix. set_state throws
  // dist::ConfigError when the tensor is not a state get_state made.
  Tensor get_state() const;
  void set_state(const Tensor& state);

 private:
  std::uint64_t seed_ = 0;
  std::mt19937 engine_;
  std::optional<double> next_double_normal_;
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

// torch.randn(n, generator=g): n float32 values from the standard normal distribution, on the
// CPU, value for value as torch 1.13 draws them on an x86 CPU with AVX2 (what torch picks there):
//   * n < 16: one float64 normal per value (Box-Muller on two 53-bit uniforms, the pair's second
//     value kept in the generator for the next draw), rounded to float32;
//   * n >= 16: n 24-bit uniforms first, then Box-Muller on each run of 16 (the first 8 against
//     the next 8), in float32 with torch's AVX2 log and sincos (Cephes polynomials, fused
//     multiply-adds); when 16 does not divide n, 16 fresh uniforms redo the last 16 values.
// Torch without AVX2 (or on other CPUs) uses std::log/cos/sin for the second case and may differ
// in the last bits. Throws dist::ConfigError unless n >= 0.
Tensor randn(std::int64_t n, Generator& generator = default_generator());

// numpy.random.RandomState(seed): NumPy's legacy generator, which PowerSGD (torch's
// powerSGD_hook) keeps to draw the seeds of its random matrices. The same Mersenne Twister,
// seeded as std::mt19937 is; randint(high) is RandomState.randint(high) for 0 < high <= 2^32:
// 32-bit draws masked to the smallest 2^k - 1 >= high - 1, redrawn while above it (checked
// against NumPy 1.24 by tests/unit/randn_parity.py).
class NumpyRandomState {
 public:
  explicit NumpyRandomState(std::uint32_t seed) : engine_(seed) {}
  std::int64_t randint(std::int64_t high);

 private:
  std::mt19937 engine_;
};

// What iter(DataLoader) draws for its workers: torch.empty((), dtype=torch.int64).random_(
// generator=loader.generator), from the default generator when the loader has none. Two 32-bit
// draws, high word first, kept to 63 bits: a value in [0, 2^63).
std::int64_t dataloader_base_seed(Generator& generator = default_generator());
// The seed worker `worker_id` passes to torch.manual_seed and random.seed: base_seed + worker_id
// (torch.utils.data.get_worker_info().seed, and torch.initial_seed() inside the worker).
std::uint64_t dataloader_worker_seed(std::int64_t base_seed, int worker_id);

}  // namespace dist
