// Chapter 03 — two programs, part 1 of 2: rank 0, which takes its rank from arguments.
//
// Post B ends with a world of two processes and no launcher: two scripts, try_rank0.py and
// try_rank1.py, run by hand in two terminals. This is try_rank0.py. It sets MASTER_ADDR and
// MASTER_PORT itself and passes rank=0, world_size=2 to init_process_group; its partner,
// ch03_rank1 (rank1.cpp), puts RANK=1 and WORLD_SIZE=2 in its environment instead. Post B says
// "start rank 0 first". That is not needed, here or in PyTorch: rank 0 hosts the store and waits
// for rank 1; rank 1, started first, retries connecting until rank 0 is there. Either waits at
// most --timeout seconds, then says who never came.
//
// You will learn: running ranks by hand, without a launcher; what rank 0 does that rank 1 does
// not (host the store); why the start order does not matter; what a timeout tells you.
// Builds on: chapter 02 (explicit arguments vs the environment).
//
// Run, in two terminals, in either order (not under ddprun: each program is one rank):
//   build/cpu/bin/ch03_rank0
//   build/cpu/bin/ch03_rank1
// Prints, in this terminal:
//   [rank 0/2] waiting up to 60 s for rank 1 at 127.0.0.1:29501 (rank=0, world_size=2 passed)
//   [rank 0/2] Rank: 0, World size: 2
//   [rank 0/2] all_reduce(rank + 1): tensor([3])
//   [rank 0/2] OK: the two programs met; all_reduce(rank + 1) = 1 + 2 = 3
#include <dist/dist.h>

#include <cstdlib>
#include <string>

#include "meeting_point.h"

namespace {

constexpr int kRank = 0, kWorldSize = 2;

// Before init nothing in the environment says who this process is (that is the point: its rank
// is an argument), so this line carries the prefix init is about to give it.
void say_before_init(const std::string& text) {
  dist::write_stdout("[rank " + std::to_string(kRank) + "/" + std::to_string(kWorldSize) + "] " +
                     text + "\n");
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags: the shared ones, and where to meet
    dist::Cli cli("ch03_rank0",
                  "Rank 0 of post B's two-program world (try_rank0.py): start it and ch03_rank1 "
                  "in two terminals, in either order, not under a launcher.");
    ch03::MeetingPoint meet;
    ch03::add_meeting_flags(cli, meet, "ch03_rank1");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // ---- Step 1: where to meet, set in our own environment as post B does
    std::string where = ch03::set_master(meet);

    // ---- Step 2: join: rank and world_size as arguments. Rank 0 hosts the store and waits for
    // rank 1, however late it starts, up to --timeout.
    dist::InitOptions options = cli.init_options();
    options.rank = kRank;
    options.world_size = kWorldSize;
    if (!options.init_method.empty() && options.init_method != "env://") {
      where = options.init_method;  // --init-method tcp://... or file://... replaces the address
    }
    say_before_init("waiting up to " + std::to_string(options.timeout.count() / 1000) +
                    " s for rank 1 at " + where + " (rank=0, world_size=2 passed)");
    dist::init_process_group(options);

    // ---- Step 3: post B's line, and proof that the partner is really there
    const int rank = dist::get_rank(), world = dist::get_world_size();
    dist::out() << "Rank: " << rank << ", World size: " << world;
    dist::Tensor t = dist::full(1, rank + 1, dist::kInt64, dist::get_device());
    dist::all_reduce(t, dist::ReduceOp::SUM);  // 1 from us + 2 from rank 1
    dist::out() << "all_reduce(rank + 1): " << t.cpu();
    const bool ok = rank == kRank && world == kWorldSize && t.item(0) == 3;

    // ---- Step 4: one verdict for both programs (printed while the group still names us
    // rank 0 of 2: afterwards nothing in this process's environment does), then leave
    const bool job_ok = dist::all_ranks_ok(ok);
    if (job_ok) {
      dist::out() << "OK: the two programs met; all_reduce(rank + 1) = 1 + 2 = 3";
    } else {
      dist::out() << "MISMATCH: expected rank 0 of 2 and all_reduce(rank + 1) = 3 on both";
    }
    dist::destroy_process_group();
    if (!job_ok) return dist::kExitFailure;
    return dist::kExitOk;
  });
}
