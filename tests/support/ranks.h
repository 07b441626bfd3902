// Test support: run a function as N real processes ("ranks") on this machine.
//
// run_ranks(4, body) forks four children; child r runs body(r) with its output captured and its
// exit code taken from the return value (or from the dist::Error it throws, as dist::run_main
// would). The parent waits for all of them, but never longer than the deadline: children still
// running then are killed and reported with exit code -1, so a test that would hang fails instead.
//
// run_group(3, {.timeout = 30s}, body) is the prologue of most multiprocess tests on top of it:
// three ranks started as ddprun would start them, each joined to the default process group
// before body(rank) runs, and the group left again when the body returns.
//
// fork() is safe here because the parent (the GoogleTest runner) has no threads of its own.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dist/init.h"

namespace dist::testing {

struct RankResult {
  int exit_code = -1;  // -1: killed at the deadline
  std::string output;  // the child's stdout and stderr, interleaved
};

std::vector<RankResult> run_ranks(int world_size, const std::function<int(int rank)>& body,
                                  std::chrono::seconds deadline = std::chrono::seconds(120));

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();

// A socket listening on 127.0.0.1 at a port the kernel picked: "another program" holding a port.
struct Listener {
  int fd;
  int port;
};
Listener listen_on_loopback();

// Sets (or, for "", unsets) environment variables in this process.
void set_env(const std::map<std::string, std::string>& vars);

// Unsets every launcher's variables (launcher_variables.h): nothing of the machine's
// environment, or of another test, says who this process is.
void clear_launcher_env();

// Clears the launchers' variables, then sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE
// (all ranks on one machine), MASTER_ADDR=127.0.0.1 and MASTER_PORT, as ddprun would.
void set_launcher_env(int rank, int world_size, int port);

// How run_group starts its ranks, beyond the options of init_process_group.
struct GroupRun {
  int port = 0;  // MASTER_PORT; 0: a free one
  // Set after the launcher's variables, e.g. {{"DIST_DEBUG", "DETAIL"}}.
  std::map<std::string, std::string> env;
  std::chrono::seconds deadline = std::chrono::seconds(120);  // as for run_ranks
};

// Runs world_size ranks. Each sets the launcher's variables (set_launcher_env, then run.env),
// calls dist::init_process_group(options), then body(rank); once the body returns, the group
// is destroyed if it is still there. A rank whose init or body throws exits as run_ranks says.
std::vector<RankResult> run_group(int world_size, const dist::InitOptions& options,
                                  const std::function<int(int rank)>& body,
                                  const GroupRun& run = {});

// Every rank exited 0; if not, the failure shows what every rank printed.
void expect_all_ok(const std::vector<RankResult>& results);

// True if `part` occurs in `text`: how tests look for a line or a phrase in captured output.
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// All outputs, each headed by its rank, for failure messages.
std::string describe(const std::vector<RankResult>& results);

}  // namespace dist::testing
