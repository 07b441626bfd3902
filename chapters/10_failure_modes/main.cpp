// Chapter 10 — failure modes: break a distributed job on purpose, and read what it says.
//
// Every mistake here is one that users of torch.distributed make. Most end in a job that waits
// for a timeout (PyTorch: 30 minutes on Gloo; on NCCL 10 minutes since 2.2, and in 1.13 for ever
// unless NCCL_ASYNC_ERROR_HANDLING or NCCL_BLOCKING_WAIT is set), or in one that trains on the
// wrong data without a word. ch10_broken (broken.cpp) makes each mistake; this driver starts it
// as the mistake needs (one machine or two, a port taken, a machine that never starts), checks
// that it ended by itself within seconds and said what went wrong, prints the cause and the fix,
// and runs the fixed job.
//
// You will learn: to read a job's failure from its first error; DIST_DEBUG=DETAIL, which compares
// every collective call across ranks; monitored_barrier, which names the ranks that did not come;
// what a crash, a missing machine and a taken port look like; and two silent mistakes (no
// set_epoch, one seed everywhere) with the checks that make them loud.
// Builds on: every chapter before it; 05 (barrier), 06 (seeds), 07 (sampler) and 09 (training).
//
// Run:   ./tutorial run 10 [CASE...]      (every case when none is named; --list names them)
//        build/cpu/bin/ch10_failure_modes partial-collective
// Prints on stdout (the job's own output goes to stderr, each line after "  |"):
//   == partial-collective: a collective called on only some ranks
//   with the mistake: exit code 1, ended by itself
//     rank 0: all_reduce(SUM, torch.float32, 1 elements, cpu)
//     rank 1: barrier()
//   OK: partial-collective reproduced, diagnosed and fixed
#include <dist/check.h>
#include <dist/log.h>

#include <string>
#include <vector>

#include "jobs.h"
#include "support.h"

