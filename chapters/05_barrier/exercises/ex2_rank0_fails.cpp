// Chapter 05, exercise 2 — rank 0's download fails: the others must be told, not left waiting.
//
// Rank 0 goes first and its download fails, as a mirror answering 404 would. Post C's guard (a
// barrier before the body on the waiting ranks, one after it on rank 0) lets rank 0's exception
// skip the barrier that releases the others: they wait until the timeout, or until the launcher
// stops them. Make every waiting rank get an error at once, without running the download, and
// say what each rank saw. (Here every rank reports and the job ends normally; a training script
// lets the error end the job, which then stops at once on every rank instead of hanging.)
// Grade it: ./tutorial check 05-ex2        Run it: ./tutorial run 05-ex2
#include <dist/dist.h>
#include <dist/zero_first.h>

#include <chrono>
#include <string>

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch05_barrier_ex2",
                  "Rank 0 fails inside zero_first; the others learn it at once.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    bool ran = false;
    const auto download = [&] {  // fails on rank 0, the one that goes first
      ran = true;
      if (rank == 0) throw dist::Error("download failed: the mirror answered 404 (on purpose)");
    };
    std::string seen = "no error";
    const auto start = std::chrono::steady_clock::now();

    // TODO(exercise): run `download` with rank 0 first so that, when it fails, every waiting rank
    // gets a dist::Error at once (dist::zero_first, <dist/zero_first.h>); catch the dist::Error
    // this rank gets and keep its what() in `seen`. Post C's guard below is the thing to replace.
    try {
      if (rank != 0) dist::barrier();  // the others wait for rank 0 ...
      download();
      if (rank == 0) dist::barrier();  // ... which releases them when it is done
    } catch (const dist::Error& e) {
      seen = e.what();
    }

    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    dist::out() << "ran the download: " << (ran ? "yes" : "no") << "; after " << waited.count()
                << " ms saw: " << seen;
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
