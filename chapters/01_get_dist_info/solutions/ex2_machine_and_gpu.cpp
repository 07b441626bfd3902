// Chapter 01, exercise 2 — which machine, which GPU: rank vs local_rank.
//
// A launcher numbers ranks machine by machine: rank = machine * local_world_size + local_rank
// (ddprun and torchrun both do; GROUP_RANK is the machine's index). Under NCCL, local_rank picks
// the GPU, so two ranks on one machine with the same local_rank would fight over one GPU. Each
// rank works out its machine and GPU slot from get_dist_info(); a one-hot all_reduce then shows
// how many ranks took each (machine, slot) pair: exactly one each, when the numbering is right.
// Grade it: ./tutorial check 01-ex2        Run it: ./tutorial run 01-ex2 --solution
// Try it across "two machines" on one: two ddprun commands with --nnodes 2 --node-rank 0/1 and
// the same --master-port (the grader runs it so).
#include <dist/dist.h>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch01_get_dist_info_ex2",
                  "Work out each rank's machine and GPU slot, and count the ranks on each.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const dist::DistInfo info = dist::get_dist_info();

    const int machine = info.rank / info.local_world_size;
    const int slot = info.local_rank;  // cuda:slot under NCCL

    dist::out() << "machine " << machine << ", local_rank " << slot << " (cuda:" << slot
                << " under nccl)";
    // A 1 at this rank's (machine, slot) pair, numbered machine * local_world_size + slot; the
    // SUM over ranks counts the ranks that took each pair.
    dist::Tensor taken = dist::zeros(info.world_size, dist::kInt64);
    const int pair = machine * info.local_world_size + slot;
    if (pair >= 0 && pair < info.world_size) taken.set(pair, 1);
    taken = taken.to(dist::get_device());
    dist::all_reduce(taken, dist::ReduceOp::SUM);
    dist::out0() << "ranks on each (machine, local_rank): " << taken.cpu();
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
