// Chapter 07, exercise 3 — why DistributedSampler pads: every rank must take the same number of
// steps.
//
// In DDP every step ends in an all_reduce of the gradients; a rank with one batch more waits in
// that all_reduce for partners that have finished, until the timeout. Split the data set naively,
// rank r reading the contiguous range [n r / W, n (r + 1) / W), count this rank's batches, and
// find the fewest and the most over the ranks with all_reduce(MIN) and all_reduce(MAX); the
// program prints them beside DistributedSampler's, for data sets of 1..12 indices and batch
// sizes 1..4. When do the naive counts differ? Predict it with a closed form.
// Grade it: ./tutorial check 07-ex3        Run it: ./tutorial run 07-ex3
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <utility>

namespace {

std::int64_t batches_of(std::int64_t length, std::int64_t batch) {
  return (length + batch - 1) / batch;
}

// This rank's number of batches when it reads [n rank / world, n (rank + 1) / world).
std::int64_t naive_steps(std::int64_t n, std::int64_t batch, std::int64_t rank,
                         std::int64_t world) {
  // TODO(exercise): the length of this rank's range, in batches (batches_of rounds up).
  static_cast<void>(rank), static_cast<void>(world);
  return batches_of(n, batch);  // the whole data set on every rank: replace it
}

// The smallest and largest value of `x` over the ranks.
std::pair<std::int64_t, std::int64_t> min_max(std::int64_t x) {
  // TODO(exercise): all_reduce with dist::ReduceOp::MIN and MAX (dist::full(1, value,
  // dist::kInt64, dist::get_device()) makes a one-element tensor; item(0) reads it).
  return {x, x};  // this rank's own count only: replace it
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch07_sampler_ex3", "Naive contiguous shards vs DistributedSampler: steps.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const std::int64_t rank = dist::get_rank(), world = dist::get_world_size();

    for (std::int64_t n = 1; n <= 12; ++n) {
      for (std::int64_t batch = 1; batch <= 4; ++batch) {
        const std::int64_t naive = naive_steps(n, batch, rank, world);
        const auto [naive_min, naive_max] = min_max(naive);
        const dist::DistributedSampler sampler(n, {.shuffle = false});
        const std::int64_t padded = dist::BatchSampler(sampler, batch, false).size();
        const auto [padded_min, padded_max] = min_max(padded);
        dist::out() << "n " << n << ", batch " << batch << ": naive " << naive << " steps (ranks "
                    << naive_min << " to " << naive_max << "), DistributedSampler " << padded
                    << " (ranks " << padded_min << " to " << padded_max << ")";
      }
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
