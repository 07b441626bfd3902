// Chapter 10's driver, the part that is not the lesson: the shape of a case in main.cpp's table,
// starting a case's job the way it needs (one machine, two, one left out, a port taken), and
// checking what the job printed against the case's evidence. jobs.h starts the processes.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ch10 {

using Env = std::vector<std::pair<std::string, std::string>>;

// How the driver starts a job: what a person would type in one or two terminals.
enum class Launch {
  kOneMachine,    // ddprun --standalone: one machine, a free port
  kTwoMachines,   // two ddprun, machine A (ranks 0-1) and machine B (ranks 2-3), one master
  kMachineAOnly,  // the same, but machine B's ddprun never starts
  kPortTaken,     // one machine, MASTER_PORT already held by another process
};

// A piece of one line that the job must print: in any machine's output, or in `machine`'s
// ("machine A", "machine B"). The driver shows each piece it found as the evidence.
struct Evidence {
  std::string text;
  std::string machine;
};

// One run of ch10_broken and what it must print.
struct JobSpec {
  Launch launch = Launch::kOneMachine;
  bool fixed = false;  // ch10_broken --fixed
  Env env;             // added to the job's environment (DIST_DEBUG=DETAIL)
  std::vector<Evidence> evidence;
  std::string worker;  // ch10_broken's case, when it is not the driver's case's name
  int timeout_s = 5;   // ch10_broken --timeout
};

// One mistake: the job with it, why it failed, the fix, and the job with the fix.
struct Case {
  std::string name, title, mistake;
  JobSpec broken;
  std::string cause, fix;
  JobSpec fixed;
};

// Runs one job of case `c` with a deadline (kJobDeadline), echoing its output to stderr after
// the command that started it; prints "LABEL: exit code N, ended by itself" and each piece of
// evidence found on stdout. Returns what went wrong ("" if nothing): the job did not end, its
// exit codes were not all 0 (expect_success) or all 0 (!expect_success), or evidence is missing.
std::string run_and_show(const Case& c, const JobSpec& job, const std::string& label,
                         bool expect_success);

// One case: prints its name, the mistake, what the job with it did, the cause and the fix, then
// runs the fixed job; "OK: NAME reproduced, diagnosed and fixed", or "FAILED: NAME: why". Returns
// whether it went as the case says.
bool run_case(const Case& c);

// The command line: the cases it names (every case when it names none), or nothing after --help
// or --list, which it answers on stdout. Throws dist::ConfigError for a name that is no case.
std::optional<std::vector<const Case*>> choose_cases(const std::vector<Case>& cases, int argc,
                                                     char** argv);

}  // namespace ch10
