// Chapter 06 — seeds: the same run twice, but not the same numbers on every rank.
//
// A fixed seed makes an experiment repeat: same seed, same random draws, same result. Post C
// shows what that habit does to data-parallel training: with init_seeds(0) on every rank, every
// rank draws the same "random" augmentations. YOLOv5's mosaic glues each image to 3 random
// partners, so every rank's mosaics contain the same 3 partners, and the job sees the same data W
// times over. The fix is one word: init_seeds(seed + rank). This chapter draws the mosaic partners
// both ways, gathers them from every rank and checks: the same seed gives identical picks on
// every rank (the bug), seed + rank gives different picks (the fix, predicted draw for draw), and
// seeding again repeats them exactly. The draws are PyTorch's: the twin prints the same numbers.
//
// You will learn: init_seeds(seed + rank); what torch.manual_seed and torch.randint compute on the
// CPU (mt19937, one draw per value, modulo the range); what the deterministic switch
// (cudnn.deterministic / cudnn.benchmark) means, and why here it changes nothing.
// Builds on: chapter 04 (all_reduce) and chapter 05 (all_gather), to compare the ranks.
//
// Run:   ./tutorial run 06          (or: ddprun --standalone --nproc-per-node 2 ch06_seeds)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] init_seeds(0):     mosaics of images 0 and 2 take partners tensor([...])
//   [rank 1/2] init_seeds(0):     mosaics of images 1 and 3 take partners tensor([...])  <- same
//   [rank 0/2] same seed: all 2 ranks drew the same partners (the mosaic bug)
//   [rank 0/2] OK: one seed gave identical picks, seed + rank gave different ones, reruns repeat
#include <dist/dist.h>
#include <dist/seed.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace {

using dist::Tensor;

// --8<-- [start:mosaic_partners]
constexpr int kImagesPerRank = 2;     // this rank's batch: images rank and rank + world_size
constexpr int kPartnersPerImage = 3;  // a mosaic is the image and 3 others, 2 x 2
constexpr int kDraws = kImagesPerRank * kPartnersPerImage;

// The augmentation: 3 random partner images for each image of this rank's batch, from the
// default generator, as YOLOv5's load_mosaic draws them (there with Python's random).
Tensor mosaic_partners(int images) {
  return dist::randint(0, images, kDraws);
}
// --8<-- [end:mosaic_partners]

void show(const std::string& how, const Tensor& partners, int rank, int world) {
  dist::out() << how << "mosaics of images " << rank << " and " << rank + world << " take partners "
              << partners;
}

// Every rank's partners, on every rank: row r of the result is rank r's draws.
std::vector<std::vector<std::int64_t>> gather_partners(const Tensor& mine, dist::Device device) {
  std::vector<Tensor> all;
  dist::all_gather(all, mine.to(device));
  std::vector<std::vector<std::int64_t>> rows;
  for (const Tensor& t : all) rows.push_back(t.to_vector<std::int64_t>());
  return rows;
}

// --8<-- [start:predicted_draws]
// What torch.randint(0, images, (kDraws,)) gives after torch.manual_seed(seed), written out
// without the library: a Mersenne Twister seeded with the seed's low 32 bits, one 32-bit draw per
// value, modulo the range. An independent prediction of each rank's draws.
std::vector<std::int64_t> predicted_draws(std::uint64_t seed, int images) {
  std::mt19937 twister(static_cast<std::uint32_t>(seed));
  std::vector<std::int64_t> draws(kDraws);
  for (auto& d : draws) d = static_cast<std::int64_t>(twister() % static_cast<unsigned>(images));
  return draws;
}
// --8<-- [end:predicted_draws]

bool all_rows_equal(const std::vector<std::vector<std::int64_t>>& rows) {
  for (const auto& row : rows) {
    if (row != rows.front()) return false;
  }
  return true;
}