namespace {

using ch10::Case;
using ch10::Launch;

// ---- The cases: each mistake, what its job must print, the cause and the fix ------------------
// Evidence: a piece of one line the job must print (on the machine named, if any), or it fails.
const ch10::Env kDetail = {{"DIST_DEBUG", "DETAIL"}};

std::vector<Case> all_cases() {
  return {
      {.name = "partial-collective",
       .title = "a collective called on only some ranks",
       .mistake = "only rank 0 calls all_reduce (it alone prints the loss); every rank then calls "
                  "barrier()",
       .broken =
           {.env = kDetail,
            .evidence = {{"rank 0: all_reduce(SUM, torch.float32, 1 elements, cpu)"},
                         {"rank 1: barrier()"},
                         {"Every rank must make the same collective calls in the same order"}}},
       .cause = "collectives pair up by their order on each rank, not by their name: rank 0's "
                "all_reduce met rank 1's barrier. Without DIST_DEBUG=DETAIL both wait until "
                "--timeout, and say only that they timed out",
       .fix = "call every collective on every rank; keep only the printing under `if (rank == 0)`",
       .fixed = {.fixed = true, .env = kDetail, .evidence = {{"mean loss 0.75"}}}},

      {.name = "mismatched-size",
       .title = "ranks reduce tensors of different sizes",
       .mistake = "each rank all_reduces its per-sample losses; the last batch is 4 samples on "
                  "rank 0, 3 on rank 1",
       .broken = {.env = kDetail,
                  .evidence = {{"rank 0: all_reduce(SUM, torch.float32, 4 elements, cpu)"},
                               {"rank 1: all_reduce(SUM, torch.float32, 3 elements, cpu)"}}},
       .cause = "a collective needs the same number of elements on every rank, and counts that "
                "come from the data differ. Unchecked (PyTorch without DETAIL), one rank ends "
                "with a wrong sum",
       .fix = "reduce a fixed-size summary ({sum, count}), or pad to one size first",
       .fixed = {.fixed = true,
                 .env = kDetail,
                 .evidence = {{"summed tensor([1.7500, 7.0000], dtype=torch.float64)"}}}},

      {.name = "mismatched-dtype",
       .title = "ranks reduce tensors of different dtypes",
       .mistake = "rank 0 keeps its metric in float64, rank 1 in float32",
       .broken = {.env = kDetail,
                  .evidence = {{"rank 0: all_reduce(SUM, torch.float64, 1 elements, cpu)"},
                               {"rank 1: all_reduce(SUM, torch.float32, 1 elements, cpu)"}}},
       .cause = "the ranks exchange raw bytes, and 8-byte and 4-byte numbers do not mix. "
                "Unchecked (PyTorch without DETAIL), a rank aborts",
       .fix = "create the tensor with an explicit dtype, the same on every rank",
       .fixed = {.fixed = true,
                 .env = kDetail,
                 .evidence = {{"correct predictions tensor([181.])"}}}},

      {.name = "mismatched-op",
       .title = "ranks reduce with different ops",
       .mistake = "rank 0 asks for MAX (the worst loss, for its log), rank 1 for SUM",
       .broken = {.env = kDetail,
                  .evidence = {{"rank 0: all_reduce(MAX, torch.float32, 1 elements, cpu)"},
                               {"rank 1: all_reduce(SUM, torch.float32, 1 elements, cpu)"}}},
       .cause = "each rank applies its own op: the ranks end with numbers nobody asked for. "
                "PyTorch does not notice, even with DETAIL; this library compares ops",
       .fix = "one op on every rank; for a second statistic, a second all_reduce on every rank",
       .fixed = {.fixed = true, .env = kDetail, .evidence = {{"summed loss tensor([1.5000])"}}}},

      {.name = "skipped-barrier",
       .title = "a barrier that one rank skips",
       .mistake = "rank 1 has no validation shard and skips the barrier that ends validation",
       .broken =
           {.evidence = {{"monitored_barrier #1 on rank 0: rank 1 did not arrive within 2 s"}}},
       .cause = "rank 0 waits at a barrier that rank 1 never reaches; a plain barrier() only says "
                "that it timed out, monitored_barrier() names who is missing",
       .fix = "every rank reaches every barrier: put early exits after it, or let a rank with "
              "nothing to do loop zero times",
       .fixed = {.fixed = true, .evidence = {{"epoch loss tensor([2.])"}}}},

      {.name = "crash",
       .title = "a rank crashes in the middle of training",
       .mistake = "rank 3, on machine B, is killed at step 3 (SIGKILL, as the out-of-memory "
                  "killer does)",
       .broken =
           {.launch = Launch::kTwoMachines,
            .evidence =
                {{"first failure: rank 3 was killed by signal 9 (SIGKILL); ddprun exits 137",
                  "machine B"},
                 {"a SIGKILL that nobody sent by hand is often the kernel's out-of-memory killer",
                  "machine B"},
                 {"a peer closed its connection (it exited or crashed; look for its error above)",
                  "machine A"}}},
       .cause = "the first failure is the cause, every other error its echo. Machine B's ddprun "
                "names it; machine A's ranks stop within seconds, because a group closes all its "
                "connections at its first error",
       .fix = "read the first failure's own lines (here: dmesg, then a smaller batch), fix that, "
              "and resume from the last checkpoint (chapter 09, --resume)",
       .fixed = {.launch = Launch::kTwoMachines,
                 .fixed = true,
                 .evidence = {{"trained 5 steps", "machine A"}}}},

      {.name = "stopped-rank",
       .title = "a rank that stops answering",
       .mistake = "rank 1 is stopped at step 3 (SIGSTOP, as Ctrl-Z, a debugger or a frozen "
                  "machine does)",
       .broken =
           {.evidence =
                {{"all_reduce #3 (SUM, torch.float32, 4 elements) timed out after 5 s on rank 0"},
                 {"rank 1  stopped by ddprun (SIGTERM)   <- stopped before the first failure: "
                  "likely cause"},
                 {"hint: rank 1 had been stopped (SIGSTOP)"},
                 {"rank 0 waits in all_reduce #3 (SUM, torch.float32, 4 elements)"},
                 {"rank 1 last finished #2 and is in no collective"}}},
       .cause = "a stopped rank is alive and keeps its connections open, so nothing tells the "
                "others it is gone: they fail at --timeout, and one of them is the first failure. "
                "ddprun names the rank; its flight record shows it behind, after call #2",
       .fix = "find what stopped it (a debugger, a shell's Ctrl-Z, memory pressure); keep "
              "--timeout short enough that a stuck job fails in minutes, not hours",
       .fixed = {.fixed = true, .evidence = {{"trained 5 steps"}}}},

      {.name = "who-hung-where",
       .title = "a hang read from the ranks' flight records",
       .mistake = "partial-collective without DIST_DEBUG=DETAIL, with --timeout 2",
       .broken = {.evidence = {{"rank 0 waits in all_reduce #1 (SUM, torch.float32, 1 elements)"},
                               {"rank 1 finished no collective and is in barrier #1"},
                               {"call #1 differs across ranks: rank 0 all_reduce (SUM, "
                                "torch.float32, 1 elements); rank 1 barrier"}},
                  .worker = "partial-collective",
                  .timeout_s = 2},
       .cause = "each rank knows only that its own call timed out, but each wrote its last "
                "collectives to DIST_TRACE_DIR/rank_R.json (at its timeout, or at ddprun's "
                "SIGTERM); ddprun read them together: call #1 differs",
       .fix = "every rank calls the all_reduce. For any hang, read the records first: another call "
              "is a mismatch, a rank behind is stuck in its own code (stopped-rank)",
       .fixed = {.fixed = true, .evidence = {{"mean loss 0.75"}}, .worker = "partial-collective"}},

      {.name = "never-starts",
       .title = "a rank that never starts",
       .mistake = "machine B's ddprun is never started: ranks 2 and 3 of 4 do not exist",
       .broken = {.launch = Launch::kMachineAOnly,
                  .evidence = {{"ranks 2, 3 of world_size 4 never joined", "machine A"}},
                  .worker = "train"},
       .cause = "init_process_group waits for all WORLD_SIZE ranks until the timeout, then names "
                "those that never came",
       .fix = "start every machine (the same --nnodes, --master-addr and --master-port, its own "
              "--node-rank), or lower --nnodes",
       .fixed = {.launch = Launch::kTwoMachines,
                 .evidence = {{"trained 5 steps", "machine A"}},
                 .worker = "train"}},

      {.name = "busy-port",
       .title = "a port that is already taken",
       .mistake = "MASTER_PORT is a port that another process already listens on",
       .broken =
           {.launch = Launch::kPortTaken,
            .evidence = {{"is already in use (another job, or a process left over from one)"}},
            .worker = "train"},
       .cause = "rank 0 cannot host the store on a port that is taken; exit code 2 says: change "
                "the configuration, not the code",
       .fix = "pick a free MASTER_PORT, or let `ddprun --standalone` choose one",
       .fixed = {.evidence = {{"trained 5 steps"}}, .worker = "train"}},

      {.name = "no-set-epoch",
       .title = "a forgotten set_epoch",
       .mistake = "the training loop never calls sampler.set_epoch(epoch)",
       .broken = {.evidence =
                      {{"all 3 epochs read the same order: the sampler was never told the epoch"}}},
       .cause = "DistributedSampler shuffles with seed + epoch; an epoch it is never told stays 0, "
                "so every epoch reads the same order. Nothing fails: the check in the code makes "
                "it loud",
       .fix = "call sampler.set_epoch(epoch) at the start of every epoch",
       .fixed = {.fixed = true, .evidence = {{"the order changes from epoch to epoch"}}}},

      {.name = "same-seed",
       .title = "the same seed on every rank",
       .mistake = "every rank calls init_seeds(0) before drawing its augmentations",
       .broken = {.evidence = {{"ranks 0 and 1 drew the same augmentations"}}},
       .cause = "one seed gives one random stream: every rank crops its images alike, and the job "
                "sees less variety than it pays for. Nothing fails: the check in the code makes "
                "it loud",
       .fix = "seed with seed + rank (chapter 06)",
       .fixed = {.fixed = true, .evidence = {{"every rank drew its own augmentations"}}}},

      {.name = "rank-for-local-rank",
       .title = "RANK used where LOCAL_RANK belongs",
       .mistake = "`rank == 0` picks who prepares each machine's copy of the data set",
       .broken = {.launch = Launch::kTwoMachines,
                  .evidence = {{"prepared the data set on this machine", "machine A"},
                               {"nobody here prepared it. Let LOCAL_RANK 0 of each machine prepare",
                                "machine B"}}},
       .cause = "RANK is unique in the job, LOCAL_RANK on a machine: only machine A has a RANK 0, "
                "so machine B's disk never gets a copy (and cuda:RANK would be cuda:2 on a 2-GPU "
                "machine)",
       .fix = "LOCAL_RANK for what is per machine (local disk, GPU); RANK for what is once per job",
       .fixed = {.launch = Launch::kTwoMachines,
                 .fixed = true,
                 .evidence = {{"prepared the data set on this machine", "machine B"},
                              {"every rank read its machine's copy: 4000 bytes", "machine A"}}}},
  };
}

}  // namespace

