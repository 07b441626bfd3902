// Chapter 07, exercise 1 — post D's DistributedSampler next to PyTorch 1.13's.
//
// Post D shows an older DistributedSampler: it seeds the shuffle with the epoch alone (no seed
// argument), has no drop_last, and pads with `indices += indices[:total_size - len(indices)]`,
// then asserts `len(indices) == total_size`. Write its __iter__ for one rank, line for line, and
// compare its shards with the library's (seed 0) for small data sets; then count, over dataset
// sizes 1..40 and world sizes 1..8, how often its assert fails, and find the closed form.
// Grade it: ./tutorial check 07-ex1        Run it: ./tutorial run 07-ex1
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
  // TODO(exercise): post D's __iter__, line for line: num_samples = ceil(n / W), total_size =
  // num_samples * W, a randperm(n) from a generator seeded with the epoch, padded with
  // indices[:total_size - n], then its assert (return std::nullopt where it fails), then this
  // rank's indices[rank:total_size:W].
  static_cast<void>(n), static_cast<void>(world), static_cast<void>(rank), static_cast<void>(epoch);
  return std::nullopt;  // "the assert fails" everywhere: replace it
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
