// Chapter 01, exercise 1 — "only the main process logs", before and after init.
//
// Training scripts guard their logging and checkpointing with mmcv's idiom
//   rank, _ = get_dist_info(); if rank == 0: ...
// Before init_process_group, get_dist_info() answers rank 0 on EVERY process, so a line meant to
// be printed once appears world_size times. Write a guard that is right before init too, and
// count, over all ranks, the processes that pass each guard.
// Grade it: ./tutorial check 01-ex1        Run it: ./tutorial run 01-ex1
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
  // TODO(exercise): before init, get_dist_info() says rank 0 everywhere; what did the launcher
  // already tell this process? (dist::read_launch_env() reads its variables.) After init,
  // get_dist_info() is right.
  return dist::get_dist_info().rank == 0;  // the naive guard: replace it
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

    // TODO(exercise): how many processes of the job pass each guard? One all_reduce of the three
    // flags is enough (dist::Tensor::from<std::int64_t>({a, b, c}) makes a tensor of three, .to()
    // moves it to dist::get_device(), and .cpu().to_vector<std::int64_t>() reads it back).
    const std::vector<std::int64_t> counts = {naive_before, fixed_before, after};  // replace

    dist::out0() << "main processes: naive guard before init " << counts[0]
                 << ", launcher's RANK before init " << counts[1] << ", after init " << counts[2];
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
