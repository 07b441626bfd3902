// Chapter 10, exercise 3 — your own mistake: one rank calls broadcast with another root.
//
// Rank 0 loaded the starting weights, and one broadcast from rank 0 gives them to every rank. With
// --mistake the last rank believes that it holds the weights and names itself as the root, as
// a rank does that reads a stale "who loaded the checkpoint" or uses its own rank where rank 0
// belongs. Every rank still calls broadcast, same size, same dtype: only the root differs.
// Under DIST_DEBUG=DETAIL the ranks compare their calls, the root included, before the broadcast,
// and stop at once with the table of calls: `rank 0: broadcast(src 0, ...)`, ...,
// `rank W-1: broadcast(src W-1, ...)`. Without it, two ranks each believe that they are the sender:
// the ranks fail at --timeout ("not every rank reached this call") or with "a peer closed its
// connection", and on 3 ranks one of them may even hold the weights by then; no error names the
// root. PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL leaves the root out of its fingerprint: there,
// the same mistake ends at the timeout.
// Grade it: ./tutorial check 10-ex3        Run it: ./tutorial run 10-ex3 --solution
//   with the mistake: DIST_DEBUG=DETAIL ./tutorial run 10-ex3 --solution -- --mistake --timeout 5
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
    if (mistake && rank == dist::get_world_size() - 1) root = rank;  // THE MISTAKE
    dist::broadcast(weights, root);
    dist::out() << "broadcast from root " << root << ": weights " << weights;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
