// Chapter 01, exercise 2 — which machine, which GPU: rank vs local_rank.
//
// A launcher numbers ranks machine by machine: rank = machine * local_world_size + local_rank
// (ddprun and torchrun both do; GROUP_RANK is the machine's index). Under NCCL, local_rank picks
// the GPU, so two ranks on one machine with the same local_rank would fight over one GPU. This
// solution works out each rank's machine and GPU slot from get_dist_info(), checks them against
// GROUP_RANK, and checks with a one-hot all_reduce that every (machine, slot) pair is used by
// exactly one rank.
// Run: ./tutorial run 01-ex2   (or: ddprun --standalone --nproc-per-node 2 ch01_get_dist_info_ex2)
// Try it across "two machines" on one: two ddprun commands with --nnodes 2 --node-rank 0/1 and
// the same --master-port.
#include <dist/dist.h>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch01_get_dist_info_ex2",
                  "Work out each rank's machine and GPU slot, and check that no two share one.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const dist::DistInfo info = dist::get_dist_info();
    const int machine = info.rank / info.local_world_size;
    const int slot = info.local_rank;  // cuda:slot under NCCL
    dist::out() << "machine " << machine << ", local_rank " << slot << " (cuda:" << slot
                << " under nccl)";

    // Every (machine, slot) pair once: slot number machine * local_world_size + local_rank.
    dist::Tensor used = dist::zeros(info.world_size, dist::kInt64);
    const int index = machine * info.local_world_size + slot;
    bool ok = index >= 0 && index < info.world_size && index == info.rank;
    if (ok) used.set(index, 1);
    used = used.to(dist::get_device());
    dist::all_reduce(used, dist::ReduceOp::SUM);
    ok = ok && used.cpu().equal(dist::full(info.world_size, 1, dist::kInt64));
    // GROUP_RANK, when a launcher set it, must name the same machine.
    const auto group_rank = dist::read_launch_env().group_rank;
    ok = ok && (!group_rank || *group_rank == machine);

    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: some rank's machine or GPU slot is not its own (see above)";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: rank = machine * local_world_size + local_rank, one rank per GPU slot";
    return dist::kExitOk;
  });
}
