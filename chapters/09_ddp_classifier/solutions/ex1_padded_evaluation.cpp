// Chapter 09, exercise 1 — what the sampler's padding does to an evaluation.
//
// DistributedSampler pads every rank's shard to ceil(n / W) indices by repeating the first ones,
// so an evaluation that simply counts what each rank sees counts total_size - n images twice.
// Take a "model" whose answer is right exactly on the indices divisible by 3, evaluate n images
// both ways over a range of test set sizes, and check both against their closed forms: counting
// everything gives (right(n) + right(first total_size - n)) / total_size, leaving out the
// positions >= n (as the chapter does) gives exactly right(n) / n.
//
// Run: ./tutorial run 09-ex1   (or: ddprun --standalone --nproc-per-node 3 ch09_ddp_classifier_ex1)
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <vector>

namespace {

bool right(std::int64_t index) {
  return index % 3 == 0;
}

std::int64_t right_below(std::int64_t n) {
  return (n + 2) / 3;
}  // #{0 <= i < n : i % 3 == 0}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch09_ddp_classifier_ex1",
                  "Count an evaluation with and without the sampler's padding, against closed "
                  "forms.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    bool ok = true;
    int skewed = 0;
    for (std::int64_t n = 1; n <= 50; ++n) {
      const dist::DistributedSampler sampler(n, {.shuffle = false});
      const std::vector<std::int64_t> mine = sampler.indices();
      std::int64_t all_right = 0, all_seen = 0, kept_right = 0, kept_seen = 0;
      for (std::size_t k = 0; k < mine.size(); ++k) {
        all_right += right(mine[k]);
        ++all_seen;
        if (rank + static_cast<std::int64_t>(k) * world < n) {  // not padding
          kept_right += right(mine[k]);
          ++kept_seen;
        }
      }
      dist::Tensor counts = dist::Tensor::from<std::int64_t>(
          {all_right, all_seen, kept_right, kept_seen}, dist::get_device());
      dist::all_reduce(counts);
      const std::int64_t total = sampler.total_size();
      // The padding repeats indices 0, 1, ..., total - n - 1 (total - n < W <= n here, or wraps).
      std::int64_t padded_right = 0;
      for (std::int64_t i = 0; i < total - n; ++i) padded_right += right(i % n);
      ok = ok && counts.item(0) == right_below(n) + padded_right && counts.item(1) == total &&
           counts.item(2) == right_below(n) && counts.item(3) == n;
      skewed += counts.item(0) * n != right_below(n) * counts.item(1);
    }
    dist::out0() << "of 50 test set sizes, counting the padding skewed the accuracy in " << skewed;
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: a count differs from its closed form";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: leaving out positions >= n counts every image once; counting everything "
                 << "matches the closed form of the skew";
    return dist::kExitOk;
  });
}
