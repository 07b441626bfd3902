// Chapter 10 — failure modes: break a distributed job on purpose, and read what it says.
//
// Every mistake in this chapter is one that users of torch.distributed make, and most of them end
// the same way in PyTorch: a job that hangs for 30 minutes, or trains on the wrong data without a
// word. Here each one is reproduced on purpose by ch10_broken (broken.cpp), started the way the
// mistake needs: on one machine or on two, with a port already taken, with a machine that never
// starts. This driver runs the broken job, checks that it ended by itself within seconds and
// said what went wrong, prints the cause and the fix, and then runs the fixed job.
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

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "jobs.h"

namespace {

namespace fs = std::filesystem;
using Env = std::vector<std::pair<std::string, std::string>>;

// How the driver starts a job: what a person would type in one or two terminals.
enum class Launch {
  kOneMachine,    // ddprun --standalone: one machine, a free port
  kTwoMachines,   // two ddprun, machine A (ranks 0-1) and machine B (ranks 2-3), one master
  kMachineAOnly,  // the same, but machine B's ddprun never starts
  kPortTaken,     // one machine, MASTER_PORT already held by another process
};

// One run of ch10_broken and what it must print. Each pattern must match somewhere in the job's
// output (in `machine`'s, when set); what it matched is shown as the evidence.
struct Evidence {
  std::string machine;  // "" for any machine
  std::string pattern;  // ECMAScript regex, matched within one line
};
struct JobSpec {
  Launch launch = Launch::kOneMachine;
  bool fixed = false;
  Env env;
  std::vector<Evidence> evidence;
  std::string worker;  // ch10_broken's case, when it is not the driver's case's name
};

struct Case {
  std::string name, title, mistake;
  JobSpec broken;
  std::string cause, fix;
  JobSpec fixed;
};

// --8<-- [start:cases]
const Env kDetail = {{"DIST_DEBUG", "DETAIL"}};

std::vector<Case> all_cases() {
  const Evidence every_rank_alike = {
      "", R"(Every rank must make the same collective calls in the same order)"};
  return {
      {.name = "partial-collective",
       .title = "a collective called on only some ranks",
       .mistake = "only rank 0 calls all_reduce (it alone prints the loss); every rank then calls "
                  "barrier()",
       .broken = {.env = kDetail,
                  .evidence = {{"",
                                R"(rank 0: all_reduce\(SUM, torch\.float32, 1 elements, cpu\))"},
                               {"", R"(rank 1: barrier\(\))"},
                               every_rank_alike}},
       .cause = "collectives pair up by their order on each rank, not by their name: rank 0's "
                "all_reduce met rank 1's barrier. Without DIST_DEBUG=DETAIL both wait until "
                "--timeout, and say only that they timed out",
       .fix = "call every collective on every rank; keep only the printing under `if (rank == 0)`",
       .fixed = {.fixed = true, .env = kDetail, .evidence = {{"", R"(mean loss 0\.75)"}}}},

      {.name = "mismatched-size",
       .title = "ranks reduce tensors of different sizes",
       .mistake = "each rank all_reduces its per-sample losses; the last batch is 4 samples on "
                  "rank 0, 3 on rank 1",
       .broken =
           {.env = kDetail,
            .evidence = {{"", R"(rank 0: all_reduce\(SUM, torch\.float32, 4 elements, cpu\))"},
                         {"", R"(rank 1: all_reduce\(SUM, torch\.float32, 3 elements, cpu\))"}}},
       .cause = "a collective needs the same number of elements on every rank, and counts that "
                "come from the data differ. Unchecked (PyTorch without DETAIL), one rank ends "
                "with a wrong sum",
       .fix = "reduce a fixed-size summary ({sum, count}), or pad to one size first",
       .fixed = {.fixed = true,
                 .env = kDetail,
                 .evidence = {{"",
                               R"(summed tensor\(\[1\.7500, 7\.0000\], dtype=torch\.float64\))"}}}},

      {.name = "mismatched-dtype",
       .title = "ranks reduce tensors of different dtypes",
       .mistake = "rank 0 keeps its metric in float64, rank 1 in float32",
       .broken =
           {.env = kDetail,
            .evidence = {{"", R"(rank 0: all_reduce\(SUM, torch\.float64, 1 elements, cpu\))"},
                         {"", R"(rank 1: all_reduce\(SUM, torch\.float32, 1 elements, cpu\))"}}},
       .cause = "the ranks exchange raw bytes, and 8-byte and 4-byte numbers do not mix. "
                "Unchecked (PyTorch without DETAIL), a rank aborts",
       .fix = "create the tensor with an explicit dtype, the same on every rank",
       .fixed = {.fixed = true,
                 .env = kDetail,
                 .evidence = {{"", R"(correct predictions tensor\(\[181\.\]\))"}}}},

      {.name = "mismatched-op",
       .title = "ranks reduce with different ops",
       .mistake = "rank 0 asks for MAX (the worst loss, for its log), rank 1 for SUM",
       .broken =
           {.env = kDetail,
            .evidence = {{"", R"(rank 0: all_reduce\(MAX, torch\.float32, 1 elements, cpu\))"},
                         {"", R"(rank 1: all_reduce\(SUM, torch\.float32, 1 elements, cpu\))"}}},
       .cause = "each rank applies its own op: the ranks end with numbers nobody asked for. "
                "PyTorch does not notice, even with DETAIL; this library compares ops",
       .fix = "one op on every rank; for a second statistic, a second all_reduce on every rank",
       .fixed = {.fixed = true,
                 .env = kDetail,
                 .evidence = {{"", R"(summed loss tensor\(\[1\.5000\]\))"}}}},

      {.name = "skipped-barrier",
       .title = "a barrier that one rank skips",
       .mistake = "rank 1 has no validation shard and skips the barrier that ends validation",
       .broken =
           {.evidence = {{"",
                          R"(monitored_barrier #1 on rank 0: rank 1 did not arrive within 2 s)"}}},
       .cause = "rank 0 waits at a barrier that rank 1 never reaches; a plain barrier() only says "
                "that it timed out, monitored_barrier() names who is missing",
       .fix = "every rank reaches every barrier: put early exits after it, or let a rank with "
              "nothing to do loop zero times",
       .fixed = {.fixed = true, .evidence = {{"", R"(epoch loss tensor\(\[2\.\]\))"}}}},

      {.name = "crash",
       .title = "a rank crashes in the middle of training",
       .mistake = "rank 3, on machine B, is killed at step 3 (SIGKILL, as the out-of-memory "
                  "killer does)",
       .broken =
           {.launch = Launch::kTwoMachines,
            .evidence =
                {{"machine B",
                  R"(first failure: rank 3 was killed by signal 9 \(SIGKILL\); ddprun exits 137)"},
                 {"machine B",
                  R"(a SIGKILL that nobody sent by hand is often the kernel's out-of-memory killer)"},
                 {"machine A",
                  R"(a peer closed its connection \(it exited or crashed; look for its error above\))"}}},
       .cause = "the first failure is the cause, every other error its echo. Machine B's ddprun "
                "names it; machine A's ranks stop within seconds, because a group closes all its "
                "connections at its first error",
       .fix = "read the first failure's own lines (here: dmesg, then a smaller batch), fix that, "
              "and resume from the last checkpoint (chapter 09, --resume)",
       .fixed = {.launch = Launch::kTwoMachines,
                 .fixed = true,
                 .evidence = {{"machine A", R"(trained 5 steps)"}}}},

      {.name = "stopped-rank",
       .title = "a rank that stops answering",
       .mistake = "rank 1 is stopped at step 3 (SIGSTOP, as Ctrl-Z, a debugger or a frozen "
                  "machine does)",
       .broken =
           {.evidence =
                {{"",
                  R"(all_reduce #3 \(SUM, torch\.float32, 4 elements\) timed out after 5 s on rank 0)"},
                 {"",
                  R"(rank 1  stopped by ddprun \(SIGTERM\)   <- stopped before the first failure: likely cause)"},
                 {"", R"(hint: rank 1 had been stopped \(SIGSTOP\))"}}},
       .cause = "a stopped rank is alive and keeps its connections open, so nothing tells the "
                "others it is gone: they fail at --timeout, and one of them is the first failure. "
                "ddprun saw the stop and names the rank",
       .fix = "find what stopped it (a debugger, a shell's Ctrl-Z, memory pressure); keep "
              "--timeout short enough that a stuck job fails in minutes, not hours",
       .fixed = {.fixed = true, .evidence = {{"", R"(trained 5 steps)"}}}},

      {.name = "never-starts",
       .title = "a rank that never starts",
       .mistake = "machine B's ddprun is never started: ranks 2 and 3 of 4 do not exist",
       .broken = {.launch = Launch::kMachineAOnly,
                  .evidence = {{"machine A", R"(ranks 2, 3 of world_size 4 never joined)"}},
                  .worker = "train"},
       .cause = "init_process_group waits for all WORLD_SIZE ranks until the timeout, then names "
                "those that never came",
       .fix = "start every machine (the same --nnodes, --master-addr and --master-port, its own "
              "--node-rank), or lower --nnodes",
       .fixed = {.launch = Launch::kTwoMachines,
                 .evidence = {{"machine A", R"(trained 5 steps)"}},
                 .worker = "train"}},

      {.name = "busy-port",
       .title = "a port that is already taken",
       .mistake = "MASTER_PORT is a port that another process already listens on",
       .broken =
           {.launch = Launch::kPortTaken,
            .evidence = {{"",
                          R"(is already in use \(another job, or a process left over from one\))"}},
            .worker = "train"},
       .cause = "rank 0 cannot host the store on a port that is taken; exit code 2 says: change "
                "the configuration, not the code",
       .fix = "pick a free MASTER_PORT, or let `ddprun --standalone` choose one",
       .fixed = {.evidence = {{"", R"(trained 5 steps)"}}, .worker = "train"}},

      {.name = "no-set-epoch",
       .title = "a forgotten set_epoch",
       .mistake = "the training loop never calls sampler.set_epoch(epoch)",
       .broken =
           {.evidence =
                {{"",
                  R"(all 3 epochs read the same order: the sampler was never told the epoch)"}}},
       .cause = "DistributedSampler shuffles with seed + epoch; an epoch it is never told stays 0, "
                "so every epoch reads the same order. Nothing fails: the check in the code makes "
                "it loud",
       .fix = "call sampler.set_epoch(epoch) at the start of every epoch",
       .fixed = {.fixed = true, .evidence = {{"", R"(the order changes from epoch to epoch)"}}}},

      {.name = "same-seed",
       .title = "the same seed on every rank",
       .mistake = "every rank calls init_seeds(0) before drawing its augmentations",
       .broken = {.evidence = {{"", R"(ranks 0 and 1 drew the same augmentations)"}}},
       .cause = "one seed gives one random stream: every rank crops its images alike, and the job "
                "sees less variety than it pays for. Nothing fails: the check in the code makes "
                "it loud",
       .fix = "seed with seed + rank (chapter 06)",
       .fixed = {.fixed = true, .evidence = {{"", R"(every rank drew its own augmentations)"}}}},

      {.name = "rank-for-local-rank",
       .title = "RANK used where LOCAL_RANK belongs",
       .mistake = "`rank == 0` picks who prepares each machine's copy of the data set",
       .broken = {.launch = Launch::kTwoMachines,
                  .evidence =
                      {{"machine A", R"(prepared the data set on this machine)"},
                       {"machine B",
                        R"(nobody here prepared it\. Let LOCAL_RANK 0 of each machine prepare)"}}},
       .cause = "RANK is unique in the job, LOCAL_RANK on a machine: only machine A has a RANK 0, "
                "so machine B's disk never gets a copy (and cuda:RANK would be cuda:2 on a 2-GPU "
                "machine)",
       .fix = "LOCAL_RANK for what is per machine (local disk, GPU); RANK for what is once per job",
       .fixed = {.launch = Launch::kTwoMachines,
                 .fixed = true,
                 .evidence = {{"machine B", R"(prepared the data set on this machine)"},
                              {"machine A", R"(every rank read its machine's copy: 4000 bytes)"}}}},
  };
}
// --8<-- [end:cases]

// ---- Starting a job the way the case needs ---------------------------------------------------
constexpr std::chrono::seconds kJobDeadline{30};  // a job still running then counts as a hang

struct Paths {
  std::string ddprun, broken;
};

std::vector<ch10::MachineCommand> commands(const Paths& paths, const Case& c, const JobSpec& job,
                                           const fs::path& scratch, int port) {
  const std::string& worker_case = job.worker.empty() ? c.name : job.worker;
  std::vector<std::string> worker = {paths.broken, worker_case, "--timeout", "5"};
  if (job.fixed) worker.push_back("--fixed");
  // ddprun FLAGS ch10_broken CASE ...: one machine's command line.
  const auto ddprun = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), paths.ddprun);
    flags.insert(flags.end(), worker.begin(), worker.end());
    return flags;
  };
  const auto machine = [&](int node_rank, const std::string& name) {
    auto argv = ddprun({"--nnodes", "2", "--node-rank", std::to_string(node_rank),
                        "--nproc-per-node", "2", "--master-port", std::to_string(port)});
    // Each machine has a local disk of its own; here, a directory of its own.
    if (worker_case == "rank-for-local-rank") {
      argv.insert(argv.end(), {"--data-dir", (scratch / name).string()});
    }
    return ch10::MachineCommand{"machine " + name, argv};
  };
  switch (job.launch) {
    case Launch::kOneMachine:
      return {{"machine A", ddprun({"--standalone", "--nproc-per-node", "2"})}};
    case Launch::kPortTaken:
      return {
          {"machine A", ddprun({"--nproc-per-node", "2", "--master-port", std::to_string(port)})}};
    case Launch::kMachineAOnly:
      return {machine(0, "A")};
    case Launch::kTwoMachines:
      return {machine(0, "A"), machine(1, "B")};
  }
  return {};
}

