// dist/sampler.h — which dataset indices each rank reads, index for index like PyTorch 1.13.
//
//   dist::DistributedSampler sampler(dataset_size, {.shuffle = true, .seed = 0});
//   for (std::int64_t epoch = 0; epoch < epochs; ++epoch) {
//     sampler.set_epoch(epoch);                         // or every epoch repeats epoch 0's order
//     dist::BatchSampler batches(sampler, batch_size, /*drop_last=*/false);
//     for (const auto& batch : batches.batches()) train_step(batch);
//   }
//
// In data-parallel training every rank runs the same loop over its own shard of the data.
// DistributedSampler gives each rank its shard without any communication: every rank shuffles
// the same way (a generator seeded with seed + epoch, identical on all ranks), pads the list by
// repeating its start until it divides evenly (or, with drop_last, cuts the tail), and keeps every
// num_replicas-th index starting at its rank: indices[rank:total_size:num_replicas].
//
// What matches PyTorch 1.13 exactly, and is tested against it (tests/unit/sampler_parity.py):
//   * randperm(n, g): torch.randperm's CPU algorithm, a Fisher-Yates shuffle that swaps slot i
//     with slot i + g.random() % (n - i), for every n. (Later PyTorch releases switch to an
//     inside-out shuffle with 64-bit draws for n >= 214748364; 1.13 does not, as measured at
//     that n, and neither do we.)
//   * DistributedSampler, BatchSampler, SequentialSampler; RandomSampler, SubsetRandomSampler and
//     WeightedRandomSampler given the same Generator (or, without one, the same default
//     generator state: torch.manual_seed(s) here is dist::manual_seed(s), dist/seed.h).
// Where we differ, on purpose: every invalid argument is a dist::ConfigError (exit code 2) that
// names the value and what is allowed, where torch raises ValueError, RuntimeError or even
// ZeroDivisionError; and WeightedRandomSampler without replacement refuses to draw more indices
// than there are positive weights (torch 1.13 then returns zero-weight indices in an unspecified
// order).
//
// Taught in: chapter 07 (sampler).
// Built in: common/src/data/sampler.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "dist/seed.h"

namespace dist {

// torch.randperm(n, generator=g).tolist(): a permutation of 0..n-1 drawn from `generator`.
std::vector<std::int64_t> randperm(std::int64_t n, Generator& generator = default_generator());

// torch.multinomial(torch.tensor(weights, dtype=torch.double), num_samples, replacement,
// generator=g).tolist(): indices drawn with probability proportional to their weight.
std::vector<std::int64_t> multinomial(const std::vector<double>& weights, std::int64_t num_samples,
                                      bool replacement, Generator& generator = default_generator());

// torch.utils.data.Sampler: one pass over a dataset, as a list of indices.
class Sampler {
 public:
  virtual ~Sampler() = default;
  // `list(iter(sampler))`: one pass. Random samplers draw a new order on each call (their
  // generator advances, as torch's does); the sampler's own settings never change.
  virtual std::vector<std::int64_t> indices() const = 0;
  // `len(sampler)`: how many indices one pass yields.
  virtual std::int64_t size() const = 0;
};

// 0, 1, ..., dataset_size - 1, every pass.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(std::int64_t dataset_size);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return dataset_size_; }

 private:
  std::int64_t dataset_size_;
};

struct RandomSamplerOptions {
  bool replacement = false;
  std::int64_t num_samples = -1;  // -1: dataset_size
  // Not owned; must outlive the sampler. nullptr: each pass seeds a fresh generator with a draw
  // from dist::default_generator(), as torch does without a generator.
  Generator* generator = nullptr;
};

// A shuffled pass (randperm; passes longer than the dataset chain several permutations), or
// with replacement num_samples independent uniform draws.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(std::int64_t dataset_size, RandomSamplerOptions options = {});
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return num_samples_; }

 private:
  std::int64_t dataset_size_;
  std::int64_t num_samples_;
  bool replacement_;
  Generator* generator_;
};

// The given indices, in a random order: indices[randperm(len(indices))].
class SubsetRandomSampler : public Sampler {
 public:
  // `generator`: not owned; nullptr means dist::default_generator().
  explicit SubsetRandomSampler(std::vector<std::int64_t> indices, Generator* generator = nullptr);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }

 private:
  std::vector<std::int64_t> indices_;
  Generator* generator_;
};

// num_samples indices from 0..len(weights)-1, index i with probability weights[i] / sum.
class WeightedRandomSampler : public Sampler {
 public:
  // `generator`: not owned; nullptr means dist::default_generator().
  WeightedRandomSampler(std::vector<double> weights, std::int64_t num_samples,
                        bool replacement = true, Generator* generator = nullptr);
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return num_samples_; }

 private:
  std::vector<double> weights_;
  std::int64_t num_samples_;
  bool replacement_;
  Generator* generator_;
};

struct DistributedSamplerOptions {
  std::optional<int> num_replicas;  // not given: the default group's world size
  std::optional<int> rank;          // not given: the default group's rank
  bool shuffle = true;
  std::int64_t seed = 0;   // must be the same on every rank, or the shards overlap
  bool drop_last = false;  // true: cut the tail instead of padding
};

