// Chapter 04, exercise 1 — the mean over every sample, when ranks hold different numbers of them.
//
// Rank r holds r + 1 samples, each of value 10 * (r + 1). Dividing the SUM of the per-rank means by
// world_size would weigh a rank with 1 sample like a rank with 4. The right mean all-reduces two
// numbers, the sum of the values and the count, and divides once.
// Grade it: ./tutorial check 04-ex1        Run it: ./tutorial run 04-ex1 --solution
#include <dist/dist.h>

#include "collectives_made.h"  // the grader reads the collectives each rank made

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch04_all_reduce_ex1",
                  "The mean over all samples when ranks hold different counts.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();
    const double count = rank + 1, value = 10.0 * (rank + 1);  // my samples: count of them

    // [sum of my values, my count] in one tensor: one collective instead of two.
    auto totals = dist::Tensor::from<double>({value * count, count}, dist::get_device());
    dist::all_reduce(totals, dist::ReduceOp::SUM);
    const double mean = totals.item(0) / totals.item(1);

    dist::out() << "samples: " << count << ", global mean: " << mean;
    dist::out() << "collectives made: " << ch04::collectives_made();
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
