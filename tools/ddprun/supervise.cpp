// Supervising the ranks (supervise.h).
//
// The loop sleeps in poll() until something happens: a rank exits (SIGCHLD, read from a
// signalfd), someone asks ddprun to stop (SIGINT, SIGTERM, SIGHUP), or the grace period of a stop
// runs out. It never polls on a timer. The first rank to fail decides ddprun's exit code;
// everything after that is cleaning up, and the summary says which rank ended how.
//
// Process hygiene. Each rank is the leader of its own session and process group (launch.cpp), so
// every signal ddprun sends a rank goes to the whole group, kill(-pgid): the rank's own children
// (a shell's sleep, a data loader's workers) go with it. A group id is only safe to signal while
// the leader has not been reaped: after that the number may be handed to an unrelated process
// (pid_max is often 32768). So ddprun first looks at an exited rank without reaping it (waitid
// with WNOWAIT), sends what is left of its group SIGTERM while the zombie still holds the number,
// and only then reaps it. ddprun is also a child subreaper (PR_SET_CHILD_SUBREAPER): whatever a
// rank leaves behind, even in a session of its own, becomes ddprun's child when its parent dies,
// instead of init's. So "ddprun has no children left" is exactly "nothing of the job is running",
// and ddprun exits only then: SIGTERM to the leftovers, SIGKILL after the grace period.
#include "supervise.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "report.h"

namespace ddprun {
namespace {

bool failed(int status) {
  return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

// The shell's convention: a process killed by signal N "exits" 128+N.
int exit_code_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string how_it_ended(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  const int signal = WTERMSIG(status);
  return "was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
}

// What a learner should look at next, for the deaths that do not explain themselves.
std::string failure_hint(int status) {
  if (WIFEXITED(status)) return "";
  switch (WTERMSIG(status)) {
    case SIGKILL:
      return "a SIGKILL that nobody sent by hand is often the kernel's out-of-memory killer "
             "(see dmesg)";
    case SIGSEGV:
    case SIGBUS:
    case SIGABRT:
      return "the rank crashed: its own output above, or a run built with the asan preset, "
             "says where";
    default:
      return "";
  }
}

std::string stopping_the_others(int others) {
  if (others == 0) return "; no other rank is running";
  if (others == 1) return "; stopping the other rank";
  return "; stopping the other " + std::to_string(others) + " ranks";
}

std::string processes_text(int n) {
  return std::to_string(n) + (n == 1 ? " process" : " processes");
}

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

// Every child of ddprun that has not been reaped: the ranks still running, and what the ranks
// left behind (ddprun adopts it, being their subreaper). Not yet reaped, none of these pids can
// belong to anyone else, so they are safe to signal. Read from /proc/self/task/*/children, per
// thread: an orphan is handed to any thread of ddprun.
std::vector<pid_t> children_of_ddprun() {
  std::vector<pid_t> pids;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream children(task.path() / "children");
    for (pid_t pid = 0; children >> pid;) pids.push_back(pid);
  }
  return pids;
}

// Never called while SIGCHLD is blocked, and that is all of ddprun's life; it exists so that
// SIGCHLD is not ignored. An ignored SIGCHLD (which ddprun could inherit) makes the kernel reap
// exited children itself, so waitpid could no longer report their exit codes; and POSIX leaves
// it open whether a blocked signal that is ignored stays pending at all.
void on_sigchld(int) {}

}  // namespace

SignalMasks block_watched_signals() {
  struct sigaction action {};
  action.sa_handler = on_sigchld;
  sigemptyset(&action.sa_mask);
  // No SA_NOCLDSTOP: a rank that is stopped (Ctrl-Z, SIGSTOP, a debugger) is news too. It has
  // not ended, but the other ranks will time out waiting for it, and the summary says so.
  action.sa_flags = 0;
  sigaction(SIGCHLD, &action, nullptr);

  SignalMasks masks{};
  sigemptyset(&masks.watched);
  for (const int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&masks.watched, signal);
  // SIGPIPE is blocked too, but not waited for: a write to a closed stdout or stderr (ddprun ...
  // | head) then fails with EPIPE instead of killing ddprun, which would kill every rank. The
  // ranks get the original mask back, so their own SIGPIPE works as usual.
  sigset_t blocked = masks.watched;
  sigaddset(&blocked, SIGPIPE);
  sigprocmask(SIG_BLOCK, &blocked, &masks.original);
  return masks;
}

void adopt_orphans() {
#ifdef __linux__
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
#endif
}

Supervisor::Supervisor(StartAttempt start, double grace_period_s, int max_restarts)
    : start_(std::move(start)), max_restarts_(max_restarts), grace_period_s_(grace_period_s) {}

void Supervisor::stop_all(int signal, int exit_code, std::string why) {
  stopping_ = true;
  exit_code_ = exit_code;
  why_ended_ = std::move(why);
  signal_running(signal);
  deadline_ = Clock::now() + grace_period();
}

void Supervisor::end_attempt(const std::string& reason, int exit_code) {
  if (stopping_) return;
  failed_attempt_ = true;
  before_report_(false);
  say(reason + "; stopping the " + count_of(running_count(), "running rank"));
  stop_all(SIGTERM, exit_code, reason);
}

void Supervisor::watch_fd(int fd, std::function<void()> on_ready) {
  watched_.push_back({fd, std::move(on_ready)});
}

void Supervisor::unwatch_fd(int fd) {
  std::erase_if(watched_, [fd](const Watched& w) { return w.fd == fd; });
}

Supervisor::Clock::duration Supervisor::grace_period() const {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(grace_period_s_));
}