// A path as a person would type it: relative to the current directory when inside it.
std::string shown(const std::string& word) {
  if (word.empty() || word[0] != '/') return word;
  const std::string relative = fs::proximate(word).string();
  return relative.rfind("..", 0) == 0 ? word : relative;
}

// Runs one job, prints what it shows on stdout, and returns what went wrong ("" if nothing).
std::string run_and_show(const Paths& paths, const Case& c, const JobSpec& job,
                         const std::string& label, bool expect_success) {
  const fs::path scratch =
      fs::temp_directory_path() / ("dist-ch10-" + std::to_string(getpid()) + "-" + c.name);
  fs::remove_all(scratch);
  std::optional<ch10::PortHolder> other_job;  // holds the port in the busy-port case
  if (job.launch == Launch::kPortTaken) other_job.emplace();
  const int port = other_job ? other_job->port() : ch10::free_port();
  const auto machines = commands(paths, c, job, scratch, port);

  for (const auto& m : machines) {
    std::string line = "+";
    for (const auto& [name, value] : job.env) line += " " + name + "=" + value;
    for (const auto& word : m.argv) line += " " + shown(word);
    dist::write_stderr(line + (machines.size() > 1 ? "    # " + m.name : "") + "\n");
  }
  const ch10::JobResult result = ch10::run_job(machines, job.env, kJobDeadline);
  fs::remove_all(scratch);
  dist::write_stderr("  (" + std::to_string(result.elapsed.count()).substr(0, 4) + " s)\n");
  if (result.timed_out) {
    return "the job did not end within " + std::to_string(kJobDeadline.count()) + " s";
  }

  std::string codes;
  bool all_zero = true;
  for (const auto& m : result.machines) {
    codes += std::string(codes.empty() ? "" : ", ") + (machines.size() > 1 ? m.name + " " : "") +
             "exit code " + std::to_string(m.exit_code);
    all_zero = all_zero && m.exit_code == 0;
  }
  dist::write_stdout(label + ": " + codes + ", ended by itself\n");
  std::string problem;
  if (all_zero != expect_success) {
    problem = expect_success ? "the fixed job failed" : "the job with the mistake succeeded";
  }
  for (const Evidence& e : job.evidence) {
    std::smatch match;
    bool found = false;
    for (const auto& m : result.machines) {
      if (!e.machine.empty() && m.name != e.machine) continue;
      if (std::regex_search(m.output, match, std::regex(e.pattern))) {
        dist::write_stdout("  " + (e.machine.empty() ? "" : e.machine + ": ") + match.str() + "\n");
        found = true;
        break;
      }
    }
    if (!found && problem.empty()) {
      problem = "expected /" + e.pattern + "/ in " +
                (e.machine.empty() ? "the job's" : e.machine + "'s") + " output";
    }
  }
  return problem;
}

