// Samplers as PyTorch 1.13 draws them (dist/sampler.h; taught in chapter 07).
#include "dist/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"

namespace dist {
namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

void require_dataset_size(const char* who, std::int64_t dataset_size, std::int64_t minimum) {
  if (dataset_size < minimum) {
    throw ConfigError(std::string(who) + ": dataset_size = " + str(dataset_size) + " must be " +
                      (minimum == 0 ? "0 or more" : "at least " + str(minimum)));
  }
}

// A uniform double in [0, 1) from the low 53 bits of one 64-bit draw, as torch's
// uniform_real_distribution<double> builds it on the CPU.
double uniform_double(Generator& generator) {
  constexpr std::uint64_t kMask = (std::uint64_t{1} << 53) - 1;
  constexpr double kScale = 1.0 / static_cast<double>(std::uint64_t{1} << 53);
  return static_cast<double>(generator.random64() & kMask) * kScale;
}

// One draw in [0, n), as torch.randint(high=n) takes it on the CPU: one 32-bit draw, or two
// (high word first) when the range needs more than 32 bits. The modulo's bias is torch's too.
std::int64_t uniform_below(std::int64_t n, Generator& generator) {
  const auto range = static_cast<std::uint64_t>(n);
  const std::uint64_t draw =
      range >= (std::uint64_t{1} << 32) ? generator.random64() : generator.random();
  return static_cast<std::int64_t>(draw % range);
}

void check_weights(const std::vector<double>& weights) {
  double sum = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!std::isfinite(weights[i]) || weights[i] < 0) {
      throw ConfigError("multinomial: weights[" + std::to_string(i) + "] = " +
                        std::to_string(weights[i]) + "; every weight must be finite and >= 0");
    }
    sum += weights[i];
  }
  if (!(sum > 0)) {
    throw ConfigError("multinomial: the weights (" + std::to_string(weights.size()) +
                      " of them) sum to 0; at least one must be positive");
  }
}

// Without replacement every draw needs an index of positive weight that was not drawn yet.
void check_distinct_draws(const char* who, const std::vector<double>& weights,
                          std::int64_t num_samples) {
  const auto positive =
      std::count_if(weights.begin(), weights.end(), [](double w) { return w > 0; });
  if (num_samples > positive) {
    throw ConfigError(std::string(who) + ": cannot draw " + str(num_samples) +
                      " distinct indices without replacement from " +
                      std::to_string(weights.size()) + " weights, of which " + str(positive) +
                      " are positive (an index of weight 0 is never drawn); draw at most " +
                      str(positive) + ", or use replacement");
  }
}

// torch's path without replacement: index i gets the key w_i / E_i with
// E_i ~ Exp(1), one draw per index in order; the num_samples largest keys win, largest first.
// (Equivalent to drawing without replacement: the Gumbel-top-k trick.)
std::vector<std::int64_t> multinomial_by_exponential_keys(const std::vector<double>& weights,
                                                          std::int64_t num_samples,
                                                          Generator& generator) {
  const auto n = static_cast<std::int64_t>(weights.size());
  std::vector<double> keys(weights.size());
  for (std::int64_t i = 0; i < n; ++i) {
    const double exponential = -1.0 * std::log(1.0 - uniform_double(generator));
    keys[i] = weights[i] / exponential;
  }
  std::vector<std::int64_t> order(weights.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return keys[a] > keys[b]; });
  order.resize(static_cast<std::size_t>(num_samples));
  return order;
}

// torch's CPU kernel with replacement: the normalised cumulative weights, then for every draw a
// uniform u and a binary search for the first slot whose cumulative weight is >= u.
std::vector<std::int64_t> multinomial_by_inversion(const std::vector<double>& weights,
                                                   std::int64_t num_samples, Generator& generator) {
  std::vector<double> cumulative(weights.size());
  double sum = 0;
  for (std::size_t j = 0; j < weights.size(); ++j) cumulative[j] = sum += weights[j];
  for (double& c : cumulative) c /= sum;
  cumulative.back() = 1;  // no draw may fall past the end through rounding
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(num_samples));
  for (std::int64_t s = 0; s < num_samples; ++s) {
    const double u = uniform_double(generator);
    out.push_back(std::lower_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin());
  }
  return out;
}

