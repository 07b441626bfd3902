// Chapter 10, exercise 3 — your own mistake: one rank calls broadcast with another root.
//
// Rank 0 loaded the starting weights, and one broadcast from rank 0 gives them to every rank.
// Make a mistake on purpose, behind the flag --mistake: the last rank calls broadcast with another
// root (its own rank, as if it held the weights). Run it with DIST_DEBUG=DETAIL: what does the
// library print, and on which ranks? Then without DIST_DEBUG: what do the errors say now?
// Grade it: ./tutorial check 10-ex3        Run it: ./tutorial run 10-ex3
//   with the mistake: DIST_DEBUG=DETAIL ./tutorial run 10-ex3 -- --mistake --timeout 5
#include <dist/dist.h>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli(
        "ch10_failure_modes_ex3",
        "Rank 0's weights broadcast to every rank; --mistake gives one rank another root.");
    bool mistake = false;
    cli.add_flag("--mistake", &mistake, "the last rank calls broadcast with another root");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    // ---- Step 1: rank 0 holds the starting weights; the other ranks, zeros to be overwritten
    dist::Tensor weights = rank == 0 ? dist::Tensor::full(4, 0.25) : dist::Tensor::zeros(4);

    // ---- Step 2: one broadcast from rank 0: every rank must call it, with the same root
    int root = 0;
    // TODO(exercise): with --mistake (and only then), the last rank, and only it, names another
    // root: its own rank. Without --mistake every rank keeps root 0.
    dist::broadcast(weights, root);
    dist::out() << "broadcast from root " << root << ": weights " << weights;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
