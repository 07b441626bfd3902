// Chapter 01, exercise 1 — "only the main process logs", before and after init.
//
// Training scripts guard their logging and checkpointing with mmcv's idiom
//   rank, _ = get_dist_info(); if rank == 0: ...
// Before init_process_group, get_dist_info() answers rank 0 on EVERY process, so a line meant to
// be printed once appears world_size times. This solution counts the processes that believe they
// are the main one, with an all_reduce: the naive guard before init (world_size of them), a
// guard that reads the launcher's RANK before init (one), and get_dist_info() after init (one).
// Run: ./tutorial run 01-ex1   (or: ddprun --standalone --nproc-per-node 2 ch01_get_dist_info_ex1)
#include <dist/dist.h>

namespace {

// The naive guard: right after init, wrong before it.
bool is_main_process() {
  return dist::get_dist_info().rank == 0;
}

// The guard that also works before init: the launcher already told this process its rank.
bool is_main_process_even_before_init() {
  return dist::get_dist_info().initialized ? dist::get_dist_info().rank == 0
                                           : dist::read_launch_env().rank.value_or(0) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch01_get_dist_info_ex1",
                  "Count the processes that think they are the main one, before and after init.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const bool naive_before = is_main_process();
    const bool fixed_before = is_main_process_even_before_init();

    dist::init_process_group(cli.init_options());
    const int world = dist::get_world_size();
    const bool after = is_main_process();
    // One slot per guard; the SUM over ranks counts the processes that said "I am the main one".
    auto counts = dist::Tensor::from<std::int64_t>({naive_before, fixed_before, after});
    counts = counts.to(dist::get_device());
    dist::all_reduce(counts, dist::ReduceOp::SUM);
    dist::destroy_process_group();

    dist::out0() << "main processes: naive guard before init " << counts.item(0)
                 << ", launcher's RANK before init " << counts.item(1) << ", after init "
                 << counts.item(2);
    if (counts.item(0) != world || counts.item(1) != 1 || counts.item(2) != 1) {
      dist::out0() << "MISMATCH: expected " << world << ", 1 and 1";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: before init every process is \"rank 0\"; read RANK, or init first";
    return dist::kExitOk;
  });
}
