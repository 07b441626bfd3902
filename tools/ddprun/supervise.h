// Supervising the ranks: wait for them, and stop them all on the first failure or on a signal.
#pragma once

#include <signal.h>

#include <chrono>
#include <functional>
#include <map>
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

// Starts the ranks of one attempt (0, then 1 after the first restart, ...): start_ranks with the
// attempt's variables and log folders.
using StartAttempt = std::function<Launch(int attempt)>;

// Owns the ranks of every attempt until each of them, and everything they started, has exited
// and been reaped. When a rank fails it stops the others, and with restarts left
// (--max-restarts) starts a new attempt of every rank.
//
// Restarts on several machines hook in here (agents.h): the supervision loop sleeps in poll() on
// a signalfd and on every fd given to watch_fd, so a connection to the other machines' ddprun can
// wake it, and its callback can end the attempt (end_attempt: "node 1 failed, restart"). The
// callback of StartAttempt can wait for the other machines before it starts the ranks, so that
// every machine starts the same attempt.
class Supervisor {
 public:
  Supervisor(StartAttempt start, double grace_period_s, int max_restarts);

  // Stops every running rank: `signal` now, SIGKILL to those left after the grace period.
  // `exit_code` becomes ddprun's unless a restart follows, and `why` ("first failure: rank 2
  // exited with code 3") the summary's last line, with "; ddprun exits N" added.
  void stop_all(int signal, int exit_code, std::string why);

  // Ends the current attempt as a failed rank would, for a reason outside this machine (`reason`,
  // "node 1 failed"): every rank is stopped (SIGTERM, SIGKILL after the grace period), then a new
  // attempt starts if restarts are left; otherwise ddprun exits `exit_code`. Does nothing while
  // the attempt is already being stopped. Call it from a watch_fd callback.
  void end_attempt(const std::string& reason, int exit_code);

  // Calls `on_ready` from the supervision loop whenever `fd` is readable, or hung up (poll's
  // POLLIN, POLLHUP, POLLERR), until unwatch_fd. The callback runs between the loop's other work,
  // never from a signal handler, and may call end_attempt or stop_all.
  void watch_fd(int fd, std::function<void()> on_ready);
  void unwatch_fd(int fd);

  // The attempt running now: TORCHELASTIC_RESTART_COUNT of its ranks.
  int attempt() const { return attempt_; }

  // How the last attempt that ended ended: "first failure: rank 2 exited with code 3" and the
  // exit code it gave; during the start of a restart, the attempt before. The other machines
  // learn it through the agents' rendezvous (agents.h).
  const std::string& ended_why() const { return ended_why_; }
  int ended_exit_code() const { return ended_exit_code_; }
  // Each rank's wait status (rank -> status, as waitpid gives it) in the attempt that ended
  // last: what the flight summary says of a rank that left no record.
  const std::map<int, int>& ended_exits() const { return ended_exits_; }
  // True once a signal to ddprun (SIGINT, SIGTERM, SIGHUP) has stopped the job.
  bool interrupted() const { return interrupted_; }

  // Called before ddprun reports a failure, and before the summary (with true: every rank has
  // exited), so that the ranks' own last lines, when ddprun copies them (--tee), come first.
  void before_reports(std::function<void(bool ranks_done)> hook) {
    before_report_ = std::move(hook);
  }

  // Starts attempt 0, and waits until every rank has exited, and everything the ranks started
  // too (adopt_orphans), stopping the rest at the first failure or at SIGINT, SIGTERM or SIGHUP;
  // what a rank leaves behind when it exits gets SIGTERM, and SIGKILL after the grace period.
  // After a failure, starts the next attempt while restarts are left; a signal to ddprun, or
  // ranks that cannot be started, end the job without one. Returns ddprun's exit code: the last
  // attempt's.
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

  struct Watched {
    int fd;
    std::function<void()> on_ready;
  };

  void start_attempt();
  void supervise_attempt();
  bool restart_wanted() const;
  void wait_for_events();
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

  StartAttempt start_;
  int max_restarts_;
  int attempt_ = 0;
  bool interrupted_ = false;          // a signal to ddprun: no restart
  bool cannot_start_ = false;         // the ranks could not be started: no restart
  std::vector<std::string> history_;  // one line per attempt that ended and was restarted
  std::vector<Watched> watched_;
  std::vector<Tracked> ranks_;
  std::function<void(bool)> before_report_ = [](bool) {};
  double grace_period_s_;
  bool stopping_ = false;
  bool failed_attempt_ = false;  // a rank failed, or end_attempt: a restart may follow
  bool killed_ = false;          // SIGKILL has been sent: nothing is left to escalate
  std::optional<Clock::time_point> deadline_;  // of the grace period: then SIGKILL
  int signals_ = -1;                           // the signalfd of the watched signals
  bool children_left_ = false;                 // ddprun still has a child (a rank, or an orphan)
  bool leftovers_noted_ = false;
  int exit_code_ = 0;
  int first_failure_ = -1;    // index into ranks_
  std::string why_ended_;     // the summary's last line, without "; ddprun exits N"
  std::string stopped_note_;  // at the first failure: the ranks that were stopped then
  std::string ended_why_;     // ended_why()
  int ended_exit_code_ = 0;
  std::map<int, int> ended_exits_;
};

}  // namespace ddprun
