// Chapter 07, exercise 3 — why DistributedSampler pads: every rank must take the same number of
// steps.
//
// In DDP every step ends in an all_reduce of the gradients; a rank with one batch more waits in
// that all_reduce for partners that have finished, until the timeout. A naive split, rank r
// reading the contiguous range [n r / W, n (r + 1) / W), gives shards whose lengths differ by
// one, and so, sometimes, batch counts that differ too. The ranks compare their step counts with
// all_reduce(MIN) and all_reduce(MAX) for many (dataset size, batch size) pairs; the counts must
// differ for the naive split exactly when the closed form says, and never for DistributedSampler.
// Run: ./tutorial run 07-ex3   (or: ddprun --standalone --nproc-per-node 2 ch07_sampler_ex3)
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <vector>

namespace {

// The smallest and largest value of `x` over the ranks, through two all_reduce calls.
std::pair<std::int64_t, std::int64_t> min_max(std::int64_t x) {
  dist::Tensor lo = dist::full(1, static_cast<double>(x), dist::kInt64, dist::get_device());
  dist::Tensor hi = lo;
  dist::all_reduce(lo, dist::ReduceOp::MIN);
  dist::all_reduce(hi, dist::ReduceOp::MAX);
  return {static_cast<std::int64_t>(lo.item(0)), static_cast<std::int64_t>(hi.item(0))};
}

std::int64_t batches_of(std::int64_t length, std::int64_t batch) {
  return (length + batch - 1) / batch;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch07_sampler_ex3", "Naive contiguous shards vs DistributedSampler: steps.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const std::int64_t rank = dist::get_rank(), world = dist::get_world_size();

    bool ok = true;
    int uneven = 0, expected_uneven = 0, cases = 0;
    for (std::int64_t n = world; n <= 40; ++n) {
      for (std::int64_t batch = 1; batch <= 5; ++batch) {
        const std::int64_t begin = n * rank / world, end = n * (rank + 1) / world;
        const dist::BatchSampler naive(dist::SequentialSampler(end - begin).indices(), batch,
                                       false);
        const auto [naive_min, naive_max] = min_max(naive.size());
        // Closed form: shards hold floor(n / W) or ceil(n / W) indices (both only if W does not
        // divide n), so the step counts differ iff their batch counts do.
        const bool differ =
            n % world != 0 && batches_of(n / world, batch) != batches_of(n / world + 1, batch);
        ++cases;
        uneven += naive_min != naive_max;
        expected_uneven += differ;

        const dist::DistributedSampler sampler(n, {.shuffle = false});
        const dist::BatchSampler padded(sampler, batch, false);
        const auto [lo, hi] = min_max(padded.size());
        ok = ok && lo == hi && lo == batches_of((n + world - 1) / world, batch);
      }
    }
    ok = ok && uneven == expected_uneven;
    dist::out0() << "naive contiguous shards: the ranks' step counts differ in " << uneven << " of "
                 << cases << " cases (closed form: " << expected_uneven
                 << "); with DistributedSampler in none";
    dist::destroy_process_group();
    if (!ok) {
      dist::out0() << "MISMATCH: the step counts do not follow the closed form";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: padding gives every rank ceil(ceil(n / W) / B) steps; the naive split "
                 << "would leave some rank waiting in an all_reduce";
    return dist::kExitOk;
  });
}
