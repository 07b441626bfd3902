// Chapter 07, exercise 2 — a distributed WeightedRandomSampler.
//
// torch has no distributed weighted sampler, yet class-balanced sampling with DDP is common. The
// DistributedSampler recipe carries over: every rank makes the SAME draw (a generator seeded with
// seed + epoch on every rank), of total_size = num_samples * W indices, and keeps every W-th one
// from its rank on. No message is needed; the check gathers the shards and interleaves them back
// into the one global draw, and makes sure each epoch draws anew.
// Run: ./tutorial run 07-ex2   (or: ddprun --standalone --nproc-per-node 2 ch07_sampler_ex2)
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// The same draw on every rank: num_samples_per_rank * world indices by weight.
Indices global_draw(const std::vector<double>& weights, std::int64_t per_rank, int world,
                    std::int64_t seed, std::int64_t epoch) {
  dist::Generator g;
  g.manual_seed(static_cast<std::uint64_t>(seed + epoch));
  return dist::WeightedRandomSampler(weights, per_rank * world, true, &g).indices();
}

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

    bool ok = true;
    Indices previous;
    for (std::int64_t epoch = 0; epoch < 2; ++epoch) {
      const Indices all = global_draw(weights, per_rank, world, /*seed=*/0, epoch);
      const Indices mine = my_share(all, world, rank);
      dist::out() << "epoch " << epoch << " draws: " << dist::Tensor::from(mine);

      std::vector<dist::Tensor> shards;
      dist::all_gather(shards, dist::Tensor::from(mine, dist::get_device()));
      Indices interleaved(all.size());
      for (int r = 0; r < world; ++r) {
        const Indices s = shards[r].to_vector<std::int64_t>();
        for (std::size_t k = 0; k < s.size(); ++k) interleaved[r + k * world] = s[k];
      }
      ok = ok && static_cast<std::int64_t>(mine.size()) == per_rank && interleaved == all;
      ok = ok && all != previous;  // a new epoch, a new draw
      previous = all;
    }

    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: the gathered shards are not the one global draw";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: the " << world << " shards interleave back into the one weighted draw, "
                 << "without a message exchanged to agree on it";
    return dist::kExitOk;
  });
}
