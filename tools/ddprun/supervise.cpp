// Supervising the ranks (supervise.h).
//
// The loop sleeps in sigtimedwait until something happens: a rank exits (SIGCHLD), someone
// asks ddprun to stop (SIGINT, SIGTERM, SIGHUP), or the grace period of a stop runs out. It
// never polls. The first rank to fail decides ddprun's exit code; everything after that is
// cleaning up, and the summary says which rank ended how.
#include "supervise.h"

#include <sys/wait.h>

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
  action.sa_flags = SA_NOCLDSTOP;  // a rank paused with Ctrl-Z has not ended: no news
  sigaction(SIGCHLD, &action, nullptr);

  SignalMasks masks{};
  sigemptyset(&masks.watched);
  for (const int signal : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&masks.watched, signal);
  sigprocmask(SIG_BLOCK, &masks.watched, &masks.original);
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
  while (running_count() > 0) {
    const int signal = next_signal(watched, time_until_kill());
    if (signal == SIGINT || signal == SIGTERM || signal == SIGHUP) on_stop_signal(signal);
    reap_exited();
    if (stopping_ && !killed_ && Clock::now() >= kill_at_ && running_count() > 0) {
      say(count_of(running_count(), "rank") + " still running after the " +
          seconds_text(grace_period_s_) + " grace period; sending SIGKILL");
      kill_survivors();
    }
  }
  if (stopping_ && !ranks_.empty()) print_summary();
  return exit_code_;
}

int Supervisor::running_count() const {
  return static_cast<int>(
      std::count_if(ranks_.begin(), ranks_.end(), [](const Tracked& t) { return t.running; }));
}

// Only ranks not yet reaped are signalled: a reaped pid may already belong to another process.
void Supervisor::signal_running(int signal) {
  for (Tracked& t : ranks_) {
    if (!t.running) continue;
    ::kill(t.process.pid, signal);
    t.sent.push_back(signal);
  }
}

void Supervisor::reap_exited() {
  for (int i = 0; i < static_cast<int>(ranks_.size()); ++i) {
    Tracked& t = ranks_[i];
    if (!t.running) continue;
    pid_t done = 0;
    do {
      done = ::waitpid(t.process.pid, &t.status, WNOHANG);
    } while (done < 0 && errno == EINTR);
    if (done == 0) continue;  // still running
    t.running = false;        // done < 0 (ECHILD) cannot happen while we own SIGCHLD; treat as gone
    if (!stopping_ && failed(t.status)) on_first_failure(i);
  }
}

// The first failure is the one that matters: the ranks stopped after it only fail because
// of it (or would hang waiting for it in a collective).
void Supervisor::on_first_failure(int index) {
  first_failure_ = index;
  const Tracked& t = ranks_[index];
  const std::string ended = how_it_ended(t.status);
  const int others = running_count();
  say("rank " + std::to_string(t.process.rank) + " (local_rank " +
      std::to_string(t.process.local_rank) + ", pid " + std::to_string(t.process.pid) + ") " +
      ended + stopping_the_others(others));
  const int code = exit_code_of(t.status);
  stop_all(SIGTERM, code,
           "first failure: rank " + std::to_string(t.process.rank) + " " + ended +
               "; ddprun exits " + std::to_string(code));
}

// The first stop signal is passed on and starts the grace period; a second one (an impatient
// second Ctrl-C) ends the wait with SIGKILL at once.
void Supervisor::on_stop_signal(int signal) {
  const std::string name = signal_name(signal);
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
  if (first_failure_ >= 0) {
    const std::string hint = failure_hint(ranks_[first_failure_].status);
    if (!hint.empty()) say("hint: " + hint);
  }
}

}  // namespace ddprun
