// Chapter 01, exercise 1 — "only the main process logs", before and after init.
//
// Training scripts guard their logging and checkpointing with mmcv's idiom
//   rank, _ = get_dist_info(); if rank == 0: ...
// Before init_process_group, get_dist_info() answers rank 0 on EVERY process, so a line meant to
// be printed once appears world_size times. The guard that is right before init too reads the
// rank the launcher gave (RANK; LOCAL_RANK would pass one process per machine), and one
// all_reduce SUM of three 0/1 flags counts the processes that pass each guard.
// Grade it: ./tutorial check 01-ex1        Run it: ./tutorial run 01-ex1 --solution
#include <dist/dist.h>

#include <cstdint>
#include <vector>

namespace {

// The naive guard: right after init, wrong before it.
bool is_main_process() {
  return dist::get_dist_info().rank == 0;
}

// The guard that also works before init: the launcher already told this process its rank.
bool is_main_process_even_before_init() {
  if (dist::get_dist_info().initialized) return dist::get_dist_info().rank == 0;
  return dist::read_launch_env().rank.value_or(0) == 0;
}

const char* yes_no(bool b) {
  return b ? "yes" : "no";
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
    const bool after = is_main_process();
    dist::out() << "main process? naive guard before init: " << yes_no(naive_before)
                << ", launcher's RANK before init: " << yes_no(fixed_before)
                << ", after init: " << yes_no(after);

    // One slot per guard; the SUM over ranks counts the processes that said "I am the main one".
    auto flags = dist::Tensor::from<std::int64_t>({naive_before, fixed_before, after});
    flags = flags.to(dist::get_device());
    dist::all_reduce(flags, dist::ReduceOp::SUM);
    const std::vector<std::int64_t> counts = flags.cpu().to_vector<std::int64_t>();

    dist::out0() << "main processes: naive guard before init " << counts[0]
                 << ", launcher's RANK before init " << counts[1] << ", after init " << counts[2];
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