// The list BatchSampler(indices, ...) iterates when given a fixed list instead of a sampler.
class FixedList : public Sampler {
 public:
  explicit FixedList(std::vector<std::int64_t> indices) : indices_(std::move(indices)) {}
  std::vector<std::int64_t> indices() const override { return indices_; }
  std::int64_t size() const override { return static_cast<std::int64_t>(indices_.size()); }

 private:
  std::vector<std::int64_t> indices_;
};

int group_value_or(std::optional<int> given, const char* name, int (*from_group)()) {
  if (given) return *given;
  if (!is_initialized()) {
    throw ConfigError(std::string("DistributedSampler: .") + name +
                      " was not given and the default process group is not initialized; call "
                      "dist::init_process_group first, or pass both .num_replicas and .rank");
  }
  return from_group();
}

}  // namespace

std::vector<std::int64_t> randperm(std::int64_t n, Generator& generator) {
  if (n < 0) throw ConfigError("randperm: n = " + str(n) + " must be 0 or more");
  std::vector<std::int64_t> perm(static_cast<std::size_t>(n));
  std::iota(perm.begin(), perm.end(), 0);
  // Slot i takes a uniformly chosen one of the n - i entries not yet placed. One 32-bit draw per
  // slot, whatever n is: this is the order torch.randperm gives for the same generator state.
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const auto z =
        static_cast<std::int64_t>(generator.random() % static_cast<std::uint64_t>(n - i));
    std::swap(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(i + z)]);
  }
  return perm;
}

std::vector<std::int64_t> multinomial(const std::vector<double>& weights, std::int64_t num_samples,
                                      bool replacement, Generator& generator) {
  check_weights(weights);
  if (num_samples < 0) {
    throw ConfigError("multinomial: num_samples = " + str(num_samples) + " must be 0 or more");
  }
  if (num_samples == 0) return {};
  if (!replacement) check_distinct_draws("multinomial", weights, num_samples);
  // torch 1.13 picks the algorithm by `replacement` alone (other PyTorch releases take the
  // exponential keys for a single draw with replacement too, and so draw differently there).
  return replacement ? multinomial_by_inversion(weights, num_samples, generator)
                     : multinomial_by_exponential_keys(weights, num_samples, generator);
}

SequentialSampler::SequentialSampler(std::int64_t dataset_size) : dataset_size_(dataset_size) {
  require_dataset_size("SequentialSampler", dataset_size, 0);
}

std::vector<std::int64_t> SequentialSampler::indices() const {
  std::vector<std::int64_t> all(static_cast<std::size_t>(dataset_size_));
  std::iota(all.begin(), all.end(), 0);
  return all;
}

RandomSampler::RandomSampler(std::int64_t dataset_size, RandomSamplerOptions options)
    : dataset_size_(dataset_size),
      num_samples_(options.num_samples == -1 ? dataset_size : options.num_samples),
      replacement_(options.replacement),
      generator_(options.generator) {
  require_dataset_size("RandomSampler", dataset_size, 1);
  if (num_samples_ <= 0) {
    throw ConfigError("RandomSampler: num_samples = " + str(num_samples_) +
                      " must be positive (or -1 for the dataset size)");
  }
}

std::vector<std::int64_t> RandomSampler::indices() const {
  Generator seeded;
  Generator* generator = generator_;
  if (generator == nullptr) {
    // torch: seed = torch.empty((), dtype=torch.int64).random_() from the default generator,
    // that is, one 64-bit draw reduced to [0, 2^63).
    seeded.manual_seed(default_generator().random64() % (std::uint64_t{1} << 63));
    generator = &seeded;
  }
  const std::int64_t n = dataset_size_;
  std::vector<std::int64_t> out;
  out.reserve(static_cast<std::size_t>(num_samples_));
  if (replacement_) {
    for (std::int64_t i = 0; i < num_samples_; ++i) out.push_back(uniform_below(n, *generator));
    return out;
  }
  // Whole permutations while they fit, then the start of one more.
  while (static_cast<std::int64_t>(out.size()) < num_samples_) {
    const std::vector<std::int64_t> perm = randperm(n, *generator);
    const auto take =
        std::min<std::int64_t>(n, num_samples_ - static_cast<std::int64_t>(out.size()));
    out.insert(out.end(), perm.begin(), perm.begin() + take);
  }
  if (num_samples_ % n == 0) randperm(n, *generator);  // torch draws the (empty) tail all the same
  return out;
}

