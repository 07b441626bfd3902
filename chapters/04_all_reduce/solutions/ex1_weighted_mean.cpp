// Chapter 04, exercise 1 — the mean over every sample, when ranks hold different numbers of them.
//
// Rank r holds r + 1 samples, each of value 10 * (r + 1). Dividing the SUM of the per-rank means by
// world_size would weigh a rank with 1 sample like a rank with 4. The right mean all-reduces two
// numbers, the sum of the values and the count, and divides once:
//   mean = sum_r (r + 1) * 10 (r + 1) / sum_r (r + 1) = 10 (2W + 1) / 3.
// Run: ./tutorial run 04-ex1   (or: ddprun --standalone --nproc-per-node 2 ch04_all_reduce_ex1)
#include <dist/dist.h>

#include <cmath>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch04_all_reduce_ex1",
                  "The mean over all samples when ranks hold different counts.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // [sum of my values, my count] in one tensor: one collective instead of two.
    const double count = rank + 1, value = 10.0 * (rank + 1);
    auto totals = dist::Tensor::from<double>({value * count, count}, dist::get_device());
    dist::all_reduce(totals, dist::ReduceOp::SUM);
    const double mean = totals.item(0) / totals.item(1);
    dist::out() << "samples: " << count << ", global mean: " << mean;

    const double expected = 10.0 * (2 * world + 1) / 3.0;
    const bool ok = std::fabs(mean - expected) < 1e-12 * expected;
    dist::destroy_process_group();
    if (!ok) {
      dist::out0() << "MISMATCH: expected " << expected;
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;  // rank 0 reports for the job
    }
    dist::out0() << "OK: the weighted mean is 10(2W+1)/3 = " << expected;
    return dist::kExitOk;
  });
}
