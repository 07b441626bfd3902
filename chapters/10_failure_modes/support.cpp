// Chapter 10's driver support (see support.h): a case's job started the way it needs, its
// output checked against the case's evidence, and the command line.
#include "support.h"

#include <dist/check.h>
#include <dist/log.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

#include "jobs.h"

namespace ch10 {
namespace {

namespace fs = std::filesystem;

constexpr std::chrono::seconds kJobDeadline{30};  // a job still running then counts as a hang

// ddprun and ch10_broken: beside this program, where CMake puts them.
struct Paths {
  std::string ddprun, broken;
};

const Paths& paths() {
  static const Paths found{program_directory() + "/ddprun", program_directory() + "/ch10_broken"};
  return found;
}

// Each machine's ddprun command line for `job`.
std::vector<MachineCommand> commands(const Case& c, const JobSpec& job, const fs::path& scratch,
                                     int port) {
  const std::string& worker_case = job.worker.empty() ? c.name : job.worker;
  std::vector<std::string> worker = {paths().broken, worker_case, "--timeout",
                                     std::to_string(job.timeout_s)};
  if (job.fixed) worker.push_back("--fixed");
  // ddprun FLAGS ch10_broken CASE ...: one machine's command line.
  const auto ddprun = [&](std::vector<std::string> flags) {
    flags.insert(flags.begin(), paths().ddprun);
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
    return MachineCommand{"machine " + name, argv};
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

const char* const kUsage =
    "usage: ch10_failure_modes [CASE...] [--list] [--help]\n"
    "Breaks a distributed job on purpose, one mistake per CASE (every case when none is named),\n"
    "and shows what the job says, the cause and the fix; then runs the fixed job. Each job is\n"
    "started with ddprun from this program's directory; its output goes to stderr, the verdict\n"
    "to stdout. Exit code 0 when every case failed as expected and its fix worked, 1 if not.\n"
    "  --list   the cases, one per line\n"
    "  --help   this text\n";

}  // namespace

std::string run_and_show(const Case& c, const JobSpec& job, const std::string& label,
                         bool expect_success) {
  const fs::path scratch =
      fs::temp_directory_path() / ("dist-ch10-" + std::to_string(getpid()) + "-" + c.name);
  fs::remove_all(scratch);
  std::optional<PortHolder> other_job;  // holds the port in the busy-port case
  if (job.launch == Launch::kPortTaken) other_job.emplace();
  const int port = other_job ? other_job->port() : free_port();
  const auto machines = commands(c, job, scratch, port);

  for (const auto& m : machines) {
    std::string line = "+";
    for (const auto& [name, value] : job.env) line += " " + name + "=" + value;
    for (const auto& word : m.argv) line += " " + shown(word);
    dist::write_stderr(line + (machines.size() > 1 ? "    # " + m.name : "") + "\n");
  }
  // The ranks' flight records (ddprun reads them after a failure) go to the scratch folder, so
  // that no run leaves a folder behind in /tmp.
  Env env = job.env;
  env.emplace_back("DIST_TRACE_DIR", (scratch / "flight").string());
  const JobResult result = run_job(machines, env, kJobDeadline);
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
    const bool found =
        std::any_of(result.machines.begin(), result.machines.end(), [&](const MachineResult& m) {
          return (e.machine.empty() || m.name == e.machine) &&
                 m.output.find(e.text) != std::string::npos;
        });
    if (found) {
      dist::write_stdout("  " + (e.machine.empty() ? "" : e.machine + ": ") + e.text + "\n");
    } else if (problem.empty()) {
      problem = "expected '" + e.text + "' in " +
                (e.machine.empty() ? "the job's" : e.machine + "'s") + " output";
    }
  }
  return problem;
}

std::optional<std::vector<const Case*>> choose_cases(const std::vector<Case>& cases, int argc,
                                                     char** argv) {
  std::vector<const Case*> chosen;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--help" || word == "-h") {
      std::string names;
      for (const Case& c : cases) names += "\n  " + c.name + ": " + c.title;
      dist::write_stdout(kUsage + ("CASE is one of:" + names) + "\n");
      return std::nullopt;
    }
    if (word == "--list") {
      for (const Case& c : cases) dist::write_stdout(c.name + "\t" + c.title + "\n");
      return std::nullopt;
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
  return chosen;
}

bool run_case(const Case& c) {
  dist::write_stdout("== " + c.name + ": " + c.title + "\n");
  dist::write_stdout("mistake: " + c.mistake + "\n");
  std::string problem = ch10::run_and_show(c, c.broken, "with the mistake", false);
  if (problem.empty()) {
    dist::write_stdout("cause: " + c.cause + "\n");
    dist::write_stdout("fix: " + c.fix + "\n");
    problem = ch10::run_and_show(c, c.fixed, "with the fix", true);
  }
  if (!problem.empty()) {
    dist::write_stdout("FAILED: " + c.name + ": " + problem + "\n");
    return false;
  }
  dist::write_stdout("OK: " + c.name + " reproduced, diagnosed and fixed\n");
  return true;
}

}  // namespace ch10
