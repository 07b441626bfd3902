// Chapter 09, exercise 1 — what the sampler's padding does to an evaluation.
//
// DistributedSampler pads every rank's shard to ceil(n / W) indices by repeating the first ones,
// so an evaluation that counts every position of every shard counts total_size - n images twice.
// Take a "model" that is right exactly on the indices divisible by 3 and evaluate test sets of n
// images both ways: counting every position, and leaving out the padding as the chapter does.
// Tell the padding apart, so that the second count holds each image exactly once.
// Grade it: ./tutorial check 09-ex1        Run it: ./tutorial run 09-ex1
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <vector>

namespace {

bool right(std::int64_t index) {
  return index % 3 == 0;
}

constexpr std::int64_t kPrinted = 10, kSizes = 50;  // sizes 1..10 printed, 1..50 counted

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch09_ddp_classifier_ex1",
                  "Count an evaluation with and without the sampler's padding.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    int skewed = 0;  // sizes where counting the padding changes the accuracy
    for (std::int64_t n = 1; n <= kSizes; ++n) {
      const dist::DistributedSampler sampler(n, {.shuffle = false});
      const std::vector<std::int64_t> mine = sampler.indices();
      std::int64_t all_right = 0, all_seen = 0, kept_right = 0, kept_seen = 0;
      for (std::size_t k = 0; k < mine.size(); ++k) {
        all_right += right(mine[k]);
        ++all_seen;
        // TODO(exercise): is position k of this rank's shard padding? The shard holds positions
        // rank, rank + W, rank + 2W, ... of the padded order (dist::get_rank(), W =
        // dist::get_world_size()), whose first n positions are the n images and the rest repeat
        // the first ones.
        const bool padding = false;  // replace it
        if (!padding) {
          kept_right += right(mine[k]);
          ++kept_seen;
        }
      }
      dist::Tensor counts = dist::Tensor::from<std::int64_t>(
          {all_right, all_seen, kept_right, kept_seen}, dist::get_device());
      dist::all_reduce(counts);
      if (n <= kPrinted) {
        dist::out0() << "n = " << n << ": counting every position " << counts.item(0) << "/"
                     << counts.item(1) << ", without the padding " << counts.item(2) << "/"
                     << counts.item(3);
      }
      skewed += counts.item(0) * counts.item(3) != counts.item(2) * counts.item(1);
    }
    dist::out0() << "of " << kSizes
                 << " test set sizes, counting the padding skewed the accuracy in " << skewed;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
