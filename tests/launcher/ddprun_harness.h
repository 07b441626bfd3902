// What every ddprun test uses: the real ddprun binary (DDPRUN_PATH) run in a process group of its
// own with a deadline, its output collected, and the probe lines of probe_worker (PROBE_PATH) read
// back. The tests are split by the ddprun unit they test: ddprun_launch_test (what every rank is
// told), ddprun_supervise_test (one failure or one signal stops everyone), ddprun_hygiene_test
// (nothing of a job is left behind), ddprun_options_test (the command line and --help),
// ddprun_logs_test (--log-dir, --redirects, --tee) and ddprun_restarts_test (--max-restarts).
//
// The tests must never hang, whatever ddprun does: each ddprun runs in its own process group,
// with a deadline, and at the deadline that group is killed (ddprun; its ranks, each in a group
// of its own, die with it by PR_SET_PDEATHSIG) and the test fails. The tests of "nothing left
// behind" find every process of a job by a marker in its environment, and kill what they find. A
// stop within 5 s is what ddprun promises, so that bound is asserted.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ddprun_test {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

inline constexpr auto kDeadline =
    20s;  // no run in these tests comes near it unless ddprun is broken
inline constexpr double kStopLimitS = 5.0;   // a failure or a signal stops every rank within this
inline constexpr double kUsageLimitS = 2.0;  // a bad command line fails at once: nothing is started

// What one ddprun run left behind.
struct Result {
  int exit_code = -1;  // -1: ddprun did not exit by itself
  std::string out;
  std::string err;
  double seconds = 0;  // from the start, or from the first signal the test sent, to the exit
};

// One ddprun process, its output collected as it arrives. `env` entries ("NAME=value") are added
// to the test's environment, less OMP_NUM_THREADS (so ddprun's notice about it is predictable).
class Ddprun {
 public:
  explicit Ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
  Ddprun(const Ddprun&) = delete;
  Ddprun& operator=(const Ddprun&) = delete;
  // A test that stops early (a failed ASSERT) still leaves no process behind.
  ~Ddprun();

  // Reads until `n` probe lines have appeared on stdout: every rank has started and printed.
  bool wait_for_ranks(int n);
  bool wait_for_stderr(const std::string& text);

  // To ddprun alone, as `kill PID` would. The first one starts the clock of Result::seconds.
  void send(int signal);

  // Reads to end-of-file on both pipes, then reaps ddprun. Reading first matters: a rank that
  // outlives ddprun keeps the pipes open, and is caught at the deadline.
  Result finish();

 private:
  bool wait_until(const std::function<bool()>& ready);
  void read_some(Clock::time_point deadline);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  Clock::time_point started_;
  bool signalled_ = false;
  bool reaped_ = false;
};

Result run_ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env = {});

// Starts ddprun, waits until `nproc` ranks have printed a line, sends `signal` to ddprun and
// returns what it left (a failure, and an empty Result, if the ranks never printed).
Result run_and_signal(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      int nproc, int signal);

// One probe_worker line: "probe: PID=.. RANK=.. ... argv=ARGS".
struct Probe {
  std::map<std::string, std::string> vars;
  std::string argv;
  const std::string& operator[](const std::string& name) const { return vars.at(name); }
};

// The probe lines in `out`, in order of RANK.
std::vector<Probe> probes_in(const std::string& out);

bool contains(const std::string& text, const std::string& part);
int count_of(const std::string& text, const std::string& part);

// No rank may outlive ddprun: each pid a probe printed must be gone once ddprun has exited.
void expect_every_probe_gone(const std::string& out);

// ---- No process of the job is left behind, grandchildren included

// The processes whose environment holds `entry` ("NAME=value"), found in /proc: ddprun passes its
// environment on to the ranks, and they to their children, so a marker given to ddprun finds
// every process of that one job, even one that moved to a session of its own.
std::vector<pid_t> processes_with(const std::string& entry);

// A marker of its own for every job of a test: "DDPRUN_TEST_JOB=<pid>_<n>".
std::string new_job_marker();

// Once ddprun has exited, nothing of its job may still run; what does is reported, and killed so
// that the test leaves nothing behind either.
void expect_nothing_of_the_job_left(const std::string& marker);

// The shape most of those tests share: `job` runs once for each of 1, 2 and 4 ranks, with a
// marker of its own, and after each run nothing of that job may be left.
void at_1_2_and_4_ranks(const std::function<void(int nproc, const std::string& marker)>& job);

// ---- Files

// A new folder for one test's files, under TMPDIR (or /tmp), removed with everything in it.
class TempFolder {
 public:
  TempFolder();
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The entries of `folder`, by name, sorted.
std::vector<std::string> entries_of(const std::string& folder);

// The whole file (a failure if it cannot be read).
std::string read_file(const std::string& path);

}  // namespace ddprun_test