int Supervisor::run(const sigset_t& watched) {
  // The watched signals stay blocked; the signalfd hands them over one by one, pending ones
  // included (a rank that exited, or a Ctrl-C, while the others were still starting).
  signals_ = ::signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signals_ < 0) throw std::system_error(errno, std::generic_category(), "signalfd");
  while (true) {
    start_attempt();
    supervise_attempt();
    ended_why_ = why_ended_;
    ended_exit_code_ = exit_code_;
    ended_exits_.clear();
    for (const Tracked& t : ranks_) ended_exits_[t.process.rank] = t.status;
    if (!restart_wanted()) break;
    // Nothing of this attempt is left (supervise_attempt waited for that), so the next one
    // starts at once: no sleep, no back-off.
    history_.push_back("attempt " + std::to_string(attempt_) + ": " + why_ended_ + "; restart " +
                       std::to_string(attempt_ + 1) + " of " + std::to_string(max_restarts_));
    say("attempt " + std::to_string(attempt_) + " has ended; restarting every rank (restart " +
        std::to_string(attempt_ + 1) + " of " + std::to_string(max_restarts_) + ")");
    ++attempt_;
  }
  ::close(signals_);
  signals_ = -1;
  if ((stopping_ && !ranks_.empty()) || !history_.empty()) {
    before_report_(true);
    print_summary();
  }
  return exit_code_;
}

// A fresh start: the state of the attempt before is forgotten, except what the summary needs
// (history_).
void Supervisor::start_attempt() {
  ranks_.clear();
  stopping_ = killed_ = failed_attempt_ = leftovers_noted_ = children_left_ = false;
  deadline_.reset();
  exit_code_ = 0;
  first_failure_ = -1;
  why_ended_.clear();
  stopped_note_.clear();
  Launch launch = start_(attempt_);
  for (const RankProcess& process : launch.started) ranks_.push_back({process});
  if (launch.error.empty()) return;
  say("error: " + launch.error);
  if (!launch.hint.empty()) say("hint: " + launch.hint);
  cannot_start_ = true;  // a restart would fail the same way
  stop_all(SIGTERM, launch.exit_code,
           ranks_.empty() ? launch.error : "stopped the ranks already running");
}

