// Chapter 04, exercise 1 — the mean over every sample, when ranks hold different numbers of them.
//
// Rank r holds r + 1 samples, each of value 10 * (r + 1). Averaging the per-rank means over the
// ranks would weigh a rank with 1 sample like a rank with 4. Compute the mean over all samples,
// the same number on every rank, with collectives.
// Grade it: ./tutorial check 04-ex1        Run it: ./tutorial run 04-ex1
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

    // TODO(exercise): the mean over every sample of every rank, the same number on every rank,
    // with a single all_reduce (dist::Tensor::from<double>({a, b}, dist::get_device()) makes a
    // tensor of two numbers). Every sample counts once: a rank with 4 samples weighs 4 times.
    const double mean = value;  // only this rank's samples: replace it

    dist::out() << "samples: " << count << ", global mean: " << mean;
    dist::out() << "collectives made: " << ch04::collectives_made();
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
