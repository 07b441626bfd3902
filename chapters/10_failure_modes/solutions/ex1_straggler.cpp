// Chapter 10, exercise 1 — a straggler: monitored_barrier names it, a longer timeout lets it in.
//
// The last rank comes late_ms (1.5 s by default) late to a monitored_barrier that waits 1 s: rank 0
// writes its verdict, "rank W-1 did not arrive within 1 s", to the store, and every rank that came
// in time reads it and throws; so does the straggler when it arrives (rank 0 keeps the store up
// for it a while longer), naming itself. monitored_barrier talks only through the store, so the
// process group is unharmed: the next one, with room for the straggler, lets every rank through.
// A skipped barrier and a slow rank look alike at the barrier; the slow one just comes later.
// Grade it: ./tutorial check 10-ex1        Run it: ./tutorial run 10-ex1 --solution
#include <dist/dist.h>

#include <chrono>
#include <string>
#include <thread>

namespace {

// Milliseconds on the machine's wall clock: every rank of a one-machine job reads the same clock,
// so the times that ranks print can be compared with each other.
long long now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch10_failure_modes_ex1",
                  "The last rank arrives late at a monitored_barrier; every rank is told who.");
    int late_ms = 1500;
    cli.add_int("--late-ms", &late_ms, "how late the last rank is, in ms (more than 1000)", 1001,
                1999);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();
    const bool straggler = rank == dist::get_world_size() - 1;

    // ---- Step 1: the straggler is late for a barrier that waits 1 s
    if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    std::string told;  // what the barrier said to this rank; empty if it said nothing
    // monitored_barrier throws dist::TimeoutError on every rank, the straggler included, when a
    // rank does not come in time. Catch it here, so that the job goes on to step 2.
    try {
      dist::monitored_barrier(std::chrono::seconds(1));
    } catch (const dist::TimeoutError& e) {
      told = e.what();
    }
    dist::out() << "barrier 1: " << (told.empty() ? "told nothing" : "told: " + told);

    // ---- Step 2: late again, for a barrier with room for the straggler
    if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(late_ms));
    told.clear();
    const long long arrived = now_ms();
    // Only the store carried step 1's verdict, so the group is unharmed: a barrier that waits
    // longer than the straggler is late lets every rank through.
    try {
      dist::monitored_barrier(std::chrono::seconds(5));
    } catch (const dist::TimeoutError& e) {
      told = e.what();
    }
    const long long left = now_ms();
    dist::out() << "barrier 2: arrived at " << arrived << " ms, left at " << left << " ms, "
                << (told.empty() ? "told nothing" : "told: " + told);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
