// Supervising the ranks (supervise.h).
//
// The loop sleeps in sigtimedwait until something happens: a rank exits (SIGCHLD), someone
// asks ddprun to stop (SIGINT, SIGTERM, SIGHUP), or the grace period of a stop runs out. It
// never polls. The first rank to fail decides ddprun's exit code; everything after that is
// cleaning up, and the summary says which rank ended how.
#include "supervise.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <sstream>
#include <string>
#include <utility>

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

std::string seconds_text(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

// Sleeps until a watched signal arrives, or until `timeout` has passed (forever without one).
// Returns the signal, or 0 when the time ran out.
int next_signal(const sigset_t& watched,
                std::optional<std::chrono::steady_clock::duration> timeout) {
  int signal = 0;
  if (timeout) {
    const auto left = std::max(*timeout, std::chrono::steady_clock::duration::zero());
    const auto whole = std::chrono::duration_cast<std::chrono::seconds>(left);
    timespec wait{};
    wait.tv_sec = static_cast<std::time_t>(whole.count());
    wait.tv_nsec = static_cast<long>((left - whole).count());
    signal = ::sigtimedwait(&watched, nullptr, &wait);
  } else {
    signal = ::sigwaitinfo(&watched, nullptr);
  }
  return signal > 0 ? signal : 0;  // -1: EAGAIN (time is up) or EINTR; the caller looks again
}

// As next_signal, and also wakes when `fd` is readable (then returns -1). `signals` is a
// signalfd for the watched signals.
int next_signal_or_fd(int signals, int fd,
                      std::optional<std::chrono::steady_clock::duration> timeout) {
  int ms = -1;
  if (timeout) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        std::max(*timeout, std::chrono::steady_clock::duration::zero()));
    ms = static_cast<int>(left.count());
  }
  pollfd fds[2] = {{signals, POLLIN, 0}, {fd, POLLIN, 0}};
  if (::poll(fds, 2, ms) <= 0) return 0;
  if (fds[0].revents & POLLIN) {
    signalfd_siginfo info{};
    if (::read(signals, &info, sizeof info) == sizeof info) return static_cast<int>(info.ssi_signo);
  }
  return fds[1].revents != 0 ? -1 : 0;
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

Supervisor::Supervisor(std::vector<RankProcess> ranks, double grace_period_s)
    : grace_period_s_(grace_period_s) {
  for (const RankProcess& process : ranks) ranks_.push_back({process});
}

void Supervisor::stop_all(int signal, int exit_code, std::string conclusion) {
  stopping_ = true;
  exit_code_ = exit_code;
  conclusion_ = std::move(conclusion);
  signal_running(signal);
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(grace_period_s_));
}

int Supervisor::run(const sigset_t& watched) {
  const int signals = wake_fd_ >= 0 ? ::signalfd(-1, &watched, SFD_CLOEXEC) : -1;
  while (running_count() > 0) {
    int signal = 0;
    if (signals >= 0) {
      // Once stopping, the rendezvous has nothing more to say to this attempt: its fd is left
      // out (poll ignores -1), so that a closed connection cannot keep waking the loop.
      signal = next_signal_or_fd(signals, stopping_ ? -1 : wake_fd_, time_until_kill());
      if (signal < 0) {
        signal = 0;
        on_wake_();
      }
    } else {
      signal = next_signal(watched, time_until_kill());
    }
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) on_stop_signal(signal);
    reap_exited();
    if (stopping_ && !killed_ && Clock::now() >= kill_at_ && running_count() > 0) {
      say(count_of(running_count(), "rank") + " still running after the " +
          seconds_text(grace_period_s_) + " grace period; sending SIGKILL");
      kill_survivors();
    }
  }
  if (signals >= 0) ::close(signals);
  if (stopping_ && !ranks_.empty()) {
    before_report_(true);
    print_summary();
  }
  return exit_code_;
}

std::string Supervisor::first_failure() const {
  if (first_failure_ < 0) return "";
  const Tracked& t = ranks_[first_failure_];
  return "rank " + std::to_string(t.process.rank) + " " + how_it_ended(t.status);
}

int Supervisor::running_count() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Tracked& t) { return t.running; }));
}

// Only ranks not yet reaped are signalled: a reaped pid may already belong to another process.
// A stopped rank also gets SIGCONT, or it would act on SIGTERM only when someone continued it.
void Supervisor::signal_running(int signal) {
  for (Tracked& t : ranks_) {
    if (!t.running) continue;
    ::kill(t.process.pid, signal);
    t.sent.push_back(signal);
    if (t.stop_signal != 0 && signal != SIGKILL) ::kill(t.process.pid, SIGCONT);
  }
}

// Looks at every rank's news (stopped, continued, exited) before acting on a failure, so that a
// rank stopped at the same moment is already known when the summary is written.
void Supervisor::reap_exited() {
  int new_failure = -1;
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    Tracked& t = ranks_[i];
    while (t.running) {
      int status = 0;
      const pid_t done = ::waitpid(t.process.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
      if (done < 0 && errno == EINTR) continue;
      if (done == 0) break;  // still running, nothing new
      if (done > 0 && WIFSTOPPED(status)) {
        t.stop_signal = WSTOPSIG(status);
        t.stopped_at = Clock::now();
      } else if (done > 0 && WIFCONTINUED(status)) {
        t.stop_signal = 0;
      } else {
        t.status = status;
        t.running = false;  // done < 0 (ECHILD) cannot happen while we own SIGCHLD: gone
        if (!stopping_ && new_failure < 0 && failed(t.status)) new_failure = i;
      }
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
  const int code = exit_code_of(t.status);
  stop_all(SIGTERM, code,
           "first failure: rank " + std::to_string(t.process.rank) + " " + ended +
               (failure_then_.empty() ? "; ddprun exits " + std::to_string(code)
                                      : "; " + failure_then_));
}

// The first stop signal is passed on and starts the grace period; a second one (an impatient
// second Ctrl-C) ends the wait with SIGKILL at once.
void Supervisor::on_stop_signal(int signal) {
  const std::string name = signal_name(signal);
  if (stop_signal_ == 0) stop_signal_ = signal;
  if (!stopping_) {
    say("received " + name + "; passing it on to the " + count_of(running_count(), "running rank") +
        " (SIGKILL after " + seconds_text(grace_period_s_) + ")");
    stop_all(signal, 128 + signal,
             "stopped by " + name + "; ddprun exits " + std::to_string(128 + signal));
  } else if (!killed_ && running_count() > 0) {
    say("received " + name + " while stopping; sending SIGKILL to the " +
        count_of(running_count(), "rank") + " still running");
    kill_survivors();
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

void Supervisor::kill_survivors() {
  killed_ = true;
  signal_running(SIGKILL);
}

std::optional<Supervisor::Clock::duration> Supervisor::time_until_kill() const {
  if (!stopping_ || killed_) return std::nullopt;  // nothing to escalate: wait for SIGCHLD only
  return kill_at_ - Clock::now();
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

void Supervisor::print_summary() const {
  const std::size_t width = std::to_string(ranks_.back().process.rank).size();
  say("---- summary ----");
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    std::string rank = std::to_string(ranks_[i].process.rank);
    rank.insert(0, width - rank.size(), ' ');
    say("  rank " + rank + "  " + outcome(i));
  }
  say(conclusion_);
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
