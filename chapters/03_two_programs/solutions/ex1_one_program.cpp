// Chapter 03, exercise 1 — one program for both ranks.
//
// try_rank0.py and try_rank1.py differ only in where the rank comes from. One program can serve
// every rank: --rank and --world-size, when given, are passed to init_process_group (and win, by
// chapter 02's precedence); without them, env:// reads RANK and WORLD_SIZE, so the same binary
// runs by hand in two terminals and under ddprun, torchrun or mpirun.
// Run by hand:   ch03_two_programs_ex1 --rank 0 --world-size 2     (terminal 1)
//                ch03_two_programs_ex1 --rank 1 --world-size 2     (terminal 2)
// or:            ./tutorial run 03-ex1   (ddprun --standalone --nproc-per-node 2
// ch03_two_programs_ex1)
#include <dist/dist.h>

#include <cstdint>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch03_two_programs_ex1",
                  "One program for every rank: --rank/--world-size, or RANK/WORLD_SIZE.");
    int rank_flag = -1, world_flag = -1;
    cli.add_int("--rank", &rank_flag, "this process's rank (-1: from RANK)", -1, 1 << 20);
    cli.add_int("--world-size", &world_flag, "how many ranks (-1: from WORLD_SIZE)", -1, 1 << 20);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    // By hand there is no launcher: meet at post B's address unless the environment says.
    ::setenv("MASTER_ADDR", "127.0.0.1", 0);
    ::setenv("MASTER_PORT", "29501", 0);

    dist::InitOptions options = cli.init_options();
    options.rank = rank_flag;         // -1 leaves it to the environment
    options.world_size = world_flag;  // likewise
    dist::init_process_group(options);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    dist::out() << "Rank: " << rank << ", World size: " << world << " (rank from "
                << (rank_flag >= 0 ? "--rank" : "RANK") << ")";

    dist::Tensor t = dist::full(1, rank + 1, dist::kInt64, dist::get_device());
    dist::all_reduce(t, dist::ReduceOp::SUM);
    const bool ok = t.item(0) == static_cast<double>(std::int64_t{world} * (world + 1) / 2);
    const bool job_ok = dist::all_ranks_ok(ok);
    // Printed before destroy: run by hand, nothing in the environment names rank 0 afterwards.
    if (job_ok) {
      dist::out0() << "OK: one program, " << world
                   << " ranks; all_reduce(rank + 1) = " << t.item(0);
    } else {
      dist::out0() << "MISMATCH: all_reduce(rank + 1) should be W(W+1)/2 on every rank";
    }
    dist::destroy_process_group();
    return job_ok ? dist::kExitOk : dist::kExitFailure;
  });
}
