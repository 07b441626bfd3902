// Chapter 06, exercise 2 — one stream every rank shares, one stream each rank keeps to itself.
//
// The exercise: "Some random choices must be the same on every rank, others must differ. The
// order in which the data set is visited in an epoch is the same everywhere (each rank then takes
// its own share of it: chapter 07's DistributedSampler); the augmentation of each image must
// differ. Draw both, for 3 epochs, and check each property with all_gather."
//
// The solution: two generators. The shared one is a dist::Generator seeded with seed + epoch: the
// same number on every rank, a new one each epoch (what DistributedSampler does with set_epoch).
// The private one is the default generator, seeded once per rank. Not with seed + rank, though:
// then epoch 1's shared order would replay rank 1's private stream, and epoch 0's rank 0's
// (exercise 1's collision, between two families of seeds). The private seeds set bit 31, which
// seed + epoch never does here, so the families never meet. Each epoch every rank draws 4 "first
// images" from the shared stream and 3 mosaic partners from its private one; the shared draws must
// agree across ranks and change between epochs, the private ones must differ between ranks and
// from every shared one.
//
// Run: ddprun --standalone --nproc-per-node 3 ch06_seeds_ex2
#include <dist/dist.h>
#include <dist/seed.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

constexpr std::uint64_t kSeed = 0;
constexpr int kEpochs = 3, kImages = 1000;

std::vector<std::vector<std::int64_t>> gather(const dist::Tensor& mine) {
  std::vector<dist::Tensor> all;
  dist::all_gather(all, mine.to(dist::get_device()));
  std::vector<std::vector<std::int64_t>> rows;
  for (const dist::Tensor& t : all) rows.push_back(t.to_vector<std::int64_t>());
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch06_seeds_ex2",
                  "A shared stream (seed + epoch) and a private one (seed + rank).");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    // The private stream: (seed << 16) | rank as in exercise 1, plus bit 31 to keep it apart
    // from the shared family seed + epoch.
    dist::init_seeds((std::uint64_t{1} << 31) | (kSeed << 16) | static_cast<std::uint64_t>(rank));
    bool ok = true;
    std::vector<std::int64_t> previous_order;
    std::vector<std::vector<std::int64_t>> all_orders, all_augments;
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      dist::Generator shared(kSeed + static_cast<std::uint64_t>(epoch));
      const dist::Tensor order = dist::randint(0, kImages, 4, shared);
      const dist::Tensor augment = dist::randint(0, kImages, 3);  // mosaic partners
      dist::out() << "epoch " << epoch << ": order starts " << order << ", partners " << augment;

      const auto orders = gather(order), augments = gather(augment);
      for (const auto& row : orders) ok = ok && row == orders.front();  // shared: all agree
      ok = ok && orders.front() != previous_order;                      // and a new epoch differs
      previous_order = orders.front();
      for (std::size_t a = 0; a < augments.size(); ++a) {  // private: no two ranks alike
        for (std::size_t b = a + 1; b < augments.size(); ++b) ok = ok && augments[a] != augments[b];
      }
      all_orders.push_back(orders.front());
      all_augments.insert(all_augments.end(), augments.begin(), augments.end());
    }
    // And no private draw replays the start of a shared one (as seed + rank would at epoch 0).
    for (const auto& augment : all_augments) {
      for (const auto& order : all_orders) {
        ok = ok && !std::equal(augment.begin(), augment.end(), order.begin());
      }
    }

    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: a shared draw differed between ranks, or private ones agreed";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: the shared order agreed on every rank and changed each epoch; the "
                    "partners differed between ranks and from the shared draws";
    return dist::kExitOk;
  });
}