// ---- One case: the mistake, what it did, why, the fix, and the fix at work ---------------------
bool run_case(const Paths& paths, const Case& c) {
  dist::write_stdout("== " + c.name + ": " + c.title + "\n");
  dist::write_stdout("mistake: " + c.mistake + "\n");
  std::string problem = run_and_show(paths, c, c.broken, "with the mistake", false);
  if (problem.empty()) {
    dist::write_stdout("cause: " + c.cause + "\n");
    dist::write_stdout("fix: " + c.fix + "\n");
    problem = run_and_show(paths, c, c.fixed, "with the fix", true);
  }
  if (!problem.empty()) {
    dist::write_stdout("FAILED: " + c.name + ": " + problem + "\n");
    return false;
  }
  dist::write_stdout("OK: " + c.name + " reproduced, diagnosed and fixed\n");
  return true;
}

const char* const kUsage =
    "usage: ch10_failure_modes [CASE...] [--list] [--help]\n"
    "Breaks a distributed job on purpose, one mistake per CASE (every case when none is named),\n"
    "and shows what the job says, the cause and the fix; then runs the fixed job. Each job is\n"
    "started with ddprun from this program's directory; its output goes to stderr, the verdict\n"
    "to stdout. Exit code 0 when every case failed as expected and its fix worked, 1 if not.\n"
    "  --list   the cases, one per line\n"
    "  --help   this text\n";

}  // namespace