int main(int argc, char** argv) {
  try {  // not a rank of a job: errors are this program's own, with no "[rank r/W]" prefix
    // ---- Step 1: the cases named on the command line (every case when none is)
    const std::vector<Case> cases = all_cases();
    const auto chosen = ch10::choose_cases(cases, argc, argv);
    if (!chosen) return dist::kExitOk;  // --help or --list, answered

    // ---- Step 2: each case, with the mistake and then with the fix
    ch10::pass_stop_signals_to_jobs();  // a Ctrl-C here stops the jobs too
    int failed = 0;
    for (const Case* c : *chosen) failed += ch10::run_case(*c) ? 0 : 1;

    // ---- Step 3: one verdict for them all
    if (chosen->size() > 1) {
      const std::string n = std::to_string(chosen->size());
      dist::write_stdout(failed == 0 ? "OK: all " + n + " cases reproduced, diagnosed and fixed\n"
                                     : std::to_string(failed) + " of " + n + " cases failed\n");
    }
    return failed == 0 ? dist::kExitOk : dist::kExitFailure;
  } catch (const dist::Error& e) {
    dist::write_stderr(std::string("ch10_failure_modes: error: ") + e.what() + "\n");
    return e.exit_code();
  } catch (const std::exception& e) {
    dist::write_stderr(std::string("ch10_failure_modes: error: ") + e.what() + "\n");
    return dist::kExitFailure;
  }
}
