// Chapter 06, exercise 1 — per-rank seeds that never collide with another job's.
//
// The exercise: "With init_seeds(seed + rank), run the job with --seed 1: what does its rank 0
// draw? Find a way to derive each rank's seed so that two jobs with different seeds never share a
// stream. Beware: torch.manual_seed (and dist::manual_seed) keep only the seed's low 32 bits."
//
// The solution: seed + rank maps (seed 1, rank 0) and (seed 0, rank 1) to the same number, 1, so
// the "new" experiment replays the old one's rank 1. Multiplying by 2^32 does not help: the
// generator drops those bits, and seed * 2^32 + rank collides for every seed. Packing both into the
// low 32 bits does: (seed << 16) | rank is one-to-one for seeds and world sizes below 65536. The
// program checks the two traps, then gathers the streams of jobs 0..7 on every rank of this job
// and checks that all of them differ.
//
// Run: ddprun --standalone --nproc-per-node 3 ch06_seeds_ex1
#include <dist/dist.h>
#include <dist/seed.h>

#include <cstdint>
#include <vector>

namespace {

constexpr int kJobs = 8, kDraws = 6, kImages = 1000;

std::uint64_t naive_seed(std::uint64_t seed, int rank) {
  return seed + rank;
}

// One-to-one while seed < 2^16 and rank < 2^16, and all of it in the 32 bits the generator keeps.
std::uint64_t packed_seed(std::uint64_t seed, int rank) {
  DIST_CHECK(seed < (1u << 16) && rank < (1 << 16), "packed_seed needs seed and rank below 65536");
  return (seed << 16) | static_cast<std::uint64_t>(rank);
}

std::vector<std::int64_t> draws(std::uint64_t stream_seed) {
  dist::Generator g(stream_seed);
  return dist::randint(0, kImages, kDraws, g).to_vector<std::int64_t>();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch06_seeds_ex1", "Per-rank seeds that do not collide across jobs.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // Trap 1: seed + rank. Job 1's rank 0 replays job 0's rank 1.
    const bool trap1 = draws(naive_seed(1, 0)) == draws(naive_seed(0, 1));
    dist::out0() << "seed + rank: job 1's rank 0 draws what job 0's rank 1 drew: "
                 << (trap1 ? "yes" : "no");
    // Trap 2: the generator keeps 32 bits, so seed * 2^32 + rank is just rank.
    const bool trap2 = draws((std::uint64_t{3} << 32) + 1) == draws(1);
    dist::out0() << "seed * 2^32 + rank: job 3's rank 1 draws what job 0's rank 1 drew: "
                 << (trap2 ? "yes" : "no");

    // The fix: this rank's streams for jobs 0..7, gathered from every rank: 8 x W streams.
    std::vector<std::int64_t> mine;
    for (int job = 0; job < kJobs; ++job) {
      for (std::int64_t d : draws(packed_seed(static_cast<std::uint64_t>(job), rank))) {
        mine.push_back(d);
      }
    }
    std::vector<dist::Tensor> gathered;
    dist::all_gather(gathered, dist::Tensor::from(mine, dist::get_device()));
    std::vector<std::vector<std::int64_t>> streams;
    for (const dist::Tensor& t : gathered) {
      const std::vector<std::int64_t> v = t.to_vector<std::int64_t>();
      for (int job = 0; job < kJobs; ++job) {
        streams.emplace_back(v.begin() + job * kDraws, v.begin() + (job + 1) * kDraws);
      }
    }
    bool distinct = true;
    for (std::size_t a = 0; a < streams.size(); ++a) {
      for (std::size_t b = a + 1; b < streams.size(); ++b)
        distinct = distinct && streams[a] != streams[b];
    }
    dist::out0() << "(seed << 16) | rank: the " << streams.size() << " streams of jobs 0.."
                 << kJobs - 1 << " on " << world << " ranks are " << (distinct ? "" : "NOT ")
                 << "all different";

    const bool ok = trap1 && trap2 && distinct;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: see the lines above";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: both traps collide as predicted, and packed seeds never do";
    return dist::kExitOk;
  });
}