// Until every rank of this attempt, and everything they started, is gone.
void Supervisor::supervise_attempt() {
  while (true) {
    reap_exited();
    if (running_count() == 0 && !children_left_) return;
    if (running_count() == 0 && !leftovers_noted_) note_leftovers();
    if (deadline_ && !killed_ && Clock::now() >= *deadline_) kill_survivors();
    if (killed_) signal_leftovers(SIGKILL);  // orphans of what the last SIGKILL ended
    wait_for_events();
  }
}

bool Supervisor::restart_wanted() const {
  return failed_attempt_ && !interrupted_ && !cannot_start_ && attempt_ < max_restarts_;
}

// Sleeps until a watched signal arrives, a watched fd is ready, or the grace period runs out;
// then acts on what came.
void Supervisor::wait_for_events() {
  std::vector<pollfd> fds = {{signals_, POLLIN, 0}};
  for (const Watched& w : watched_) fds.push_back({w.fd, POLLIN, 0});
  timespec wait{};
  const std::optional<Clock::duration> timeout = time_until_kill();
  if (timeout) {
    const auto left = std::max(*timeout, Clock::duration::zero());
    const auto whole = std::chrono::duration_cast<std::chrono::seconds>(left);
    wait.tv_sec = static_cast<std::time_t>(whole.count());
    wait.tv_nsec = static_cast<long>((left - whole).count());
  }
  if (::ppoll(fds.data(), fds.size(), timeout ? &wait : nullptr, nullptr) <= 0) return;
  signalfd_siginfo info{};
  while (::read(signals_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int signal = static_cast<int>(info.ssi_signo);
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) on_stop_signal(signal);
  }
  for (std::size_t i = 1; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    // Looked up again: an earlier callback may have unwatched this fd.
    const auto w = std::find_if(watched_.begin(), watched_.end(),
                                [fd = fds[i].fd](const Watched& x) { return x.fd == fd; });
    if (w != watched_.end()) {
      const std::function<void()> on_ready = w->on_ready;  // the callback may unwatch itself
      on_ready();
    }
  }
}

int Supervisor::running_count() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Tracked& t) { return t.running; }));
}

// To the rank's whole process group: it leads one (launch.cpp), and its children are in it.
// Only ranks not yet reaped are signalled: a reaped pid may already belong to another process.
// A stopped rank also gets SIGCONT, or it would act on SIGTERM only when someone continued it.
void Supervisor::signal_running(int signal) {
  for (Tracked& t : ranks_) {
    if (!t.running) continue;
    ::kill(-t.process.pid, signal);
    t.sent.push_back(signal);
    if (t.stop_signal != 0 && signal != SIGKILL) ::kill(-t.process.pid, SIGCONT);
  }
}

// What the ranks left behind, once every rank has exited: `signal` to each (SIGCONT too, so that
// a stopped one acts on it). The ranks' groups had SIGTERM when their leaders exited; this also
// reaches a process that left its rank's group (setsid, a daemon).
void Supervisor::signal_leftovers(int signal) {
  for (const pid_t pid : children_of_ddprun()) {
    const bool rank = std::any_of(ranks_.begin(), ranks_.end(), [pid](const Tracked& t) {
      return t.running && t.process.pid == pid;
    });
    if (rank) continue;
    ::kill(pid, signal);
    if (signal != SIGKILL) ::kill(pid, SIGCONT);
  }
}

// Every rank has exited, but processes they started are still running: they are stopped as the
// ranks would have been, SIGTERM now and SIGKILL after the grace period, and ddprun says so.
// While ddprun stops the job (a failure, a signal), they are part of the stop and need no notice.
void Supervisor::note_leftovers() {
  leftovers_noted_ = true;
  if (!stopping_) {
    say("every rank has exited, but they left " +
        processes_text(static_cast<int>(children_of_ddprun().size())) +
        " running; sending SIGTERM (SIGKILL after " + seconds_text(grace_period_s_) + ")");
  }
  signal_leftovers(SIGTERM);
  if (!deadline_) deadline_ = Clock::now() + grace_period();
}

