// The C++ half of sampler_parity.py: reads one case per line from stdin and prints one line per
// case, "len:L i0 i1 ...", with the passes of one sampler (or the batches of a BatchSampler)
// separated by ';' (or ','). The cases:
//   randperm SEED N
//   sequential N
//   distributed N W RANK SHUFFLE SEED EPOCH DROP_LAST
//   batch N W RANK SHUFFLE SEED EPOCH DROP_LAST BATCH_SIZE BATCH_DROP_LAST
//   iteration N W RANK SHUFFLE SEED BATCH_SIZE NUM_ITERATIONS START_ITER
//     (an IterationBasedBatchSampler over a DistributedSampler; the line ends with
//     " epoch:E", the sampler's epoch afterwards)
//   random N REPLACEMENT NUM_SAMPLES GEN PASSES
//   subset GEN PASSES I0 I1 ...
//   weighted NUM_SAMPLES REPLACEMENT GEN PASSES W0 W1 ...
// Booleans are 0/1. GEN is an integer (a dist::Generator seeded with it, shared by the passes,
// as torch.Generator().manual_seed(GEN)) or "none:S" (no generator: the default generator,
// seeded with S first, as torch.manual_seed(S)). NUM_SAMPLES -1 means "not given", and so do W -1
// and RANK -1 of a distributed case: the sampler asks the default group, which this program never
// initialises (chapter 07 quotes the error that gives).
#include <cstdint>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "dist/check.h"
#include "dist/run_main.h"
#include "dist/sampler.h"
#include "parity_driver.h"

namespace {

template <typename T>
T parse(const std::string& token) {
  return parity::parse<T>(token, "sampler_driver");
}

template <typename T>
T next(std::istringstream& in) {
  std::string token;
  if (!(in >> token)) throw dist::ConfigError("sampler_driver: a case line is too short");
  return parse<T>(token);
}

template <typename T>
std::vector<T> rest(std::istringstream& in) {
  std::vector<T> values;
  for (std::string token; in >> token;) values.push_back(parse<T>(token));
  return values;
}

std::string join(const std::vector<std::int64_t>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i)
    text += (i ? " " : "") + std::to_string(values[i]);
  return text;
}

// "GEN": the generator a sampler uses, or nullptr after seeding the default generator.
dist::Generator* pick_generator(const std::string& gen, dist::Generator& own) {
  if (gen.rfind("none:", 0) == 0) {
    dist::manual_seed(static_cast<std::uint64_t>(parse<std::int64_t>(gen.substr(5))));
    return nullptr;
  }
  own.manual_seed(static_cast<std::uint64_t>(parse<std::int64_t>(gen)));
  return &own;
}

std::string passes(const dist::Sampler& sampler, int count) {
  std::string text = "len:" + std::to_string(sampler.size()) + " ";
  for (int p = 0; p < count; ++p) text += (p ? ";" : "") + join(sampler.indices());
  return text;
}

dist::DistributedSampler distributed(std::istringstream& in) {
  const auto n = next<std::int64_t>(in);
  const auto w = next<int>(in), rank = next<int>(in), shuffle = next<int>(in);
  const auto seed = next<std::int64_t>(in), epoch = next<std::int64_t>(in);
  const auto drop_last = next<int>(in);
  const auto given = [](int v) { return v == -1 ? std::nullopt : std::optional<int>(v); };
  dist::DistributedSampler sampler(n, {.num_replicas = given(w),
                                       .rank = given(rank),
                                       .shuffle = shuffle != 0,
                                       .seed = seed,
                                       .drop_last = drop_last != 0});
  sampler.set_epoch(epoch);
  return sampler;
}

std::string run_case(const std::string& line) {
  std::istringstream in(line);
  std::string kind;
  in >> kind;
  dist::Generator own;
  if (kind == "randperm") {
    own.manual_seed(static_cast<std::uint64_t>(next<std::int64_t>(in)));
    return join(dist::randperm(next<std::int64_t>(in), own));
  }
  if (kind == "sequential") return passes(dist::SequentialSampler(next<std::int64_t>(in)), 1);
  if (kind == "distributed") return passes(distributed(in), 1);
  if (kind == "batch") {
    const dist::DistributedSampler sampler = distributed(in);
    const auto batch_size = next<std::int64_t>(in);
    const dist::BatchSampler batches(sampler, batch_size, next<int>(in) != 0);
    std::string text = "len:" + std::to_string(batches.size()) + " ";
    const auto all = batches.batches();
    for (std::size_t b = 0; b < all.size(); ++b) text += (b ? "," : "") + join(all[b]);
    return text;
  }
  if (kind == "iteration") {
    const auto n = next<std::int64_t>(in);
    const auto w = next<int>(in), rank = next<int>(in), shuffle = next<int>(in);
    const auto seed = next<std::int64_t>(in), batch_size = next<std::int64_t>(in);
    const auto num_iterations = next<std::int64_t>(in), start_iter = next<std::int64_t>(in);
    dist::DistributedSampler sampler(
        n, {.num_replicas = w, .rank = rank, .shuffle = shuffle != 0, .seed = seed});
    dist::IterationBasedBatchSampler iterations(sampler, batch_size, num_iterations, start_iter);
    std::string text = "len:" + std::to_string(iterations.size()) + " ";
    const auto all = iterations.batches();
    for (std::size_t b = 0; b < all.size(); ++b) text += (b ? "," : "") + join(all[b]);
    return text + " epoch:" + std::to_string(sampler.epoch());
  }
  if (kind == "random") {
    const auto n = next<std::int64_t>(in);
    const bool replacement = next<int>(in) != 0;
    const auto num_samples = next<std::int64_t>(in);
    std::string gen;
    in >> gen;
    dist::Generator* generator = pick_generator(gen, own);
    return passes(
        dist::RandomSampler(
            n, {.replacement = replacement, .num_samples = num_samples, .generator = generator}),
        next<int>(in));
  }
  if (kind == "subset") {
    std::string gen;
    in >> gen;
    dist::Generator* generator = pick_generator(gen, own);
    const int count = next<int>(in);
    return passes(dist::SubsetRandomSampler(rest<std::int64_t>(in), generator), count);
  }
  if (kind == "weighted") {
    const auto num_samples = next<std::int64_t>(in);
    const bool replacement = next<int>(in) != 0;
    std::string gen;
    in >> gen;
    dist::Generator* generator = pick_generator(gen, own);
    const int count = next<int>(in);
    return passes(
        dist::WeightedRandomSampler(rest<double>(in), num_samples, replacement, generator), count);
  }
  throw dist::ConfigError("sampler_driver: unknown case kind '" + kind + "'");
}

}  // namespace

int main() {
  return dist::run_main([] {
    std::string out;
    for (std::string line; std::getline(std::cin, line);) out += run_case(line) + "\n";
    std::cout << out;
    return 0;
  });
}
