// The ddprun tests' harness: see ddprun_harness.h.
#include "ddprun_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include <gtest/gtest.h>

extern char** environ;

namespace ddprun_test {
namespace {

// The test's environment without OMP_NUM_THREADS (so ddprun's notice about it is predictable),
// plus `extra` ("NAME=value" entries).
std::vector<std::string> environment_with(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (std::string(*entry).starts_with("OMP_NUM_THREADS=")) continue;
    env.emplace_back(*entry);
  }
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void read_from(int& fd, std::string& into, short revents) {
  if (fd < 0 || revents == 0) return;
  char buffer[4096];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n > 0) {
    into.append(buffer, static_cast<std::size_t>(n));
  } else if (n == 0 || errno != EINTR) {
    close_fd(fd);
  }
}

}  // namespace

Ddprun::Ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  std::vector<std::string> argv_strings = {DDPRUN_PATH};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<std::string> env_strings = environment_with(env);
  std::vector<char*> argv = c_array(argv_strings);
  std::vector<char*> envp = c_array(env_strings);
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) std::abort();
  started_ = Clock::now();
  pid_ = ::fork();
  if (pid_ < 0) std::abort();
  if (pid_ == 0) {
    ::setpgid(0, 0);  // its own group: kill(-pid) then reaches ddprun, whatever it started
    // The stop signals as a terminal would give them, whatever the test runner was given: a
    // runner started in the background of a script ignores SIGINT, and so would every rank.
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) std::signal(signal, SIG_DFL);
#ifdef __linux__
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // if the test binary dies, ddprun (and its ranks) too
#endif
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // as well as in the child: whichever runs first, the group exists
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
}

Ddprun::~Ddprun() {
  if (!reaped_) {
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  close_fd(out_fd_);
  close_fd(err_fd_);
}

bool Ddprun::wait_for_ranks(int n) {
  return wait_until([&] { return std::count(out_.begin(), out_.end(), '\n') >= n; });
}

bool Ddprun::wait_for_stderr(const std::string& text) {
  return wait_until([&] { return err_.find(text) != std::string::npos; });
}

void Ddprun::send(int signal) {
  if (!signalled_) started_ = Clock::now();
  signalled_ = true;
  ::kill(pid_, signal);
}

Result Ddprun::finish() {
  const Clock::time_point deadline = started_ + kDeadline;
  while ((out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) read_some(deadline);
  int status = 0;
  while (!reaped_ && Clock::now() < deadline) {
    reaped_ = ::waitpid(pid_, &status, WNOHANG) == pid_;
    if (!reaped_) std::this_thread::sleep_for(5ms);
  }
  Result result;
  result.seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  if (!reaped_) {
    ADD_FAILURE() << "ddprun, or one of its ranks, was still running after " << kDeadline.count()
                  << " s; killing them all. stderr so far:\n"
                  << err_;
    return result;  // the destructor kills the group
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  result.out = out_;
  result.err = err_;
  return result;
}

bool Ddprun::wait_until(const std::function<bool()>& ready) {
  const Clock::time_point deadline = Clock::now() + kDeadline;
  while (!ready() && (out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) {
    read_some(deadline);
  }
  return ready();
}

void Ddprun::read_some(Clock::time_point deadline) {
  pollfd fds[] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};  // poll skips a closed (-1) fd
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (::poll(fds, 2, static_cast<int>(std::max<long>(left.count(), 0))) <= 0) return;
  read_from(out_fd_, out_, fds[0].revents);
  read_from(err_fd_, err_, fds[1].revents);
}

Result run_ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env) {
  Ddprun ddprun(args, env);
  return ddprun.finish();
}

Result run_and_signal(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      int nproc, int signal) {
  Ddprun ddprun(args, env);
  if (!ddprun.wait_for_ranks(nproc)) {
    ADD_FAILURE() << nproc << " ranks did not all start and print";
    return {};  // the destructor kills the group
  }
  ddprun.send(signal);
  return ddprun.finish();
}

std::vector<Probe> probes_in(const std::string& out) {
  std::vector<Probe> probes;
  std::size_t start = 0;
  for (std::size_t end; (end = out.find('\n', start)) != std::string::npos; start = end + 1) {
    std::string line = out.substr(start, end - start);
    if (!line.starts_with("probe: ")) continue;
    Probe probe;
    const std::size_t argv_at = line.find(" argv=");
    probe.argv = line.substr(argv_at + 6);
    std::size_t at = 7;
    while (at < argv_at) {
      const std::size_t space = std::min(line.find(' ', at), argv_at);
      const std::string field = line.substr(at, space - at);
      const std::size_t eq = field.find('=');
      probe.vars[field.substr(0, eq)] = field.substr(eq + 1);
      at = space + 1;
    }
    probes.push_back(probe);
  }
  std::sort(probes.begin(), probes.end(), [](const Probe& a, const Probe& b) {
    return std::stoi(a["RANK"]) < std::stoi(b["RANK"]);
  });
  return probes;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

void expect_every_probe_gone(const std::string& out) {
  for (const Probe& probe : probes_in(out)) {
    const pid_t pid = std::stoi(probe["PID"]);
    EXPECT_TRUE(::kill(pid, 0) != 0 && errno == ESRCH)
        << "rank " << probe["RANK"] << " (pid " << pid << ") is still running after ddprun exited";
  }
}

std::vector<pid_t> processes_with(const std::string& entry) {
  std::vector<pid_t> found;
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    const std::string name = proc.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ_file(proc.path() / "environ", std::ios::binary);
    for (std::string var; std::getline(environ_file, var, '\0');) {
      if (var == entry) found.push_back(std::stoi(name));
    }
  }
  return found;
}

std::string new_job_marker() {
  static int jobs = 0;
  return "DDPRUN_TEST_JOB=" + std::to_string(::getpid()) + "_" + std::to_string(++jobs);
}

void expect_nothing_of_the_job_left(const std::string& marker) {
  const std::vector<pid_t> left = processes_with(marker);
  for (const pid_t pid : left) {
    ADD_FAILURE() << "process " << pid << " of the job is still running after ddprun exited";
    ::kill(pid, SIGKILL);
  }
}

void at_1_2_and_4_ranks(const std::function<void(int nproc, const std::string& marker)>& job) {
  for (const int nproc : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + (nproc == 1 ? " rank" : " ranks"));
    const std::string marker = new_job_marker();
    job(nproc, marker);
    expect_nothing_of_the_job_left(marker);
  }
}

TempFolder::TempFolder() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/ddprun-logs-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) std::abort();
  path_ = pattern;
}

TempFolder::~TempFolder() {
  std::filesystem::remove_all(path_);
}

std::vector<std::string> entries_of(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace ddprun_test
