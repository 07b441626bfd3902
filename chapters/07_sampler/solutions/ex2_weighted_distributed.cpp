// Chapter 07, exercise 2 — a distributed WeightedRandomSampler.
//
// torch has no distributed weighted sampler, yet class-balanced sampling with DDP is common. The
// DistributedSampler recipe carries over, with no message exchanged: every rank makes the SAME
// draw, a WeightedRandomSampler of num_samples * W indices from a generator seeded with
// seed + epoch, and keeps every W-th index of it from its rank on. Write that draw and the share.
// The shards then interleave back into the one weighted draw, and each epoch draws anew.
// Grade it: ./tutorial check 07-ex2        Run it: ./tutorial run 07-ex2 --solution
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// The same draw on every rank: per_rank * world indices by weight, with replacement.
Indices global_draw(const std::vector<double>& weights, std::int64_t per_rank, int world,
                    std::int64_t seed, std::int64_t epoch) {
  dist::Generator g;
  g.manual_seed(static_cast<std::uint64_t>(seed + epoch));
  return dist::WeightedRandomSampler(weights, per_rank * world, true, &g).indices();
}

// This rank's share: every world-th index, from position `rank` on.
Indices my_share(const Indices& all, int world, int rank) {
  Indices mine;
  for (std::size_t i = static_cast<std::size_t>(rank); i < all.size(); i += world) {
    mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch07_sampler_ex2", "A distributed WeightedRandomSampler, built by hand.");
    int per_rank = 6;
    cli.add_int("--num-samples", &per_rank, "indices each rank draws per epoch", 1, 100000);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::vector<double> weights{1, 1, 1, 1, 6};  // index 4 is the rare class, upweighted

    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      const Indices mine =
          my_share(global_draw(weights, per_rank, world, /*seed=*/0, epoch), world, rank);
      dist::out() << "epoch " << epoch << " draws: " << dist::Tensor::from(mine);
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