// Looks at every rank's news (stopped, continued, exited) before acting on a failure, so that a
// rank stopped at the same moment is already known when the summary is written.
void Supervisor::reap_exited() {
  int new_failure = -1;
  for (Tracked& t : ranks_) {  // stops and continues: the ranks' only, orphans' are no news
    siginfo_t info{};
    while (t.running &&
           ::waitid(P_PID, static_cast<id_t>(t.process.pid), &info,
                    WSTOPPED | WCONTINUED | WNOHANG) == 0 &&
           info.si_pid != 0) {
      t.stop_signal =
          info.si_code == CLD_STOPPED || info.si_code == CLD_TRAPPED ? info.si_status : 0;
      if (t.stop_signal != 0) t.stopped_at = Clock::now();
      info = {};
    }
  }
  while (true) {  // exits: a rank's, or one of the orphans ddprun has adopted
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      children_left_ = false;  // ECHILD: nothing of the job is running any more
      break;
    }
    children_left_ = true;
    if (info.si_pid == 0) break;  // children left, none has exited
    const pid_t pid = info.si_pid;
    const auto rank = std::find_if(ranks_.begin(), ranks_.end(), [pid](const Tracked& t) {
      return t.running && t.process.pid == pid;
    });
    // The leader is a zombie until waitpid below: its group id cannot be reused yet, so what
    // is left of the rank's group can still be told to stop.
    if (rank != ranks_.end()) ::kill(-pid, SIGTERM);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (rank == ranks_.end()) continue;
    rank->status = status;
    rank->running = false;
    const int index = static_cast<int>(rank - ranks_.begin());
    // Several failures seen at once (ddprun woke late: a loaded machine) came in the order the
    // ranks were started, not the order they ended. A rank killed by a signal is the likelier
    // cause: the others' errors are mostly its echo (a peer that closed its connection).
    if (!stopping_ && failed(status) &&
        (new_failure < 0 || (WIFSIGNALED(status) && !WIFSIGNALED(ranks_[new_failure].status)))) {
      new_failure = index;
    }
  }
  if (new_failure >= 0) on_first_failure(new_failure);
}

// The first failure is the one that matters: the ranks stopped after it only fail because
// of it (or would hang waiting for it in a collective).
void Supervisor::on_first_failure(int index) {
  first_failure_ = index;
  const Tracked& t = ranks_[index];
  const std::string ended = how_it_ended(t.status);
  const int others = running_count();
  before_report_(false);
  say("rank " + std::to_string(t.process.rank) + " (local_rank " +
      std::to_string(t.process.local_rank) + ", pid " + std::to_string(t.process.pid) + ") " +
      ended + stopping_the_others(others));
  stopped_note_ = note_stopped_ranks();
  failed_attempt_ = true;
  stop_all(SIGTERM, exit_code_of(t.status),
           "first failure: rank " + std::to_string(t.process.rank) + " " + ended);
}

// The first stop signal is passed on and starts the grace period; a second one (an impatient
// second Ctrl-C) ends the wait with SIGKILL at once.
void Supervisor::on_stop_signal(int signal) {
  const std::string name = signal_name(signal);
  interrupted_ = true;  // whoever stops ddprun wants the job over: no restart
  if (!stopping_) {
    say("received " + name + "; passing it on to the " + count_of(running_count(), "running rank") +
        " (SIGKILL after " + seconds_text(grace_period_s_) + ")");
    stop_all(signal, 128 + signal, "stopped by " + name);
  } else if (!killed_ && (running_count() > 0 || children_left_)) {
    say("received " + name + " while stopping; sending SIGKILL to the " +
        count_of(running_count(), "rank") + " still running");
    killed_ = true;
    signal_running(SIGKILL);
    signal_leftovers(SIGKILL);
  }
}

// The ranks that were stopped when the first failure came, and for how long: a stopped rank
// neither runs nor exits, so the others time out in a collective, and one of them is the "first
// failure" although the stopped rank is the cause.
std::string Supervisor::note_stopped_ranks() {
  std::string note;
  for (Tracked& t : ranks_) {
    if (!t.running || t.stop_signal == 0) continue;
    t.stopped_at_first_failure = true;
    const double seconds = std::chrono::duration<double>(Clock::now() - t.stopped_at).count();
    std::ostringstream text;
    text.precision(1);
    text << std::fixed << seconds;
    note += std::string(note.empty() ? "" : "; ") + "rank " + std::to_string(t.process.rank) +
            " had been stopped (" + signal_name(t.stop_signal) + ") for " + text.str() + " s";
  }
  return note;
}

