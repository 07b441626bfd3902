// Chapter 06, exercise 1 — per-rank seeds that never collide with another job's.
//
// Each rank of job J (J = 0..7, eight experiments with seeds 0..7) seeds a generator with
// rank_seed(J, rank) and draws 6 image numbers. Every (job, rank) pair must get a stream of its
// own. seed + rank does not: job 1's rank 0 replays job 0's rank 1. Beware that the generator
// (dist::Generator, as torch.manual_seed) keeps only the seed's low 32 bits.
// Grade it: ./tutorial check 06-ex1        Run it: ./tutorial run 06-ex1
#include <dist/dist.h>
#include <dist/seed.h>

#include <cstdint>

namespace {

constexpr int kJobs = 8, kDraws = 6, kImages = 1000;

// This rank's seed in the job seeded with `seed`.
// TODO(exercise): a seed of its own for every (seed, rank) pair, seeds and ranks below 65536,
// that stays one of its own in the 32 bits the generator keeps.
std::uint64_t rank_seed(std::uint64_t seed, int rank) {
  return seed + static_cast<std::uint64_t>(rank);  // post C's seed + rank: replace it
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch06_seeds_ex1", "Per-rank seeds that do not collide across jobs.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    // What this rank would draw in each of the jobs 0..7.
    for (int job = 0; job < kJobs; ++job) {
      const std::uint64_t seed = rank_seed(static_cast<std::uint64_t>(job), rank);
      dist::Generator generator(seed);
      dist::out() << "job " << job << ": seed " << seed << ", draws "
                  << dist::randint(0, kImages, kDraws, generator);
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
