// Chapter 06, exercise 2 — one stream every rank shares, one stream each rank keeps to itself.
//
// Some random choices must be the same on every rank, others must differ. The order in which the
// data set is visited in an epoch is the same everywhere (each rank then takes its own share of
// it: chapter 07's DistributedSampler); the augmentation of each image must differ. Each epoch
// every rank draws 4 "first images" from a generator seeded with shared_seed(seed, epoch), and 3
// mosaic partners from the default generator, seeded once with private_seed(seed, rank).
// The solution: shared_seed is seed + epoch, the same on every rank and new each epoch (what
// DistributedSampler does with set_epoch). private_seed is not seed + rank: then epoch 1's order
// would replay rank 1's partners (exercise 1's collision, between two families of seeds). It is
// exercise 1's (seed << 16) | rank with bit 31 set, which seed + epoch never sets here.
// Grade it: ./tutorial check 06-ex2        Run it: ./tutorial run 06-ex2 --solution
#include <dist/dist.h>
#include <dist/seed.h>

#include <cstdint>

namespace {

constexpr std::uint64_t kSeed = 0;
constexpr int kEpochs = 3, kImages = 1000;

// The same on every rank, a new one each epoch.
std::uint64_t shared_seed(std::uint64_t seed, int epoch) {
  return seed + static_cast<std::uint64_t>(epoch);
}

// One per rank, never the seed of another rank's stream nor of a shared one.
std::uint64_t private_seed(std::uint64_t seed, int rank) {
  return (std::uint64_t{1} << 31) | (seed << 16) | static_cast<std::uint64_t>(rank);
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch06_seeds_ex2", "A shared stream per epoch and a private one per rank.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    dist::init_seeds(private_seed(kSeed, rank));  // the default generator: the private stream
    dist::out() << "private seed " << private_seed(kSeed, rank);
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      dist::Generator shared(shared_seed(kSeed, epoch));
      const dist::Tensor order = dist::randint(0, kImages, 4, shared);
      const dist::Tensor partners = dist::randint(0, kImages, 3);  // the default generator
      dist::out() << "epoch " << epoch << ": shared seed " << shared_seed(kSeed, epoch)
                  << ", order starts " << order << ", partners " << partners;
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
