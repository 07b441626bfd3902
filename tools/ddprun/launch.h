// Starting the ranks: one process per local rank, each with torchrun's variables.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "logs.h"
#include "options.h"

namespace ddprun {

// ddprun itself could not start the ranks (no process could be made, no free port).
constexpr int kExitCannotStart = 1;

// One started rank, as the summary names it.
struct RankProcess {
  int rank = 0;        // global: node_rank * nproc_per_node + local_rank
  int local_rank = 0;  // index on this machine
  pid_t pid = -1;
};

// What start_ranks managed. When `error` is set, the ranks in `started` are already running
// and must be stopped; `exit_code` is what ddprun should exit with, without a restart: ranks that
// could not start (PROGRAM cannot be run, no processes left) would fail the same way again.
struct Launch {
  std::vector<RankProcess> started;
  std::string error;
  std::string hint;
  int exit_code = 0;
};

// Asks the kernel for a free TCP port on 127.0.0.1 (for --standalone). Throws std::system_error.
int pick_free_port();

// 32 hex digits from the kernel's random source: the job's DIST_STORE_TOKEN.
std::string new_store_token();

// The Python that runs a script or module (Options::Runs): $PYTHON_EXEC when set and not empty,
// as torchrun honours it; otherwise "python3", looked up on PATH when the ranks start. torchrun
// uses its own interpreter (sys.executable), the Python it was started with; ddprun is not
// Python, and python3 on PATH is the one `python3 -m torch.distributed.run` would use: on Debian
// 12 without a virtual environment, /usr/bin/python3, the one that has Debian's python3-torch.
std::string python_interpreter();

// The command line of one rank: PROGRAM and ARGS as Options::runs says, and with
// --local-rank-arg the local rank right after the script, module or program.
std::vector<std::string> rank_command(const Options& options, int local_rank);

// True when ddprun sets OMP_NUM_THREADS=1 for the ranks (torchrun's rule).
bool sets_omp_num_threads(const Options& options);

// Starts the ranks of this node in order of local rank and stops at the first that cannot
// start. Each child gets `child_mask` as its signal mask (ddprun's mask before it blocked the
// signals it waits for), and its log files from `logs` as stdout and stderr where asked.
// `attempt` is TORCHELASTIC_RESTART_COUNT: 0, then 1 after the first restart, and so on.
Launch start_ranks(const Options& options, const sigset_t& child_mask, RankLogs& logs, int attempt);

}  // namespace ddprun
