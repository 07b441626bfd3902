// Chapter 02, exercise 1 — all three sources at once, each saying something different.
//
// The environment says RANK=r, WORLD_SIZE=W. The init_method's query says rank=(r+1) mod W and
// world_size=W+1, one rank more than exist: if the query won, init would wait for a rank that
// never comes. The arguments say rank=W-1-r, world_size=W, numbering the processes backwards.
// Precedence (arguments, then the URL query, then the environment) predicts that the arguments
// win on every process; the one-hot all_reduce checks that the reversed numbering still gives
// each rank number to exactly one process. (With 2 ranks the query's rank and the argument's
// happen to agree; run it with --nproc 3 to see three different ranks.)
//
// Two things to notice. Rank 0 hosts the store, and rank 0 is now the process the launcher called
// rank W-1: that is fine on one machine, but on several, rank 0 must run on MASTER_ADDR's machine.
// And torch 1.13 refuses this combination outright (AssertionError: "The url ... has node-specific
// arguments(rank, world_size) already"): there, pass rank and world_size in one place only.
// Run: ./tutorial run 02-ex1   (or: ddprun --standalone --nproc-per-node 2 ch02_init_methods_ex1)
#include <dist/dist.h>

#include <string>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch02_init_methods_ex1",
                  "Give rank three different values (environment, URL query, argument) and see "
                  "which one wins.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const dist::LaunchEnv env = dist::read_launch_env();
    if (!env.rank || !env.world_size || !env.master_addr || !env.master_port) {
      throw dist::ConfigError(
          "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT must be set: run it under a launcher, "
          "e.g. ddprun --standalone --nproc-per-node 3 ch02_init_methods_ex1");
    }
    const int r = *env.rank, world = *env.world_size;
    const int from_query = (r + 1) % world, from_argument = world - 1 - r;

    dist::InitOptions options = cli.init_options();
    options.init_method = "tcp://" + *env.master_addr + ":" + std::to_string(*env.master_port) +
                          "?rank=" + std::to_string(from_query) +
                          "&world_size=" + std::to_string(world + 1);
    options.rank = from_argument;
    options.world_size = world;
    dist::init_process_group(options);
    const int rank = dist::get_rank();
    dist::out() << "RANK=" << r << " WORLD_SIZE=" << world
                << " in the environment, rank=" << from_query << " world_size=" << world + 1
                << " in the URL query, rank=" << from_argument << " world_size=" << world
                << " passed -> rank " << rank << " of " << dist::get_world_size();

    // Each rank number once: the one-hot vectors of all ranks sum to all ones.
    dist::Tensor one_hot = dist::zeros(world, dist::kInt64);
    one_hot.set(rank, 1);
    one_hot = one_hot.to(dist::get_device());
    dist::all_reduce(one_hot, dist::ReduceOp::SUM);
    const bool ok =
        rank == from_argument && one_hot.cpu().equal(dist::full(world, 1, dist::kInt64));
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: some process did not get the rank its argument gave it";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: the arguments won on every process; the ranks are numbered backwards";
    return dist::kExitOk;
  });
}