// At the end of the grace period, or at a second Ctrl-C: SIGKILL to every rank's group, and to
// whatever else of the job is left (ddprun's children).
void Supervisor::kill_survivors() {
  const int ranks = running_count();
  const int others = static_cast<int>(children_of_ddprun().size()) - ranks;
  if (ranks > 0) {
    say(count_of(ranks, "rank") + " still running after the " + seconds_text(grace_period_s_) +
        " grace period; sending SIGKILL");
  } else if (others > 0) {
    say(processes_text(others) + " the ranks started still running after the " +
        seconds_text(grace_period_s_) + " grace period; sending SIGKILL");
  }
  killed_ = true;
  signal_running(SIGKILL);
  signal_leftovers(SIGKILL);
}

std::optional<Supervisor::Clock::duration> Supervisor::time_until_kill() const {
  if (!deadline_ || killed_) return std::nullopt;  // nothing to escalate: wait for SIGCHLD only
  return *deadline_ - Clock::now();
}

std::string Supervisor::outcome(int index) const {
  const Tracked& t = ranks_[index];
  std::string text;
  if (WIFEXITED(t.status)) {
    text = "exit code " + std::to_string(WEXITSTATUS(t.status));
    if (!t.sent.empty()) text += " (after ddprun sent " + signal_name(t.sent.front()) + ")";
  } else {
    const int signal = WTERMSIG(t.status);
    const bool from_ddprun = std::find(t.sent.begin(), t.sent.end(), signal) != t.sent.end();
    if (!from_ddprun) {
      text = "killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
    } else if (signal == SIGKILL) {
      text = "killed by ddprun (SIGKILL)";
    } else {
      text = "stopped by ddprun (" + signal_name(signal) + ")";
    }
  }
  if (index == first_failure_) text += "   <- first failure";
  if (t.stopped_at_first_failure) text += "   <- stopped before the first failure: likely cause";
  return text;
}

// One line per attempt that was restarted, then the last attempt rank by rank, and how it ended.
// Without --max-restarts there is one attempt, and no attempt lines.
void Supervisor::print_summary() const {
  say("---- summary ----");
  for (const std::string& line : history_) say(line);
  const std::string last = "attempt " + std::to_string(attempt_) + ":";
  const std::string exits = "ddprun exits " + std::to_string(exit_code_);
  if (!stopping_) {  // restarted, and then every rank of the last attempt exited 0
    say(last + " every rank exited 0; " + exits);
    return;
  }
  if (ranks_.empty()) {  // the attempt never started (the other machines did not come)
    say(last + " " + why_ended_ + "; " + exits);
    return;
  }
  if (max_restarts_ > 0) say(last);
  const std::size_t width = std::to_string(ranks_.back().process.rank).size();
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    std::string rank = std::to_string(ranks_[i].process.rank);
    rank.insert(0, width - rank.size(), ' ');
    say("  rank " + rank + "  " + outcome(i));
  }
  const bool out_of_restarts =
      max_restarts_ > 0 && failed_attempt_ && !interrupted_ && !cannot_start_;
  say(why_ended_ +
      (out_of_restarts ? "; no restart left (--max-restarts " + std::to_string(max_restarts_) + ")"
                       : "") +
      "; " + exits);
  if (!stopped_note_.empty()) {
    say("hint: " + stopped_note_ + " when it came: a stopped rank makes the others time out " +
        "waiting for it, so it is the likely cause (a debugger, Ctrl-Z, kill -STOP, or a " +
        "machine frozen under memory pressure)");
  }
  if (first_failure_ >= 0) {
    const std::string hint = failure_hint(ranks_[first_failure_].status);
    if (!hint.empty()) say("hint: " + hint);
  }
}

}  // namespace ddprun