int main(int argc, char** argv) {
  // Not a rank of a job: errors are this program's own, so no "[rank r/W]" prefix.
  try {
    const std::vector<Case> cases = all_cases();
    std::vector<const Case*> chosen;
    for (int i = 1; i < argc; ++i) {
      const std::string word = argv[i];
      if (word == "--help" || word == "-h") {
        std::string names;
        for (const Case& c : cases) names += "\n  " + c.name + ": " + c.title;
        dist::write_stdout(kUsage + ("CASE is one of:" + names) + "\n");
        return dist::kExitOk;
      }
      if (word == "--list") {
        for (const Case& c : cases) dist::write_stdout(c.name + "\t" + c.title + "\n");
        return dist::kExitOk;
      }
      const auto found =
          std::find_if(cases.begin(), cases.end(), [&](const Case& c) { return c.name == word; });
      if (found == cases.end()) {
        throw dist::ConfigError("no case called '" + word +
                                "': ch10_failure_modes --list names them");
      }
      chosen.push_back(&*found);
    }
    if (chosen.empty()) {
      for (const Case& c : cases) chosen.push_back(&c);
    }
    ch10::pass_stop_signals_to_jobs();
    const std::string bin = ch10::program_directory();
    const Paths paths{bin + "/ddprun", bin + "/ch10_broken"};
    int failed = 0;
    for (const Case* c : chosen) failed += run_case(paths, *c) ? 0 : 1;
    if (chosen.size() > 1) {
      dist::write_stdout(failed == 0 ? "OK: all " + std::to_string(chosen.size()) +
                                           " cases reproduced, diagnosed and fixed\n"
                                     : std::to_string(failed) + " of " +
                                           std::to_string(chosen.size()) + " cases failed\n");
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