SubsetRandomSampler::SubsetRandomSampler(std::vector<std::int64_t> indices, Generator* generator)
    : indices_(std::move(indices)), generator_(generator) {}

std::vector<std::int64_t> SubsetRandomSampler::indices() const {
  Generator& generator = generator_ != nullptr ? *generator_ : default_generator();
  std::vector<std::int64_t> out;
  out.reserve(indices_.size());
  for (std::int64_t i : randperm(size(), generator))
    out.push_back(indices_[static_cast<std::size_t>(i)]);
  return out;
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, std::int64_t num_samples,
                                             bool replacement, Generator* generator)
    : weights_(std::move(weights)),
      num_samples_(num_samples),
      replacement_(replacement),
      generator_(generator) {
  if (num_samples <= 0) {
    throw ConfigError("WeightedRandomSampler: num_samples = " + str(num_samples) +
                      " must be positive");
  }
  check_weights(weights_);
  if (!replacement) check_distinct_draws("WeightedRandomSampler", weights_, num_samples);
}

std::vector<std::int64_t> WeightedRandomSampler::indices() const {
  Generator& generator = generator_ != nullptr ? *generator_ : default_generator();
  return multinomial(weights_, num_samples_, replacement_, generator);
}

DistributedSampler::DistributedSampler(std::int64_t dataset_size, DistributedSamplerOptions options)
    : dataset_size_(dataset_size),
      options_(options),
      num_replicas_(group_value_or(options.num_replicas, "num_replicas", get_world_size)),
      rank_(group_value_or(options.rank, "rank", get_rank)) {
  require_dataset_size("DistributedSampler", dataset_size, 0);
  if (num_replicas_ < 1) {
    throw ConfigError("DistributedSampler: num_replicas = " + std::to_string(num_replicas_) +
                      " must be at least 1 (it is the number of ranks sharing the data)");
  }
  if (rank_ < 0 || rank_ >= num_replicas_) {
    throw ConfigError("DistributedSampler: rank " + std::to_string(rank_) +
                      " is out of range for num_replicas = " + std::to_string(num_replicas_) +
                      "; rank must be in [0, " + std::to_string(num_replicas_ - 1) + "]");
  }
  const std::int64_t w = num_replicas_;
  // drop_last on an uneven split: ceil((size - W) / W) in torch, which is floor(size / W).
  num_samples_ =
      options.drop_last && dataset_size % w != 0 ? dataset_size / w : (dataset_size + w - 1) / w;
}

std::vector<std::int64_t> DistributedSampler::padded_indices() const {
  std::vector<std::int64_t> order;
  if (options_.shuffle) {
    // The same seed on every rank gives the same permutation on every rank: that is what makes
    // the shards disjoint without a word exchanged. seed + epoch changes it every epoch.
    Generator generator;
    generator.manual_seed(static_cast<std::uint64_t>(options_.seed) +
                          static_cast<std::uint64_t>(epoch_));
    order = randperm(dataset_size_, generator);
  } else {
    order = SequentialSampler(dataset_size_).indices();
  }
  const std::int64_t total = total_size();
  if (options_.drop_last) {
    order.resize(static_cast<std::size_t>(total));  // drop the tail
    return order;
  }
  // Pad by repeating the list from its start, as many times as needed: torch 1.13 writes
  // indices += (indices * ceil(padding / len))[:padding], that is order[i % len] for each i.
  const std::int64_t padding = total - dataset_size_;
  for (std::int64_t i = 0; i < padding; ++i) {
    order.push_back(order[static_cast<std::size_t>(i % dataset_size_)]);
  }
  return order;
}

std::vector<std::int64_t> DistributedSampler::indices() const {
  const std::vector<std::int64_t> all = padded_indices();
  std::vector<std::int64_t> mine;
  mine.reserve(static_cast<std::size_t>(num_samples_));
  for (std::int64_t i = rank_; i < total_size(); i += num_replicas_) {
    mine.push_back(all[static_cast<std::size_t>(i)]);
  }
  return mine;
}

BatchSampler::BatchSampler(const Sampler& sampler, std::int64_t batch_size, bool drop_last)
    : sampler_(&sampler), batch_size_(batch_size), drop_last_(drop_last) {
  if (batch_size <= 0) {
    throw ConfigError("BatchSampler: batch_size = " + str(batch_size) + " must be positive");
  }
}