// torch.utils.data.distributed.DistributedSampler (PyTorch 1.13).
class DistributedSampler : public Sampler {
 public:
  DistributedSampler(std::int64_t dataset_size, DistributedSamplerOptions options = {});

  // Call at the start of every epoch: the shuffle is seeded with seed + epoch.
  void set_epoch(std::int64_t epoch) { epoch_ = epoch; }
  std::int64_t epoch() const { return epoch_; }

  // This rank's shard for the current epoch: padded_indices()[rank:total_size:num_replicas].
  std::vector<std::int64_t> indices() const override;
  std::int64_t size() const override { return num_samples_; }

  // The list every rank computes before taking its share: the epoch's order, padded by
  // repeating it from the start (or cut, with drop_last) to total_size entries. Entries at
  // positions >= dataset_size are the padding: indices that some rank reads a second time.
  std::vector<std::int64_t> padded_indices() const;

  std::int64_t dataset_size() const { return dataset_size_; }
  // ceil(dataset_size / num_replicas); with drop_last and an uneven split,
  // ceil((dataset_size - num_replicas) / num_replicas), which is floor(dataset_size /
  // num_replicas).
  std::int64_t num_samples() const { return num_samples_; }
  std::int64_t total_size() const { return num_samples_ * num_replicas_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  const DistributedSamplerOptions& options() const { return options_; }

 private:
  std::int64_t dataset_size_;
  DistributedSamplerOptions options_;
  int num_replicas_;
  int rank_;
  std::int64_t num_samples_;
  std::int64_t epoch_ = 0;
};

// torch.utils.data.BatchSampler: cuts each pass of a sampler (or a fixed list of indices) into
// batches of batch_size; the last one is shorter, or dropped with drop_last.
class BatchSampler {
 public:
  // Keeps a reference to `sampler`, which must outlive this BatchSampler (as in torch, where
  // the batch sampler holds the sampler). Each batches() call is one new pass of it.
  // A sampler reached through a pointer must outlive it too: write
  // `auto s = make_data_sampler(...); BatchSampler b(*s, ...)`, never `BatchSampler b(*make_...)`,
  // or pass the shared_ptr itself, which the BatchSampler then keeps alive.
  BatchSampler(const Sampler& sampler, std::int64_t batch_size, bool drop_last);
  BatchSampler(const Sampler&& sampler, std::int64_t batch_size, bool drop_last) = delete;
  BatchSampler(std::shared_ptr<const Sampler> sampler, std::int64_t batch_size, bool drop_last);
  // A fixed list (torch accepts any iterable of indices): every pass yields the same batches.
  BatchSampler(std::vector<std::int64_t> indices, std::int64_t batch_size, bool drop_last);

  std::vector<std::vector<std::int64_t>> batches() const;
  // len(batch_sampler): floor(len / batch_size) with drop_last, else ceil(len / batch_size).
  std::int64_t size() const;

 private:
  std::shared_ptr<const Sampler> owned_;  // a sampler given by shared_ptr, or the fixed list
  const Sampler* sampler_;
  std::int64_t batch_size_;
  bool drop_last_;
};

// Post D's make_data_sampler: DistributedSampler(dataset, shuffle=shuffle) when distributed
// (the default group's world size and rank, seed 0), else RandomSampler or SequentialSampler.
// Shared, so that a BatchSampler can hold it: BatchSampler(make_data_sampler(...), 32, false).
std::shared_ptr<Sampler> make_data_sampler(std::int64_t dataset_size, bool shuffle,
                                           bool distributed);

// Iteration-based training (a fixed number of steps, not epochs), as post D's
// make_batch_data_sampler(dataset, sampler, aspect_grouping, images_per_gpu, num_iters,
// start_iter) does it with maskrcnn-benchmark's IterationBasedBatchSampler: batches of
// `batch_size` (the last of a pass shorter, drop_last off) from passes of `sampler` chained until
// iteration `num_iterations`, starting after iteration `start_iter`. Before each pass, a
// DistributedSampler is given set_epoch(the iteration the pass starts at): the iteration number,
// not an epoch count.
//
// What that means for resuming: with start_iter = k the first pass starts a new order seeded
// with k, so a run resumed at iteration k does not see the batches the uninterrupted run saw
// from k on (unless k fell exactly where a pass began). Chapter 07 shows the difference.
class IterationBasedBatchSampler {
 public:
  // `sampler` must outlive this object; set_epoch is called on it if it is a DistributedSampler.
  IterationBasedBatchSampler(Sampler& sampler, std::int64_t batch_size, std::int64_t num_iterations,
                             std::int64_t start_iter = 0);

  // The batches of iterations start_iter + 1 .. num_iterations, in order.
  std::vector<std::vector<std::int64_t>> batches();
  // len(): num_iterations, as the original says, whatever start_iter is.
  std::int64_t size() const { return num_iterations_; }

 private:
  Sampler& sampler_;
  std::int64_t batch_size_;
  std::int64_t num_iterations_;
  std::int64_t start_iter_;
};

}  // namespace dist
