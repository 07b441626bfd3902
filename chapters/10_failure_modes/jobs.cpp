// Chapter 10's driver plumbing (see jobs.h).
#include "jobs.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dist/check.h>
#include <dist/log.h>
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string_view>

extern char** environ;

namespace ch10 {
namespace {

using Clock = std::chrono::steady_clock;

// The process groups of the jobs now running, for the signal handler (0: a free slot).
constexpr int kMaxMachines = 8;
volatile sig_atomic_t g_groups[kMaxMachines] = {};

void stop_jobs_and_die(int signal) {
  for (int i = 0; i < kMaxMachines; ++i) {
    if (g_groups[i] != 0) kill(-static_cast<pid_t>(g_groups[i]), SIGTERM);
  }
  std::signal(signal, SIG_DFL);  // then die of it, as without the handler
  std::raise(signal);
}

[[noreturn]] void fail(const std::string& what) {
  throw dist::Error(what + ": " + std::strerror(errno));
}

// One running machine: its ddprun's pid (also its process group) and the read end of its pipe.
struct Running {
  pid_t pid = -1;
  int fd = -1;
  std::string pending;  // a line not yet ended
};

// This process's environment with `env` set on top (a name given there replaces the inherited one).
std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const auto name = entry.substr(0, entry.find('='));
    const bool replaced =
        std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (!replaced) out.emplace_back(entry);
  }
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

Running start(const MachineCommand& machine, std::vector<std::string> environment) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) fail("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);  // its own group: killable as a whole
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<std::string> args = machine.argv;
  auto argv = c_strings(args);
  auto envp = c_strings(environment);
  Running r;
  const int err = posix_spawn(&r.pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(pipe_fds[1]);
  if (err != 0) {
    close(pipe_fds[0]);
    errno = err;
    fail("cannot start " + machine.argv[0]);
  }
  r.fd = pipe_fds[0];
  return r;
}

// Moves the whole lines in `r.pending` to the machine's output, echoing each to stderr.
void take_lines(Running& r, MachineResult& result, const std::string& prefix) {
  std::size_t end;
  while ((end = r.pending.find('\n')) != std::string::npos) {
    const std::string line = r.pending.substr(0, end + 1);
    r.pending.erase(0, end + 1);
    result.output += line;
    dist::write_stderr("  " + prefix + "| " + line);
  }
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Closes what is left of the pipes and waits for every started ddprun, recording its exit code.
void reap(std::vector<Running>& running, JobResult& job) {
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (running[i].fd >= 0) close(running[i].fd);
    int status = 0;
    while (waitpid(running[i].pid, &status, 0) < 0 && errno == EINTR) {
    }
    job.machines[i].exit_code = exit_code_of(status);
    g_groups[i] = 0;
  }
}

// Reads every pipe until each reaches end of file (the machine's ddprun and its ranks are all
// gone) or the deadline passes, when it kills every machine's process group.
void read_until_done(std::vector<Running>& running, JobResult& job,
                     const std::vector<MachineCommand>& machines, Clock::time_point give_up_at) {
  const auto prefix = [&](std::size_t i) {
    return machines.size() == 1 ? std::string() : std::string(1, machines[i].name.back());
  };
  std::size_t open_pipes = running.size();
  while (open_pipes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up_at - Clock::now());
    if (left.count() <= 0) {
      job.timed_out = true;
      for (const auto& r : running) kill(-r.pid, SIGKILL);  // ddprun and its ranks share a group
      return;
    }
    std::vector<pollfd> fds;
    for (const auto& r : running) fds.push_back({r.fd, POLLIN, 0});
    const int wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
    if (poll(fds.data(), fds.size(), wait_ms) < 0) {
      if (errno == EINTR) continue;
      fail("poll");
    }
    for (std::size_t i = 0; i < running.size(); ++i) {
      if (running[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(running[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        running[i].pending.append(buffer, static_cast<std::size_t>(n));
        take_lines(running[i], job.machines[i], prefix(i));
      } else if (n == 0 || errno != EINTR) {
        close(running[i].fd);
        running[i].fd = -1;
        --open_pipes;
        if (!running[i].pending.empty()) {  // a last line without its newline
          running[i].pending += '\n';
          take_lines(running[i], job.machines[i], prefix(i));
        }
      }
    }
  }
}

}  // namespace

JobResult run_job(const std::vector<MachineCommand>& machines,
                  const std::vector<std::pair<std::string, std::string>>& env,
                  std::chrono::seconds deadline) {
  DIST_CHECK(machines.size() <= kMaxMachines, "at most 8 machines per job");
  const auto started = Clock::now();
  JobResult job;
  std::vector<Running> running;
  try {
    for (const auto& machine : machines) {
      job.machines.push_back({machine.name, "", -1});
      running.push_back(start(machine, child_environment(env)));
      g_groups[running.size() - 1] = running.back().pid;
    }
    read_until_done(running, job, machines, started + deadline);
  } catch (...) {
    for (const auto& r : running) kill(-r.pid, SIGKILL);  // nothing is left running
    reap(running, job);
    throw;
  }
  reap(running, job);
  job.elapsed = Clock::now() - started;
  return job;
}

void pass_stop_signals_to_jobs() {
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal, stop_jobs_and_die);
}

int free_port() {
  PortHolder probe;
  return probe.port();
}

PortHolder::PortHolder() {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (bind(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 || listen(fd_, 16) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd_);
    fail("cannot listen on a port of 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
}

PortHolder::~PortHolder() {
  close(fd_);
}

std::string program_directory() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
}

}  // namespace ch10
