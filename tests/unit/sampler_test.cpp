// The samplers of dist/sampler.h against closed forms (sizes, padding, drop_last, batches,
// errors). Index-for-index agreement with PyTorch is sampler_parity.py's job.
#include "dist/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "dist/check.h"

namespace {

using Indices = std::vector<std::int64_t>;

dist::DistributedSampler make(std::int64_t n, int world, int rank, bool shuffle = true,
                              bool drop_last = false, std::int64_t seed = 0) {
  return dist::DistributedSampler(n, {.num_replicas = world,
                                      .rank = rank,
                                      .shuffle = shuffle,
                                      .seed = seed,
                                      .drop_last = drop_last});
}

Indices iota(std::int64_t n) {
  Indices v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

Indices sorted(Indices v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Whether `body` throws a dist::ConfigError whose message contains `text`.
template <typename F>
bool throws_config_error(F body, const std::string& text = "") {
  try {
    body();
  } catch (const dist::ConfigError& e) {
    return std::string(e.what()).find(text) != std::string::npos;
  }
  return false;
}

// Every index of every rank, in one multiset.
std::map<std::int64_t, int> reads(std::int64_t n, int world, bool drop_last, std::int64_t epoch) {
  std::map<std::int64_t, int> count;
  for (int r = 0; r < world; ++r) {
    auto sampler = make(n, world, r, true, drop_last);
    sampler.set_epoch(epoch);
    for (std::int64_t i : sampler.indices()) ++count[i];
  }
  return count;
}

// randperm: the known answer torch.randperm(10, generator=torch.Generator().manual_seed(0)) gives.
TEST(Randperm, MatchesTorchsKnownAnswer) {
  dist::Generator g(0);
  EXPECT_EQ(dist::randperm(10, g), (Indices{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
}

// Any n gives each of 0..n-1 exactly once; n = 0 is an empty permutation, n < 0 an error.
TEST(Randperm, IsAPermutation) {
  dist::Generator g(5);
  for (std::int64_t n : {0, 1, 2, 3, 17, 1000}) EXPECT_EQ(sorted(dist::randperm(n, g)), iota(n));
  EXPECT_TRUE(throws_config_error([&] { dist::randperm(-1, g); }, "n = -1"));
}

// num_samples = ceil(n / W); total_size = num_samples * W.
TEST(DistributedSampler, NumSamplesIsCeilOfSizeOverReplicas) {
  for (std::int64_t n : {0, 1, 2, 7, 10, 11, 100}) {
    for (int w = 1; w <= 8; ++w) {
      const auto s = make(n, w, w - 1);
      EXPECT_EQ(s.num_samples(), (n + w - 1) / w) << "n=" << n << " W=" << w;
      EXPECT_EQ(s.size(), s.num_samples());
      EXPECT_EQ(s.total_size(), s.num_samples() * w);
      EXPECT_EQ(static_cast<std::int64_t>(s.indices().size()), s.num_samples());
    }
  }
}

// With drop_last on an uneven split, num_samples = ceil((n - W) / W) = floor(n / W); an even split
// keeps everything.
TEST(DistributedSampler, DropLastNumSamplesIsFloor) {
  for (std::int64_t n : {0, 1, 2, 7, 10, 11, 100}) {
    for (int w = 1; w <= 8; ++w) {
      const auto s = make(n, w, 0, true, /*drop_last=*/true);
      EXPECT_EQ(s.num_samples(), n / w) << "n=" << n << " W=" << w;
      EXPECT_EQ(static_cast<std::int64_t>(s.indices().size()), n / w);
    }
  }
}

// Without shuffle, 10 indices on 4 ranks pad to 12 with 0 and 1: rank r reads r, r+4, r+8 mod 10.
TEST(DistributedSampler, PadsByRepeatingFromTheStart) {
  const auto s = make(10, 4, 0, /*shuffle=*/false);
  Indices want = iota(10);
  want.insert(want.end(), {0, 1});
  EXPECT_EQ(s.padded_indices(), want);
  EXPECT_EQ(make(10, 4, 2, false).indices(), (Indices{2, 6, 0}));
  EXPECT_EQ(make(10, 4, 3, false).indices(), (Indices{3, 7, 1}));
}

// When more padding is needed than there are indices (2 indices, 7 ranks), the whole list repeats.
TEST(DistributedSampler, PadsByRepeatingTheWholeListWhenPaddingExceedsIt) {
  EXPECT_EQ(make(2, 7, 0, false).padded_indices(), (Indices{0, 1, 0, 1, 0, 1, 0}));
  EXPECT_EQ(make(1, 4, 3, false).indices(), (Indices{0}));
}

// drop_last cuts the list to W * floor(n / W): 10 on 4 ranks keeps 0..7.
TEST(DistributedSampler, DropLastCutsTheTail) {
  EXPECT_EQ(make(10, 4, 0, false, true).padded_indices(), iota(8));
  EXPECT_EQ(make(10, 4, 3, false, true).indices(), (Indices{3, 7}));
  EXPECT_TRUE(make(3, 4, 0, false, true).indices().empty());  // fewer indices than ranks
}

// Shuffled: every index is read at least once, and exactly total_size - n reads are repeats.
TEST(DistributedSampler, ShardsCoverTheDatasetWithPaddingAsTheOnlyRepeats) {
  for (std::int64_t n : {1, 2, 7, 10, 11, 100}) {
    for (int w = 1; w <= 8; ++w) {
      const auto count = reads(n, w, false, 3);
      const std::int64_t total = (n + w - 1) / w * w;
      ASSERT_EQ(static_cast<std::int64_t>(count.size()), n) << "n=" << n << " W=" << w;
      int repeats = 0;
      for (const auto& [index, times] : count) {
        EXPECT_TRUE(index >= 0 && index < n);
        repeats += times - 1;
      }
      EXPECT_EQ(repeats, total - n) << "n=" << n << " W=" << w;
    }
  }
}

// Shuffled with drop_last: the ranks read W * floor(n / W) distinct indices, none twice.
TEST(DistributedSampler, DropLastShardsAreDisjoint) {
  for (std::int64_t n : {1, 2, 7, 10, 11, 100}) {
    for (int w = 1; w <= 8; ++w) {
      const auto count = reads(n, w, true, 2);
      EXPECT_EQ(static_cast<std::int64_t>(count.size()), n / w * w) << "n=" << n << " W=" << w;
      for (const auto& [index, times] : count) EXPECT_EQ(times, 1);
    }
  }
}

// The order depends on seed + epoch only: (seed 1, epoch 0) == (seed 0, epoch 1), and it changes
// from one epoch to the next; the same epoch gives the same order again.
TEST(DistributedSampler, ShufflesWithSeedPlusEpoch) {
  auto a = make(100, 1, 0, true, false, /*seed=*/1);
  auto b = make(100, 1, 0, true, false, /*seed=*/0);
  b.set_epoch(1);
  EXPECT_EQ(a.indices(), b.indices());
  const Indices epoch1 = b.indices();
  b.set_epoch(2);
  EXPECT_NE(b.indices(), epoch1);
  b.set_epoch(1);
  EXPECT_EQ(b.indices(), epoch1);
  EXPECT_EQ(b.epoch(), 1);
}

// Known answers from torch 1.13: DistributedSampler(range(11), num_replicas=2, rank=r).
TEST(DistributedSampler, MatchesTorchsKnownAnswer) {
  EXPECT_EQ(make(11, 2, 0).indices(), (Indices{10, 4, 5, 2, 9, 6}));
  EXPECT_EQ(make(11, 2, 1).indices(), (Indices{0, 3, 8, 1, 7, 10}));
}

// Bad arguments are ConfigErrors that name the value (torch: ValueError for the rank).
TEST(DistributedSampler, RejectsBadArgumentsWithAClearMessage) {
  EXPECT_TRUE(throws_config_error([] { make(10, 2, 2); }, "rank 2 is out of range"));
  EXPECT_TRUE(throws_config_error([] { make(10, 2, -1); }, "[0, 1]"));
  EXPECT_TRUE(throws_config_error([] { make(10, 0, 0); }, "num_replicas = 0"));
  EXPECT_TRUE(throws_config_error([] { make(-1, 2, 0); }, "dataset_size = -1"));
  // Without a process group, num_replicas and rank must be given.
  const auto neither = [] { dist::DistributedSampler s(10); };
  const auto no_rank = [] { dist::DistributedSampler s(10, {.num_replicas = 2}); };
  EXPECT_TRUE(throws_config_error(neither, "init_process_group"));
  EXPECT_TRUE(throws_config_error(no_rank, ".rank was not given"));
}

// len(BatchSampler) is ceil(len / B), or floor with drop_last: the docstring example post D
// copies from torch.
TEST(BatchSampler, CutsPassesIntoBatches) {
  const dist::SequentialSampler ten(10);
  const dist::BatchSampler keep(ten, 3, false), drop(ten, 3, true);
  EXPECT_EQ(keep.batches(), (std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}, {9}}));
  EXPECT_EQ(drop.batches(), (std::vector<Indices>{{0, 1, 2}, {3, 4, 5}, {6, 7, 8}}));
  for (std::int64_t n : {0, 1, 5, 6, 7, 100}) {
    for (std::int64_t b : {1, 2, 3, 6, 7, 200}) {
      const dist::BatchSampler k(iota(n), b, false), d(iota(n), b, true);
      EXPECT_EQ(k.size(), (n + b - 1) / b);
      EXPECT_EQ(d.size(), n / b);
      EXPECT_EQ(static_cast<std::int64_t>(k.batches().size()), k.size());
      EXPECT_EQ(static_cast<std::int64_t>(d.batches().size()), d.size());
    }
  }
  EXPECT_TRUE(throws_config_error([&] { dist::BatchSampler(ten, 0, false); }, "batch_size = 0"));
}

// Each batches() call is a new pass of the sampler: a random sampler gives new batches.
TEST(BatchSampler, EveryPassDrawsAgain) {
  dist::Generator g(1);
  const dist::RandomSampler random(50, {.generator = &g});
  const dist::BatchSampler batches(random, 8, false);
  EXPECT_NE(batches.batches(), batches.batches());
}

TEST(SequentialSampler, CountsUp) {
  EXPECT_EQ(dist::SequentialSampler(4).indices(), (Indices{0, 1, 2, 3}));
  EXPECT_TRUE(dist::SequentialSampler(0).indices().empty());
}

// Without replacement, a pass of num_samples > n chains permutations; with it, draws lie in
// [0, n). Without a generator, the default generator's state decides (torch.manual_seed).
TEST(RandomSampler, PermutationsOrDrawsInRange) {
  dist::Generator g(3);
  const Indices pass = dist::RandomSampler(5, {.num_samples = 12, .generator = &g}).indices();
  ASSERT_EQ(pass.size(), 12u);
  EXPECT_EQ(sorted(Indices(pass.begin(), pass.begin() + 5)), iota(5));
  EXPECT_EQ(sorted(Indices(pass.begin() + 5, pass.begin() + 10)), iota(5));
  const dist::RandomSampler with_replacement(
      7, {.replacement = true, .num_samples = 300, .generator = &g});
  for (std::int64_t i : with_replacement.indices()) EXPECT_TRUE(i >= 0 && i < 7);
  dist::manual_seed(9);
  const Indices first = dist::RandomSampler(20).indices();
  dist::manual_seed(9);
  EXPECT_EQ(dist::RandomSampler(20).indices(), first);
  EXPECT_TRUE(throws_config_error([] { dist::RandomSampler(0); }, "dataset_size = 0"));
  EXPECT_TRUE(
      throws_config_error([] { dist::RandomSampler(5, {.num_samples = 0}); }, "num_samples = 0"));
}

TEST(SubsetRandomSampler, ShufflesTheGivenIndices) {
  dist::Generator g(4);
  const Indices subset{3, 30, 300, 3000};
  EXPECT_EQ(sorted(dist::SubsetRandomSampler(subset, &g).indices()), subset);
}

// With replacement the frequencies follow the weights (1:2:3:4 over 100000 draws, within 1%);
// a zero weight is never drawn; without replacement the draws are distinct.
TEST(WeightedRandomSampler, DrawsInProportionToTheWeights) {
  dist::Generator g(8);
  const dist::WeightedRandomSampler sampler({1, 2, 3, 4, 0}, 100000, true, &g);
  std::map<std::int64_t, int> count;
  for (std::int64_t i : sampler.indices()) ++count[i];
  for (std::int64_t i = 0; i < 4; ++i) EXPECT_NEAR(count[i] / 100000.0, (i + 1) / 10.0, 0.01);
  EXPECT_EQ(count.count(4), 0u);
  const Indices distinct = dist::WeightedRandomSampler({5, 1, 0, 2}, 3, false, &g).indices();
  EXPECT_EQ(sorted(distinct), (Indices{0, 1, 3}));
}

TEST(WeightedRandomSampler, RejectsBadWeights) {
  const auto negative = [] { dist::WeightedRandomSampler({1, -1}, 2); };
  const auto all_zero = [] { dist::WeightedRandomSampler({0, 0}, 1); };
  const auto no_draws = [] { dist::WeightedRandomSampler({1, 2}, 0); };
  const auto too_many = [] { dist::WeightedRandomSampler({1, 0, 2}, 3, false); };
  EXPECT_TRUE(throws_config_error(negative, "weights[1]"));
  EXPECT_TRUE(throws_config_error(all_zero, "sum to 0"));
  EXPECT_TRUE(throws_config_error(no_draws, "num_samples = 0"));
  EXPECT_TRUE(throws_config_error(too_many, "from 3 weights, of which 2 are positive"));
}

// Post D's make_data_sampler: distributed -> DistributedSampler (which needs a group, or says
// so), shuffle -> RandomSampler, else SequentialSampler.
TEST(MakeDataSampler, PicksPostDsSampler) {
  const auto shuffled = dist::make_data_sampler(10, true, false);
  const auto in_order = dist::make_data_sampler(10, false, false);
  EXPECT_NE(dynamic_cast<const dist::RandomSampler*>(shuffled.get()), nullptr);
  EXPECT_NE(dynamic_cast<const dist::SequentialSampler*>(in_order.get()), nullptr);
  const auto distributed = [] { dist::make_data_sampler(10, true, true); };
  EXPECT_TRUE(throws_config_error(distributed, "init_process_group"));
}

// A BatchSampler given the shared_ptr keeps the sampler alive: the one-liner is safe.
TEST(BatchSampler, KeepsASharedSamplerAlive) {
  const dist::BatchSampler batches(dist::make_data_sampler(7, false, false), 3, false);
  EXPECT_EQ(batches.batches(), (std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {3, 4, 5}, {6}}));
  EXPECT_EQ(batches.size(), 3);
}

// ---- IterationBasedBatchSampler (post D's make_batch_data_sampler with num_iters) -------------

// 10 samples, 1 rank, batches of 2: a pass is 5 iterations. The uninterrupted run seeds its passes
// with set_epoch(0), (5), (10); a run resumed at iteration 5, where a pass begins, sees the same
// batches from there on, and one resumed at 3 does not: its first pass is seeded with 3.
TEST(IterationBasedBatchSampler, ResumingReplaysTheRunOnlyWhereAPassBegan) {
  const auto run = [](std::int64_t start_iter) {
    dist::DistributedSampler sampler(10, {.num_replicas = 1, .rank = 0, .seed = 4});
    return dist::IterationBasedBatchSampler(sampler, 2, 12, start_iter).batches();
  };
  const auto whole = run(0);
  ASSERT_EQ(whole.size(), 12u);
  const std::vector<Indices> tail(whole.begin() + 5, whole.end());
  EXPECT_EQ(run(5), tail);
  const auto resumed_mid_pass = run(3);
  ASSERT_EQ(resumed_mid_pass.size(), 9u);
  EXPECT_NE(resumed_mid_pass, std::vector<Indices>(whole.begin() + 3, whole.end()));
  // Its first batch is the first of the order seeded with epoch 3.
  dist::DistributedSampler epoch3(10, {.num_replicas = 1, .rank = 0, .seed = 4});
  epoch3.set_epoch(3);
  const Indices order = epoch3.indices();
  EXPECT_EQ(resumed_mid_pass.front(), Indices(order.begin(), order.begin() + 2));
}

TEST(IterationBasedBatchSampler, AnEmptyShardIsAnErrorNotAnEndlessLoop) {
  dist::SequentialSampler empty(0);
  dist::IterationBasedBatchSampler iterations(empty, 4, 10);
  try {
    iterations.batches();
    FAIL() << "expected a ConfigError";
  } catch (const dist::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("iteration 10 would never come"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dist::IterationBasedBatchSampler(empty, 4, 0).size(), 0);
}

}  // namespace
