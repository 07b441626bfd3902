// Chapter 07, exercise 1 — post D's DistributedSampler next to PyTorch 1.13's.
//
// Post D shows an older DistributedSampler: it seeds the shuffle with the epoch alone (no seed
// argument), has no drop_last, and pads with `indices += indices[:total_size - len(indices)]`,
// then asserts `len(indices) == total_size`. Write its __iter__ for one rank, line for line, and
// compare its shards with the library's (seed 0) for small data sets; then count, over dataset
// sizes 1..40 and world sizes 1..8, how often its assert fails, and find the closed form.
// The solution: with seed 0 both give the same shards (seed + epoch == epoch); with seed s, 1.13's
// epoch e is the old epoch s + e. The old padding adds at most len(indices) entries, so it comes
// up short, and the assert fires, exactly when W > 2n.
// Grade it: ./tutorial check 07-ex1        Run it: ./tutorial run 07-ex1 --solution
#include <dist/dist.h>
#include <dist/sampler.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// Post D's __iter__ on rank `rank` of `world`: this rank's shard, or nullopt where its assert
// would fail.
std::optional<Indices> old_shard(std::int64_t n, int world, int rank, std::int64_t epoch) {
  const std::int64_t num_samples = (n + world - 1) / world;  // int(math.ceil(len * 1.0 / W))
  const std::int64_t total_size = num_samples * world;
  dist::Generator g;
  g.manual_seed(static_cast<std::uint64_t>(epoch));  // g.manual_seed(self.epoch)
  Indices indices = dist::randperm(n, g);
  const Indices head(indices.begin(), indices.begin() + std::min(n, total_size - n));
  indices.insert(indices.end(), head.begin(), head.end());  // indices += indices[:total - len]
  if (static_cast<std::int64_t>(indices.size()) != total_size) return std::nullopt;
  Indices mine;  // indices[rank:total_size:num_replicas]
  for (std::int64_t i = rank; i < total_size; i += world) mine.push_back(indices[i]);
  return mine;
}

Indices library_shard(std::int64_t n, int world, int rank, std::int64_t epoch) {
  dist::DistributedSampler s(n, {.num_replicas = world, .rank = rank, .seed = 0});
  s.set_epoch(epoch);
  return s.indices();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch07_sampler_ex1", "Post D's DistributedSampler against PyTorch 1.13's.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // This rank's shards, for data sets of 1 to 10 indices and epochs 0 to 2.
    for (std::int64_t n = 1; n <= 10; ++n) {
      for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
        const std::optional<Indices> old = old_shard(n, world, rank, epoch);
        auto line = dist::out();
        line << "n " << n << ", epoch " << epoch << ": post D's ";
        if (old) {
          line << dist::Tensor::from(*old);
        } else {
          line << "assert fails";
        }
        line << ", the library's " << dist::Tensor::from(library_shard(n, world, rank, epoch));
      }
    }
    // How often its assert fails, over the (dataset size, world size) pairs 1..40 x 1..8.
    int pairs = 0, asserts = 0;
    for (std::int64_t n = 1; n <= 40; ++n) {
      for (int w = 1; w <= 8; ++w, ++pairs) asserts += !old_shard(n, w, 0, 0).has_value();
    }
    dist::out0() << "post D's assert fails on " << asserts << " of " << pairs
                 << " (dataset size, world size) pairs";
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
