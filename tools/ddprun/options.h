// ddprun's command line: torchrun's flag spellings, strict values, and a hint for every mistake.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun {

// Bad usage or configuration, the project-wide convention: a bad flag, or a PROGRAM that
// cannot be run.
constexpr int kExitUsage = 2;

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
  std::vector<std::string> program;  // PROGRAM, then its own arguments
  std::string store_token;           // DIST_STORE_TOKEN to give the ranks; empty: leave it as it is
};

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
