// Chapter 05, exercise 2 — rank 0's download fails: the others must get an error, not a hang.
//
// The exercise: "Make rank 0 throw inside dist::zero_first, as a failed download would. What do
// the waiting ranks see, and when? What would they see with post C's context manager?"
//
// The solution: the waiting ranks sit in zero_first's collective, an all_reduce(MIN) of a status.
// When rank 0's callable throws, zero_first still joins that collective, with "rank 0 failed"
// instead of "fine", and then lets rank 0's own exception go on; so the waiting ranks throw
// dist::Error at once ("rank 0 failed inside zero_first"), without running their callable, not a
// TimeoutError after --timeout. With post C's version (a barrier after `yield`), rank 0's
// exception skips its barrier: if rank 0's process exits, Gloo peers see the connection close
// (and a launcher stops the job); if rank 0 catches the error and carries on, the others wait
// for the whole timeout and then fail with a message that says nothing about the download.
//
// Every rank catches its error and checks it is the right one; then the group is still usable
// (each rank made exactly one collective call in zero_first), so they agree on a verdict.
//
// Run: ddprun --standalone --nproc-per-node 3 ch05_barrier_ex2
#include <dist/dist.h>
#include <dist/zero_first.h>

#include <chrono>
#include <string>

namespace {

enum class Outcome { kNoError, kRightError, kTimeout, kWrongError };

// Runs the "download" with rank 0 first and says which error this rank saw (and prints it).
Outcome guarded_download(int rank, bool& body_ran) {
  try {
    dist::zero_first([&] {
      body_ran = true;
      if (rank == 0) throw dist::Error("download failed: the mirror answered 404 (on purpose)");
    });
  } catch (const dist::TimeoutError&) {
    return Outcome::kTimeout;
  } catch (const dist::Error& e) {
    const std::string what = e.what();
    dist::out() << "error: " << what;
    const std::string want = rank == 0 ? "404" : "rank 0 failed inside zero_first";
    return what.find(want) != std::string::npos ? Outcome::kRightError : Outcome::kWrongError;
  }
  return Outcome::kNoError;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch05_barrier_ex2",
                  "Rank 0 fails inside zero_first; the others learn it at once.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    const auto start = std::chrono::steady_clock::now();
    bool body_ran = false;
    const Outcome outcome = guarded_download(rank, body_ran);
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    const char* names[] = {"no error", "the right error", "a timeout", "a wrong error"};
    dist::out() << "saw " << names[static_cast<int>(outcome)] << " after " << waited.count()
                << " ms" << (rank != 0 && body_ran ? ", and ran the body anyway" : "");

    // Rank 0 must have run its body and seen its own error; the others must not have run theirs
    // (the data is not there) and must have seen rank 0's failure, not a timeout.
    const bool ok = outcome == Outcome::kRightError && body_ran == (rank == 0);
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: some rank did not see rank 0's failure as it should";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: rank 0's failure reached every waiting rank as an error, not a hang";
    return dist::kExitOk;
  });
}
