// ddprun's command line: torchrun's flag spellings, strict values, and a hint for every mistake.
#pragma once

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun {

// Bad usage or configuration, the project-wide convention: a bad flag, or a PROGRAM that
// cannot be run.
constexpr int kExitUsage = 2;

// Which of a rank's streams go to a log file: torchrun's values (torch.distributed.elastic.
// multiprocessing.Std): 0 none, 1 stdout, 2 stderr, 3 both. A bit mask, so 3 = 1 | 2.
enum Std : int { kStdNone = 0, kStdOut = 1, kStdErr = 2, kStdAll = 3 };

// A --redirects or --tee value: one Std for every local rank ("3"), or one per local rank
// ("0:1,1:2"; a local rank not named gets 0), as torchrun reads it.
struct StdSetting {
  int all = kStdNone;
  std::map<int, int> by_local_rank;  // non-empty: the per-rank form
  int for_local_rank(int local_rank) const {
    if (by_local_rank.empty()) return all;
    const auto it = by_local_rank.find(local_rank);
    return it == by_local_rank.end() ? kStdNone : it->second;
  }
};

// Everything the command line decides. The defaults are torchrun's.
struct Options {
  enum class Action { kRun, kHelp, kVersion };
  Action action = Action::kRun;
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  bool standalone = false;
  // --local-rank-arg: also pass the local rank as an argument, right after PROGRAM, where
  // torch.distributed.launch puts it: "--local-rank=N" as torch 2.x spells it, or
  // "--local_rank=N" as torch 1.x did. torchrun passes none (kNone, ddprun's default).
  enum class LocalRankArg { kNone, kDash, kUnderscore };
  LocalRankArg local_rank_arg = LocalRankArg::kNone;
  double grace_period_s = 3.0;
  // --max-restarts: when a rank fails, stop every rank of this machine and start them all again,
  // up to this many times (torchrun's flag and default).
  int max_restarts = 0;
  // --monitor-interval: torchrun's agent sleeps this long between looks at its workers. ddprun
  // does not look: the kernel wakes it when a rank exits (SIGCHLD). It is the interval at which
  // the machines of a job check on each other, for restarts on several machines.
  double monitor_interval_s = 5.0;
  // --log-dir, --redirects, --tee (logs.h). An empty log_dir with redirects or tee: a fresh
  // folder under $TMPDIR, as torchrun makes one.
  std::string log_dir;
  StdSetting redirects;
  StdSetting tee;
  // The agents' rendezvous (agents.h), on several machines with restarts: node 0's ddprun
  // hosts it at --agent-port (0: MASTER_PORT + 1); --join-timeout bounds the wait for every
  // node at each attempt, --exit-barrier-timeout the wait for every node to finish.
  int agent_port = 0;
  double join_timeout_s = 60;
  double exit_barrier_timeout_s = 300;  // torchrun's exit_barrier_timeout
  std::vector<std::string> program;     // PROGRAM, then its own arguments
  // How PROGRAM runs, as torchrun decides it (torch/distributed/run.py, config_from_args), with
  // one difference: torchrun gives every PROGRAM to Python unless --no-python; ddprun gives it
  // only a PROGRAM whose name ends in ".py", so that compiled programs run as they are.
  //   kAsIs:   PROGRAM ARGS                       (a compiled program, or --no-python)
  //   kScript: PYTHON -u PROGRAM ARGS             (PROGRAM ends in ".py")
  //   kModule: PYTHON -u -m PROGRAM ARGS          (-m/--module)
  // PYTHON is $PYTHON_EXEC, or python3 looked up on PATH (launch.h).
  enum class Runs { kAsIs, kScript, kModule };
  Runs runs = Runs::kAsIs;
  std::string store_token;  // DIST_STORE_TOKEN to give the ranks; empty: leave it as it is
};

// True when `program` names a Python script by its name: it ends in ".py".
bool is_python_script(const std::string& program);

// A command line ddprun refuses. what() names the flag and the value; hint() says what to do.
class UsageError : public std::runtime_error {
 public:
  UsageError(const std::string& message, std::string hint)
      : std::runtime_error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

// Reads argv. Options end at the first argument that is not one (PROGRAM) or at "--".
// Throws UsageError.
Options parse_options(int argc, char** argv);

// The full --help text: every flag, every variable a rank gets, what happens on failure.
std::string help_text();

}  // namespace ddprun
