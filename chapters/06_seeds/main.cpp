// Chapter 06 — seeds: the same run twice, but not the same numbers on every rank.
//
// A fixed seed makes an experiment repeat: same seed, same random draws, same result. Post C
// shows what that habit does to data-parallel training: with init_seeds(0) on every rank, every
// rank draws the same "random" augmentations. YOLOv5's mosaic glues each image to 3 random
// partners, so every rank's mosaics contain the same 3 partners, and the job sees the same data W
// times over. The fix is one word: init_seeds(seed + rank). This chapter draws the mosaic partners
// both ways, gathers them from every rank and checks: the same seed gives identical picks on
// every rank (the bug), seed + rank gives different picks (the fix, predicted draw for draw), and
// seeding again repeats them exactly. Then it does what a DataLoader does for its workers, whose
// seeds come from the rank's generator: the bug comes back through generator=. The draws are
// PyTorch's: the twin prints the same numbers, a real DataLoader's included.
//
// You will learn: init_seeds(seed + rank); what torch.manual_seed and torch.randint compute on the
// CPU (mt19937, one draw per value, modulo the range); how a DataLoader seeds its workers
// (base_seed + worker_id) and why that repeats across ranks; what the deterministic switch
// (cudnn.deterministic / cudnn.benchmark) means, and why here it changes nothing.
// Builds on: chapter 04 (all_reduce) and chapter 05 (all_gather), to compare the ranks.
//
// Run:   ./tutorial run 06          (or: ddprun --standalone --nproc-per-node 2 ch06_seeds)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] init_seeds(0):     mosaics of images 0 and 2 take partners tensor([...])
//   [rank 1/2] init_seeds(0):     mosaics of images 1 and 3 take partners tensor([...])  <- same
//   [rank 0/2] same seed: all 2 ranks drew the same partners (the mosaic bug)
//   [rank 0/2] OK: one seed gave identical picks, seed + rank gave different ones, reruns repeat,
//   ...
#include <dist/dist.h>
#include <dist/seed.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "support.h"

namespace {

using dist::Tensor;

constexpr int kImagesPerRank = 2;     // this rank's batch: images rank and rank + world_size
constexpr int kPartnersPerImage = 3;  // a mosaic is the image and 3 others, 2 x 2
constexpr int kDraws = kImagesPerRank * kPartnersPerImage;

// The augmentation: 3 random partner images for each image of this rank's batch, from the
// default generator, as YOLOv5's load_mosaic draws them (there with Python's random).
Tensor mosaic_partners(int images) {
  return dist::randint(0, images, kDraws);
}

// What torch.randint(0, images, (kDraws,)) gives after torch.manual_seed(seed), written out
// without the library: a Mersenne Twister seeded with the seed's low 32 bits, one 32-bit draw per
// value, modulo the range. An independent prediction of each rank's draws.
std::vector<std::int64_t> predicted_draws(std::uint64_t seed, int images) {
  std::mt19937 twister(static_cast<std::uint32_t>(seed));
  std::vector<std::int64_t> draws(kDraws);
  for (auto& d : draws) d = static_cast<std::int64_t>(twister() % static_cast<unsigned>(images));
  return draws;
}

// The base_seed iter(DataLoader) draws after torch.manual_seed(seed), without the library: two
// 32-bit draws, the first one the high word, kept to 63 bits (an int64's random_()).
std::int64_t predicted_base_seed(std::uint64_t seed) {
  std::mt19937 twister(static_cast<std::uint32_t>(seed));
  const std::uint64_t high = twister(), low = twister();
  return static_cast<std::int64_t>(((high << 32) | low) & 0x7fffffffffffffffULL);
}

// One epoch of a torch DataLoader(sampler=DistributedSampler(shuffle=False), num_workers=workers):
// iter(loader) draws base_seed from the loader's generator (the rank's default generator unless
// generator= is given); worker w seeds its own with base_seed + w and builds the mosaic of image
// rank + w * world, its one image of this rank's shard. Returns base_seed and every worker's
// partners, one row.
std::vector<std::int64_t> load_one_epoch(dist::Generator& loader_generator, int workers, int images,
                                         const std::string& how) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const std::int64_t base_seed = dist::dataloader_base_seed(loader_generator);
  dist::out() << how << ": base_seed " << base_seed;
  std::vector<std::int64_t> row{base_seed};
  for (int w = 0; w < workers; ++w) {
    dist::Generator in_worker(dist::dataloader_worker_seed(base_seed, w));  // torch.manual_seed
    const Tensor partners = dist::randint(0, images, kPartnersPerImage, in_worker);
    dist::out() << "  worker " << w << " (seed base_seed + " << w << "): mosaic of image "
                << rank + w * world << " takes partners " << partners;
    for (std::int64_t p : partners.to_vector<std::int64_t>()) row.push_back(p);
  }
  return row;
}

