// dist/seed.h and dist/zero_first.h's file writer, without processes: the generator against an
// independent std::mt19937, randint's two draw widths and its errors, a DataLoader's worker seeds
// (against std::mt19937 and torch's answers), and atomic writes. (Chapter 06's parity test
// compares the same draws with PyTorch's, a real DataLoader's included.)
#include <unistd.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "dist/seed.h"
#include "dist/zero_first.h"
#include "errors.h"
#include "ranks.h"

namespace {

using dist::testing::config_error;
using dist::testing::contains;

TEST(Generator, IsAMersenneTwisterSeededWithTheLow32BitsOfTheSeed) {
  dist::Generator g(42);
  std::mt19937 reference(42);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(g.random(), reference());
  dist::Generator wide((std::uint64_t{7} << 32) | 42);  // torch keeps only the low 32 bits
  dist::Generator narrow(42);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(wide.random(), narrow.random());
}

TEST(Generator, ManualSeedRestartsTheStream) {
  dist::Generator g(5);
  const auto first = g.random();
  g.random();
  g.manual_seed(5);
  EXPECT_EQ(g.random(), first);
  EXPECT_EQ(g.initial_seed(), 5u);
}

TEST(Generator, SetStateResumesTheStreamWhereGetStateLeftIt) {
  dist::Generator g(7);
  for (int i = 0; i < 1000; ++i) g.random();  // past the first 624-word refill
  const dist::Tensor saved = g.get_state();
  std::vector<std::uint32_t> next;
  for (int i = 0; i < 700; ++i) next.push_back(g.random());
  dist::Generator resumed(99);  // another seed: set_state replaces everything
  resumed.set_state(saved);
  EXPECT_EQ(resumed.initial_seed(), 7u);
  for (std::uint32_t v : next) ASSERT_EQ(resumed.random(), v);
  dist::Generator fresh(7);  // the seed alone starts the stream over
  EXPECT_NE(fresh.random(), next[0]);
  EXPECT_TRUE(contains(config_error([&] {
                         resumed.set_state(dist::Tensor::from<std::int64_t>({7, 1, 2, 3}));
                       }),
                       "want the int64 tensor of 626 values that get_state makes, got 4"));
}

TEST(Randint, TakesOneDrawPerElementModuloTheRange) {
  dist::Generator g(3);
  std::mt19937 reference(3);
  const auto t = dist::randint(-5, 95, 200, g);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    EXPECT_EQ(t.item(i), static_cast<double>(-5 + static_cast<std::int64_t>(reference() % 100)));
  }
}

TEST(Randint, RangesOf2To32OrMoreTakeTwoDrawsHighWordFirst) {
  dist::Generator g(11);
  std::mt19937 reference(11);
  const std::int64_t range = std::int64_t{1} << 40;
  const auto values = dist::randint(0, range, 50, g).to_vector<std::int64_t>();
  for (std::int64_t v : values) {
    const std::uint64_t high = reference(), low = reference();
    EXPECT_EQ(v,
              static_cast<std::int64_t>(((high << 32) | low) % static_cast<std::uint64_t>(range)));
  }
}

TEST(Randint, InitSeedsMakesTheDefaultGeneratorRepeat) {
  dist::init_seeds(123, false);
  const auto a = dist::randint(0, 1000, 8);
  EXPECT_FALSE(dist::are_deterministic_algorithms_enabled());
  dist::init_seeds(123);
  EXPECT_TRUE(dist::are_deterministic_algorithms_enabled());
  EXPECT_TRUE(dist::randint(0, 1000, 8).equal(a));
  dist::use_deterministic_algorithms(false);
}

TEST(Randint, RefusesAnEmptyRangeAndANegativeCount) {
  EXPECT_THROW(dist::randint(5, 5, 1), dist::ConfigError);
  EXPECT_THROW(dist::randint(0, 10, -1), dist::ConfigError);
  EXPECT_EQ(dist::randint(0, 10, 0).numel(), 0);
}

