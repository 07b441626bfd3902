// Chapter 10, exercise 1 — a straggler: monitored_barrier names it, a longer timeout lets it in.
//
// The exercise: "Make the last rank sleep 1.5 s before a monitored_barrier(1 s). Which ranks see
// an error, and what does each one say? Then call monitored_barrier(5 s) on every rank: does the
// job go on?"
//
// The solution: rank 0 waits 1 s for everybody, then writes its verdict, "rank W-1 did not
// arrive within 1 s", to the store. Every rank that came in time reads it and throws; so does
// the straggler when it arrives (rank 0 keeps the store up for it a while longer), naming
// itself. monitored_barrier talks only through the store, so the process group is unharmed: the
// next monitored_barrier, with room for the straggler, passes on every rank. A skipped barrier
// and a slow rank look alike at the barrier; the difference is that the slow one comes later.
//
// Run: ddprun --standalone --nproc-per-node 3 ch10_failure_modes_ex1
#include <dist/dist.h>

#include <chrono>
#include <string>
#include <thread>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch10_failure_modes_ex1",
                  "The last rank arrives late at a monitored_barrier; every rank is told who.");
    int late_ms = 1500;
    cli.add_int("--late-ms", &late_ms, "how late the last rank is, in ms (more than 1000)", 1001,
                1999);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const int straggler = world - 1;

    // ---- Step 1: the straggler is late for a barrier that waits 1 s
    if (rank == straggler) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    std::string error;
    try {
      dist::monitored_barrier(std::chrono::seconds(1));
    } catch (const dist::TimeoutError& e) {
      error = e.what();
    }
    const std::string expected = "rank " + std::to_string(straggler) + " did not arrive within 1 s";
    const bool named = world == 1 || error.find(expected) != std::string::npos;
    dist::out() << (error.empty() ? "no error" : "told: " + expected);

    // ---- Step 2: the group is unharmed, and a barrier with room for the straggler passes
    dist::monitored_barrier(std::chrono::seconds(5));
    if (!dist::all_ranks_ok(named)) {
      dist::out0() << "MISMATCH: some rank was not told that rank " << straggler << " was late";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: every rank was told that rank " << straggler
                 << " was late, and the next barrier let it in";
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