bool rows_pairwise_different(const std::vector<std::vector<std::int64_t>>& rows) {
  for (std::size_t a = 0; a < rows.size(); ++a) {
    for (std::size_t b = a + 1; b < rows.size(); ++b) {
      if (rows[a] == rows[b]) return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help, and the lesson's own)
    dist::Cli cli("ch06_seeds",
                  "Draw mosaic partners with one seed on every rank (identical: the bug), with "
                  "seed + rank (different), and again (the same as before).");
    int seed = 0, images = 1000;
    bool deterministic = true;
    cli.add_int("--seed", &seed, "the experiment's seed", 0, 2147483647);
    cli.add_int("--images", &images, "images in the data set", 2, 1000000);
    cli.add_flag("--deterministic", &deterministic,
                 "ask for deterministic algorithms, as post C's cuda_deterministic",
                 "--no-deterministic");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: join the group
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    const auto useed = static_cast<std::uint64_t>(seed);

    // --8<-- [start:step2_same_seed]
    // ---- Step 2: post C's first version: init_seeds(seed) on every rank. Every rank's
    // generator starts in the same state, so every rank draws the same partners.
    dist::init_seeds(useed, deterministic);
    const Tensor same = mosaic_partners(images);
    show("init_seeds(" + std::to_string(seed) + "):     ", same, rank, world);
    const bool bug_shows = all_rows_equal(gather_partners(same, device));
    if (world == 1) {
      dist::out0() << "same seed: only 1 rank, so nothing to be identical to";
    } else {
      dist::out0() << "same seed: " << (bug_shows ? "all " : "NOT all ") << world
                   << " ranks drew the same partners (the mosaic bug)";
    }
    // --8<-- [end:step2_same_seed]

    // --8<-- [start:step3_fix]
    // ---- Step 3: the fix: init_seeds(seed + rank). One stream per rank; each rank's draws must
    // be what a Mersenne Twister seeded with seed + r predicts, and no two ranks alike.
    dist::init_seeds(useed + static_cast<std::uint64_t>(rank), deterministic);
    const Tensor fixed = mosaic_partners(images);
    show("init_seeds(" + std::to_string(seed) + " + " + std::to_string(rank) + "): ", fixed, rank,
         world);
    const auto rows = gather_partners(fixed, device);
    bool predicted = true;
    for (int r = 0; r < world; ++r) {
      predicted = predicted && rows[static_cast<std::size_t>(r)] ==
                                   predicted_draws(useed + static_cast<std::uint64_t>(r), images);
    }
    const bool fix_works = predicted && rows_pairwise_different(rows);
    dist::out0() << "seed + rank: " << (fix_works ? "" : "NOT ")
                 << (world == 1 ? "what mt19937(seed + 0) predicts"
                                : "pairwise different partners, each as mt19937(seed + rank) "
                                  "predicts");
    // --8<-- [end:step3_fix]

    // --8<-- [start:step4_rerun]
    // ---- Step 4: reproducibility: the same seeds again give the same draws again, on every rank
    dist::init_seeds(useed + static_cast<std::uint64_t>(rank), deterministic);
    Tensor repeated =
        dist::full(1, mosaic_partners(images).equal(fixed) ? 1 : 0, dist::kInt32, device);
    dist::all_reduce(repeated, dist::ReduceOp::MIN);
    const bool repeats = repeated.item(0) == 1;
    dist::out0() << "rerun with the same seeds: " << (repeats ? "every rank" : "NOT every rank")
                 << " drew the same partners again";
    // --8<-- [end:step4_rerun]

    // --8<-- [start:step5_deterministic]
    // ---- Step 5: the deterministic switch. PyTorch's cudnn.deterministic=True makes cuDNN use
    // only algorithms that give the same bits every run, and cudnn.benchmark=False stops it from
    // timing candidate algorithms and keeping the fastest, a choice that can differ between runs.
    // This library has no cuDNN and no algorithm that adds in a varying order, so the switch is
    // recorded (dist::are_deterministic_algorithms_enabled()) and changes no result here.
    const bool on = dist::are_deterministic_algorithms_enabled();
    dist::out0() << "deterministic algorithms: " << (on ? "on" : "off")
                 << " (in PyTorch: cudnn.deterministic=" << (on ? "True" : "False")
                 << ", cudnn.benchmark=" << (on ? "False" : "True") << ")";
    // --8<-- [end:step5_deterministic]

    // ---- Step 6: one verdict for the job: the MIN over ranks of "my checks held"
    const bool ok = bug_shows && fix_works && repeats;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: bug shown " << bug_shows << ", fix works " << fix_works
                   << ", reruns repeat " << repeats << " (on rank 0; see the lines above)";
      return dist::kExitFailure;
    }
    if (world == 1) {
      dist::out0() << "OK: the draws are mt19937's and reruns repeat (2 or more ranks show the "
                      "bug and the fix)";
    } else {
      dist::out0() << "OK: one seed gave identical picks, seed + rank gave different ones, "
                      "reruns repeat";
    }
    return dist::kExitOk;
  });
}