BatchSampler::BatchSampler(std::shared_ptr<const Sampler> sampler, std::int64_t batch_size,
                           bool drop_last)
    : owned_(std::move(sampler)),
      sampler_(owned_.get()),
      batch_size_(batch_size),
      drop_last_(drop_last) {
  if (sampler_ == nullptr) throw ConfigError("BatchSampler: the sampler is a null pointer");
  if (batch_size <= 0) {
    throw ConfigError("BatchSampler: batch_size = " + str(batch_size) + " must be positive");
  }
}

BatchSampler::BatchSampler(std::vector<std::int64_t> indices, std::int64_t batch_size,
                           bool drop_last)
    : owned_(std::make_shared<FixedList>(std::move(indices))),
      sampler_(owned_.get()),
      batch_size_(batch_size),
      drop_last_(drop_last) {
  if (batch_size <= 0) {
    throw ConfigError("BatchSampler: batch_size = " + str(batch_size) + " must be positive");
  }
}

std::vector<std::vector<std::int64_t>> BatchSampler::batches() const {
  const std::vector<std::int64_t> all = sampler_->indices();
  std::vector<std::vector<std::int64_t>> out;
  for (std::size_t start = 0; start < all.size(); start += static_cast<std::size_t>(batch_size_)) {
    const std::size_t end = std::min(all.size(), start + static_cast<std::size_t>(batch_size_));
    if (drop_last_ && end - start < static_cast<std::size_t>(batch_size_)) break;
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(start),
                     all.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return out;
}

std::int64_t BatchSampler::size() const {
  const std::int64_t n = sampler_->size();
  return drop_last_ ? n / batch_size_ : (n + batch_size_ - 1) / batch_size_;
}

// Post D's make_data_sampler, with torch 1.13's DistributedSampler where the post's (from
// maskrcnn-benchmark) gives each rank a contiguous block and always shuffles.
std::shared_ptr<Sampler> make_data_sampler(std::int64_t dataset_size, bool shuffle,
                                           bool distributed) {
  if (distributed) {
    return std::make_shared<DistributedSampler>(dataset_size,
                                                DistributedSamplerOptions{.shuffle = shuffle});
  }
  if (shuffle) return std::make_shared<RandomSampler>(dataset_size);
  return std::make_shared<SequentialSampler>(dataset_size);
}

IterationBasedBatchSampler::IterationBasedBatchSampler(Sampler& sampler, std::int64_t batch_size,
                                                       std::int64_t num_iterations,
                                                       std::int64_t start_iter)
    : sampler_(sampler),
      batch_size_(batch_size),
      num_iterations_(num_iterations),
      start_iter_(start_iter) {
  if (batch_size < 1) {
    throw ConfigError("IterationBasedBatchSampler: batch_size must be positive, got " +
                      std::to_string(batch_size));
  }
  if (start_iter < 0 || num_iterations < start_iter) {
    throw ConfigError("IterationBasedBatchSampler: want 0 <= start_iter <= num_iterations, got " +
                      std::to_string(start_iter) + " and " + std::to_string(num_iterations));
  }
}

std::vector<std::vector<std::int64_t>> IterationBasedBatchSampler::batches() {
  auto* distributed = dynamic_cast<DistributedSampler*>(&sampler_);
  const BatchSampler pass(sampler_, batch_size_, /*drop_last=*/false);
  std::vector<std::vector<std::int64_t>> out;
  std::int64_t iteration = start_iter_;
  // The original loops while iteration <= num_iterations; a pass that reaches num_iterations
  // exactly is followed by one more set_epoch and a pass that yields nothing. The same here, so
  // that the sampler ends in the same state.
  while (iteration <= num_iterations_) {
    if (distributed != nullptr) distributed->set_epoch(iteration);
    const std::vector<std::vector<std::int64_t>> batches = pass.batches();
    if (batches.empty()) {
      // The original would loop for ever here.
      throw ConfigError(
          "IterationBasedBatchSampler: the sampler yields no batch (an empty "
          "dataset, or this rank's shard is empty), so iteration " +
          std::to_string(num_iterations_) + " would never come");
    }
    for (const auto& batch : batches) {
      if (++iteration > num_iterations_) break;
      out.push_back(batch);
    }
  }
  return out;
}

}  // namespace dist
