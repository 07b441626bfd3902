// Chapter 03 — two programs, part 2 of 2: rank 1, which takes its rank from the environment.
//
// This is post B's try_rank1.py: it writes RANK=1 and WORLD_SIZE=2 into its own environment
// (post B's comment calls RANK the "local rank"; it is the global rank) and calls
// init_process_group with no rank or world_size, so env:// reads them back. Its partner is
// ch03_rank0 (rank0.cpp), which passes them as arguments instead. Start the two in either order:
// rank 1 started first retries connecting to rank 0's store until rank 0 is listening, for at
// most --timeout seconds; then it stops with an error naming rank 0 and the address it tried.
//
// You will learn: the environment route to a rank, by hand; what a rank that is not rank 0 waits
// for, and for how long.
// Builds on: chapter 02 (explicit arguments vs the environment).
//
// Run, in two terminals, in either order (not under ddprun: each program is one rank):
//   build/cpu/bin/ch03_rank0
//   build/cpu/bin/ch03_rank1
// Prints, in this terminal:
//   [rank 1/2] waiting up to 60 s for rank 0 at 127.0.0.1:29501 (RANK=1, WORLD_SIZE=2 set)
//   [rank 1/2] Rank: 1, World size: 2
//   [rank 1/2] all_reduce(rank + 1): tensor([3])
#include <dist/dist.h>

#include <cstdlib>
#include <string>

#include "meeting_point.h"

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags: the shared ones, and where to meet
    dist::Cli cli("ch03_rank1",
                  "Rank 1 of post B's two-program world (try_rank1.py): start it and ch03_rank0 "
                  "in two terminals, in either order, not under a launcher.");
    ch03::MeetingPoint meet;
    ch03::add_meeting_flags(cli, meet, "ch03_rank0");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: who we are and where to meet, in our own environment, as post B does.
    // RANK and WORLD_SIZE are this program's identity, so they overwrite whatever was there.
    ::setenv("RANK", "1", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    std::string where = ch03::set_master(meet);

    // ---- Step 2: join with nothing passed: env:// reads RANK, WORLD_SIZE, MASTER_ADDR/PORT.
    // If rank 0 is not up yet, this retries connecting to its store until --timeout.
    const dist::InitOptions options = cli.init_options();
    if (!options.init_method.empty() && options.init_method != "env://") {
      where = options.init_method;  // --init-method tcp://... or file://... replaces the address
    }
    dist::out() << "waiting up to " << options.timeout.count() / 1000 << " s for rank 0 at "
                << where << " (RANK=1, WORLD_SIZE=2 set)";
    dist::init_process_group(options);

    // ---- Step 3: post B's line, and the all_reduce that proves rank 0 is there
    const int rank = dist::get_rank(), world = dist::get_world_size();
    dist::out() << "Rank: " << rank << ", World size: " << world;
    dist::Tensor t = dist::full(1, rank + 1, dist::kInt64, dist::get_device());
    dist::all_reduce(t, dist::ReduceOp::SUM);  // 1 from rank 0 + 2 from us
    dist::out() << "all_reduce(rank + 1): " << t.cpu();
    const bool ok = rank == 1 && world == 2 && t.item(0) == 3;

    // ---- Step 4: one verdict for both programs (rank 0 prints it), then leave
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    return job_ok ? dist::kExitOk : dist::kExitFailure;
  });
}
