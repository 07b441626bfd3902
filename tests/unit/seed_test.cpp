// dist/seed.h and dist/zero_first.h's file writer, without processes: the generator against an
// independent std::mt19937, randint's two draw widths and its errors, and atomic writes. (Chapter
// 06's parity test compares the same draws with PyTorch's.)
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "dist/seed.h"
#include "dist/zero_first.h"
#include "ranks.h"

namespace {

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
