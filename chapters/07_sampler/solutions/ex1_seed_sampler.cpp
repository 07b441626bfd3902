// Chapter 07, exercise 1 — post D's DistributedSampler next to PyTorch 1.13's.
//
// Post D shows an older DistributedSampler: it seeds the shuffle with the epoch alone (no seed
// argument), has no drop_last, and pads with `indices += indices[:total_size - len(indices)]`,
// which adds at most len(indices) entries. Three claims, checked for every dataset size 1..40
// and world size 1..8 (each rank checks them all; the job agrees through one all_reduce):
//   1. with seed 0 both give the same shards in every epoch (seed + epoch == epoch);
//   2. with seed s, 1.13's epoch e is the old sampler's epoch s + e;
//   3. the old padding comes up short, and its `assert len(indices) == total_size` fires,
//      exactly when W > 2n: only with fewer indices than ranks can the padding outgrow the list.
// Run: ./tutorial run 07-ex1   (or: ddprun --standalone --nproc-per-node 2 ch07_sampler_ex1)
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// Post D's __iter__, line for line; nullopt where its assert would fail.
std::optional<Indices> old_shard(std::int64_t n, int world, int rank, std::int64_t epoch) {
  const std::int64_t num_samples = (n + world - 1) / world;  // int(math.ceil(len * 1.0 / W))
  const std::int64_t total_size = num_samples * world;
  dist::Generator g;
  g.manual_seed(static_cast<std::uint64_t>(epoch));  // g.manual_seed(self.epoch)
  Indices indices = dist::randperm(n, g);
  const Indices head(indices.begin(), indices.begin() + std::min(n, total_size - n));
  indices.insert(indices.end(), head.begin(), head.end());  // indices += indices[:total - len]
  if (static_cast<std::int64_t>(indices.size()) != total_size) return std::nullopt;
  Indices mine;
  for (std::int64_t i = rank; i < total_size; i += world) mine.push_back(indices[i]);
  return mine;
}

Indices new_shard(std::int64_t n, int world, int rank, std::int64_t seed, std::int64_t epoch) {
  dist::DistributedSampler s(n, {.num_replicas = world, .rank = rank, .seed = seed});
  s.set_epoch(epoch);
  return s.indices();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch07_sampler_ex1", "Post D's DistributedSampler against PyTorch 1.13's.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());

    bool ok = true;
    int configs = 0, asserts = 0, expected_asserts = 0;
    for (std::int64_t n = 1; n <= 40; ++n) {
      for (int world = 1; world <= 8; ++world) {
        ++configs;
        expected_asserts += world > 2 * n;
        bool failed = false;
        for (int r = 0; r < world; ++r) {
          for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
            const auto old_epoch = old_shard(n, world, r, epoch);
            const auto old_later = old_shard(n, world, r, 5 + epoch);
            if (!old_epoch || !old_later) {
              failed = true;
              continue;
            }
            ok = ok && *old_epoch == new_shard(n, world, r, /*seed=*/0, epoch);  // claim 1
            ok = ok && *old_later == new_shard(n, world, r, /*seed=*/5, epoch);  // claim 2
          }
        }
        asserts += failed;
      }
    }
    ok = ok && asserts == expected_asserts;  // claim 3
    dist::out0() << "of " << configs << " (dataset size, world size) pairs, post D's sampler "
                 << "fails its assert on " << asserts
                 << " (closed form W > 2n: " << expected_asserts << ")";

    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: the old and the new sampler differ where they should agree";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: seed 0 gives the same shards as post D's sampler, seed s shifts the "
                 << "epochs by s, and the old padding fails exactly when W > 2n";
    return dist::kExitOk;
  });
}
