// Chapter 03, exercise 1 — one program for both ranks.
//
// try_rank0.py and try_rank1.py differ only in where the rank comes from. One program can serve
// every rank: --rank and --world-size, when given, are passed to init_process_group (and win, by
// chapter 02's precedence); without them, env:// reads RANK and WORLD_SIZE, so the same binary
// runs by hand in two terminals and under ddprun, torchrun or mpirun.
// Grade it: ./tutorial check 03-ex1 (by hand at 2 and 3 ranks, then under ddprun)
// Run by hand:   ch03_two_programs_ex1 --rank 0 --world-size 2     (terminal 1)
//                ch03_two_programs_ex1 --rank 1 --world-size 2     (terminal 2)
// or:            ./tutorial run 03-ex1 --solution   (under ddprun, no flags)
#include <dist/dist.h>

#include <cstdlib>

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
    // The flags, when given, go to init_process_group; -1 (not given) leaves each value to the
    // environment, RANK and WORLD_SIZE, as a launcher sets them.
    options.rank = rank_flag;
    options.world_size = world_flag;
    dist::init_process_group(options);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    dist::out() << "Rank: " << rank << ", World size: " << world << " (rank from "
                << (rank_flag >= 0 ? "--rank" : "RANK") << ")";

    // Every rank joins one collective: the sum over ranks of rank + 1, W (W + 1) / 2.
    dist::Tensor t = dist::full(1, rank + 1, dist::kInt64, dist::get_device());
    dist::all_reduce(t, dist::ReduceOp::SUM);
    dist::out() << "all_reduce(rank + 1) = " << t.cpu();
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
