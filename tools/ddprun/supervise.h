// Supervising the ranks: wait for them, and stop them all on the first failure or on a signal.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launch.h"

namespace ddprun {

// The signals ddprun waits for, and the mask it had before it blocked them.
struct SignalMasks {
  sigset_t watched;   // SIGCHLD, SIGINT, SIGTERM, SIGHUP
  sigset_t original;  // what the ranks get back before exec
};

// Blocks the watched signals (and SIGPIPE, which is not waited for) from now on. Blocked, a signal
// stays pending instead of being lost (a rank that exits, or a Ctrl-C, while other ranks are still
// starting), and the supervision loop takes them one at a time with sigtimedwait: no handler ever
// runs at an awkward moment.
SignalMasks block_watched_signals();

// Makes ddprun the child subreaper of everything it starts (Linux): a process whose parent dies
// is handed to ddprun instead of init, so that nothing a rank starts can outlive the job
// unnoticed. Call it before the first rank starts.
void adopt_orphans();

// Owns the started ranks until every one of them has exited and been reaped.
class Supervisor {
 public:
  Supervisor(std::vector<RankProcess> ranks, double grace_period_s);

  // Stops every running rank: `signal` now, SIGKILL to those left after the grace period.
  // `exit_code` becomes ddprun's, and `conclusion` the last line of the summary.
  void stop_all(int signal, int exit_code, std::string conclusion);

  // Called before ddprun reports a failure, and before the summary (with true: every rank has
  // exited), so that the ranks' own last lines, when ddprun copies them (--tee), come first.
  void before_reports(std::function<void(bool ranks_done)> hook) {
    before_report_ = std::move(hook);
  }

  // Waits until every rank has exited, and everything the ranks started too (adopt_orphans),
  // stopping the rest at the first failure or at SIGINT, SIGTERM or SIGHUP; what a rank leaves
  // behind when it exits gets SIGTERM, and SIGKILL after the grace period. Returns ddprun's exit
  // code.
  int run(const sigset_t& watched);

 private:
  using Clock = std::chrono::steady_clock;

  struct Tracked {
    RankProcess process;
    bool running = true;
    int status = 0;         // from waitpid, once it has exited
    std::vector<int> sent;  // signals from ddprun: "stopped by ddprun" is not a crash
    // Set while the rank is stopped (SIGSTOP, SIGTSTP, a debugger): it neither runs nor exits,
    // and the other ranks time out waiting for it in their next collective.
    int stop_signal = 0;
    Clock::time_point stopped_at;
    bool stopped_at_first_failure = false;
  };

  int running_count() const;
  Clock::duration grace_period() const;
  void signal_running(int signal);
  void signal_leftovers(int signal);
  void note_leftovers();
  void reap_exited();
  void on_first_failure(int index);
  std::string note_stopped_ranks();
  void on_stop_signal(int signal);
  void kill_survivors();
  std::optional<Clock::duration> time_until_kill() const;
  std::string outcome(int index) const;
  void print_summary() const;

  std::vector<Tracked> ranks_;
  std::function<void(bool)> before_report_ = [](bool) {};
  double grace_period_s_;
  bool stopping_ = false;
  bool killed_ = false;                        // SIGKILL has been sent: nothing is left to escalate
  std::optional<Clock::time_point> deadline_;  // of the grace period: then SIGKILL
  int signals_ = -1;                           // the signalfd of the watched signals
  bool children_left_ = false;                 // ddprun still has a child (a rank, or an orphan)
  bool leftovers_noted_ = false;
  int exit_code_ = 0;
  int first_failure_ = -1;  // index into ranks_
  std::string conclusion_;
  std::string stopped_note_;  // at the first failure: the ranks that were stopped then
};

}  // namespace ddprun