// Under 16 values randn draws float64 pairs (Box-Muller on two 53-bit uniforms, from two 64-bit
// draws each) and keeps the pair's second value for the next call, as torch's generator does:
// against an independent std::mt19937, a pair costs 4 words, and a reseed forgets the kept value.
// (Its values against torch's, both roads: tests/unit/randn_parity.py.)
TEST(Randn, KeepsTheSecondValueOfAPairForTheNextCall) {
  std::mt19937 words(7);
  auto uniform = [&] {
    const std::uint64_t high = words(), low = words();
    return static_cast<double>(((high << 32) | low) & ((1ULL << 53) - 1)) * std::ldexp(1.0, -53);
  };
  const double u1 = uniform(), u2 = uniform();
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * 3.14159265358979323846 * u1;
  dist::Generator g(7);
  EXPECT_EQ(dist::randn(1, g).item(0), static_cast<float>(radius * std::cos(theta)));
  g.manual_seed(7);  // forgets the kept sine: the next value is the cosine again
  EXPECT_EQ(dist::randn(1, g).item(0), static_cast<float>(radius * std::cos(theta)));
  EXPECT_EQ(dist::randn(1, g).item(0), static_cast<float>(radius * std::sin(theta)));
  EXPECT_EQ(g.random(), words());  // the second value took no draw
  EXPECT_THROW(dist::randn(-1, g), dist::ConfigError);
  EXPECT_EQ(dist::randn(0, g).numel(), 0);
}

// NumPy's legacy randint: 32-bit draws masked to the smallest 2^k - 1 covering high - 1, redrawn
// above it. For high = 2^30 the mask keeps 30 bits and nothing is redrawn.
TEST(NumpyRandomState, MasksEachDrawAndRedrawsAboveTheRange) {
  dist::NumpyRandomState state(5);
  std::mt19937 reference(5);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(state.randint(std::int64_t{1} << 30), reference() & ((1U << 30) - 1));
  }
  EXPECT_THROW(state.randint(0), dist::ConfigError);
}

// The base seed of a DataLoader's workers, against an independent std::mt19937 (two draws, high
// word first, low 63 bits) and against torch 1.13's own answers:
//   torch.manual_seed(s); torch.empty((), dtype=torch.int64).random_().item()
TEST(DataLoaderSeeds, BaseSeedIsTwoDrawsHighWordFirstKeptTo63Bits) {
  for (std::uint64_t seed : {0ULL, 1ULL, 7ULL, 123456789ULL}) {
    dist::Generator g(seed);
    std::mt19937 reference(static_cast<std::uint32_t>(seed));
    const std::uint64_t high = reference(), low = reference();
    EXPECT_EQ(dist::dataloader_base_seed(g),
              static_cast<std::int64_t>(((high << 32) | low) & 0x7fffffffffffffffULL));
  }
  const auto base = [](std::uint64_t seed) {
    dist::Generator g(seed);
    return dist::dataloader_base_seed(g);
  };
  EXPECT_EQ(base(0), 900450186894289455);
  EXPECT_EQ(base(1), 7692698082559361259);
  EXPECT_EQ(base(7), 1407639518939636932);
  EXPECT_EQ(base((std::uint64_t{1} << 32) + 5), 4095051218741643470);
}

// Worker w's first draws: torch.manual_seed(base_seed + w) in the worker, then
// torch.randint(0, 1000, (3,)); the answers a real DataLoader (num_workers=2) gave after
// torch.manual_seed(0) in torch 1.13.
TEST(DataLoaderSeeds, WorkerWDrawsFromBaseSeedPlusW) {
  const std::int64_t base = 900450186894289455;
  EXPECT_EQ(dist::dataloader_worker_seed(base, 1), 900450186894289456u);
  dist::Generator worker0(dist::dataloader_worker_seed(base, 0));
  dist::Generator worker1(dist::dataloader_worker_seed(base, 1));
  EXPECT_EQ(dist::randint(0, 1000, 3, worker0).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{906, 10, 804}));
  EXPECT_EQ(dist::randint(0, 1000, 3, worker1).to_vector<std::int64_t>(),
            (std::vector<std::int64_t>{724, 2, 724}));
  EXPECT_THROW(dist::dataloader_worker_seed(base, -1), dist::ConfigError);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WriteFileAtomically, ReplacesTheFileWholeAndLeavesNoTemporary) {
  char dir_template[] = "/tmp/dist_seed_test_XXXXXX";
  const std::string dir = ::mkdtemp(dir_template);
  const std::string path = dir + "/data.txt";
  dist::write_file_atomically(path, "first\n");
  dist::write_file_atomically(path, "second version\n");
  EXPECT_EQ(read(path), "second version\n");
  std::remove(path.c_str());
  EXPECT_EQ(::rmdir(dir.c_str()), 0) << "a temporary file was left in " << dir;
}

TEST(WriteFileAtomically, AMissingDirectoryIsAnErrorNamingThePath) {
  try {
    dist::write_file_atomically("/nonexistent-dir-for-dist/x.txt", "x");
    FAIL() << "expected an error";
  } catch (const dist::Error& e) {
    EXPECT_TRUE(contains(e.what(), "/nonexistent-dir-for-dist/x.txt")) << e.what();
  }
}

}  // namespace