void show(const std::string& how, const Tensor& partners, int rank, int world) {
  dist::out() << how << "mosaics of images " << rank << " and " << rank + world << " take partners "
              << partners;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help, and the lesson's own)
    dist::Cli cli(
        "ch06_seeds",
        "Draw mosaic partners with one seed on every rank (identical: the bug), with "
        "seed + rank (different), again (the same as before), and in DataLoader workers.");
    int seed = 0, images = 1000, workers = 2;
    bool deterministic = true;
    cli.add_int("--seed", &seed, "the experiment's seed", 0, 2147483647);
    cli.add_int("--images", &images, "images in the data set", 2, 1000000);
    cli.add_int("--workers", &workers, "DataLoader workers per rank (num_workers)", 1, 8);
    cli.add_flag("--deterministic", &deterministic,
                 "ask for deterministic algorithms, as post C's cuda_deterministic",
                 "--no-deterministic");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: join the group
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    const auto useed = static_cast<std::uint64_t>(seed);
    const auto urank = static_cast<std::uint64_t>(rank);

    // ---- Step 2: post C's first version: init_seeds(seed) on every rank. Every rank's
    // generator starts in the same state, so every rank draws the same partners.
    dist::init_seeds(useed, deterministic);
    const Tensor same = mosaic_partners(images);
    show("init_seeds(" + std::to_string(seed) + "):     ", same, rank, world);
    const bool bug_shows = ch06::all_equal(ch06::gather_rows(same, device));
    if (world == 1) {
      dist::out0() << "same seed: only 1 rank, so nothing to be identical to";
    } else {
      dist::out0() << "same seed: " << (bug_shows ? "all " : "NOT all ") << world
                   << " ranks drew the same partners (the mosaic bug)";
    }

    // ---- Step 3: the fix: init_seeds(seed + rank). One stream per rank: each rank's draws must
    // be what a Mersenne Twister seeded with seed + r predicts. (Different streams can still draw
    // the same few partners by chance when --images is small, so that is reported, not judged.)
    dist::init_seeds(useed + urank, deterministic);
    const Tensor fixed = mosaic_partners(images);
    show("init_seeds(" + std::to_string(seed) + " + " + std::to_string(rank) + "): ", fixed, rank,
         world);
    const ch06::Rows rows = ch06::gather_rows(fixed, device);
    bool fix_works = true;
    for (int r = 0; r < world; ++r) {
      fix_works = fix_works && rows[static_cast<std::size_t>(r)] ==
                                   predicted_draws(useed + static_cast<std::uint64_t>(r), images);
    }
    const bool apart = ch06::count_distinct(rows) == rows.size();
    dist::out0() << "seed + rank: " << (fix_works ? "" : "NOT ")
                 << (world == 1 ? "what mt19937(seed + 0) predicts"
                     : apart ? "pairwise different partners, each as mt19937(seed + rank) predicts"
                             : "each as mt19937(seed + rank) predicts, though two ranks drew the "
                               "same partners by chance (few --images)");

    // ---- Step 4: reproducibility: the same seeds again give the same draws again, on every rank
    dist::init_seeds(useed + urank, deterministic);
    const bool repeats = dist::all_ranks_ok(mosaic_partners(images).equal(fixed));
    dist::out0() << "rerun with the same seeds: " << (repeats ? "every rank" : "NOT every rank")
                 << " drew the same partners again";

    // ---- Step 5: DataLoader workers. Each draws from its own generator, seeded with base_seed +
    // worker_id, and base_seed comes from the rank's default generator: after init_seeds(seed +
    // rank), every worker of every rank draws its own partners.
    dist::init_seeds(useed + urank, deterministic);
    const std::string after =
        "DataLoader after init_seeds(" + std::to_string(seed) + " + " + std::to_string(rank) + ")";
    const ch06::Rows epoch = ch06::gather_rows(
        Tensor::from(load_one_epoch(dist::default_generator(), workers, images, after)), device);
    bool workers_seeded = true;  // base_seed as predicted; each worker's draws follow from it
    for (int r = 0; r < world; ++r) {
      workers_seeded =
          workers_seeded && epoch[static_cast<std::size_t>(r)][0] ==
                                predicted_base_seed(useed + static_cast<std::uint64_t>(r));
    }
    const std::size_t sets = ch06::count_distinct(ch06::split_rows(epoch, 1, kPartnersPerImage));
    const int all_workers = world * workers;
    dist::out0() << "workers: base_seed " << (workers_seeded ? "" : "NOT ")
                 << "as mt19937(seed + rank) predicts, and the " << all_workers << " worker"
                 << (all_workers == 1 ? "" : "s") << " drew " << sets << " different set"
                 << (sets == 1 ? "" : "s") << " of partners";

    // ---- Step 6: the bug again, through the loader: DataLoader(generator=g) with g seeded alike
    // on every rank (a recipe for reproducible loaders) gives every rank the same base_seed, so
    // worker w of every rank draws the same partners whatever the rank's own seed.
    dist::Generator loader_generator(useed);  // g = torch.Generator(); g.manual_seed(seed)
    const std::string with_g =
        "DataLoader(generator=g), g.manual_seed(" + std::to_string(seed) + ")";
    const ch06::Rows shared = ch06::gather_rows(
        Tensor::from(load_one_epoch(loader_generator, workers, images, with_g)), device);
    const bool loader_bug_shows = ch06::all_equal(shared);
    if (world == 1) {
      dist::out0() << "generator=g: only 1 rank, so nothing to be identical to";
    } else {
      dist::out0() << "generator=g: " << (loader_bug_shows ? "" : "NOT ") << "every rank's worker w"
                   << " drew what rank 0's worker w drew (the mosaic bug, through the loader)";
    }

    // ---- Step 7: the deterministic switch. PyTorch's cudnn.deterministic=True makes cuDNN use
    // only algorithms that give the same bits every run, and cudnn.benchmark=False stops it from
    // timing candidate algorithms and keeping the fastest, a choice that can differ between runs.
    // This library has no cuDNN and no algorithm that adds in a varying order, so the switch is
    // recorded (dist::are_deterministic_algorithms_enabled()) and changes no result here.
    const bool on = dist::are_deterministic_algorithms_enabled();
    dist::out0() << "deterministic algorithms: " << (on ? "on" : "off")
                 << " (in PyTorch: cudnn.deterministic=" << (on ? "True" : "False")
                 << ", cudnn.benchmark=" << (on ? "False" : "True") << ")";

    // ---- Step 8: one verdict for the job: the MIN over ranks of "my checks held"
    const bool ok = bug_shows && fix_works && repeats && workers_seeded && loader_bug_shows;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: bug shown " << bug_shows << ", fix works " << fix_works
                   << ", reruns repeat " << repeats << ", workers seeded " << workers_seeded
                   << ", loader bug shown " << loader_bug_shows
                   << " (on rank 0; see the lines above)";
      return dist::kExitFailure;
    }
    if (world == 1) {
      dist::out0() << "OK: the draws are mt19937's, reruns repeat, workers are seeded base_seed + "
                      "worker_id (2 or more ranks show the bug and the fix)";
    } else {
      dist::out0() << "OK: one seed gave identical picks, seed + rank gave each rank its own "
                      "stream, reruns repeat, and generator=g brought the bug back to the workers";
    }
    return dist::kExitOk;
  });
}
