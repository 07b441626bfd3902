// Starting the ranks (launch.h).
#include "launch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

extern char** environ;

namespace ddprun {
namespace {

// What a child exits with when exec fails: the shell's "command not found". The parent has
// already been told why through the pipe, so nobody reads this code but the summary.
constexpr int kExecFailedExit = 127;

// The size of the kernel's signal set, which rt_sigprocmask takes (glibc's sigset_t is larger).
constexpr long kKernelSigsetBytes = 8;

using Variables = std::vector<std::pair<std::string, std::string>>;

// The variables torchrun 1.13 gives each worker (LocalElasticAgent._start_workers), plus
// DIST_LAUNCHER so that a program can tell who started it. `attempt` counts the restarts, as
// torchrun's restart_count does (max_restarts - remaining_restarts).
Variables rank_variables(const Options& o, int local_rank, int attempt) {
  const std::string rank = std::to_string(o.node_rank * o.nproc_per_node + local_rank);
  const std::string world_size = std::to_string(o.nnodes * o.nproc_per_node);
  Variables vars = {
      {"RANK", rank},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", world_size},
      {"LOCAL_WORLD_SIZE", std::to_string(o.nproc_per_node)},
      {"GROUP_RANK", std::to_string(o.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(o.nnodes)},
      {"ROLE_RANK", rank},
      {"ROLE_WORLD_SIZE", world_size},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", o.master_addr},
      {"MASTER_PORT", std::to_string(o.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o.max_restarts)},
      {"TORCHELASTIC_RUN_ID", "none"},
      {"DIST_LAUNCHER", "ddprun"},
  };
  if (sets_omp_num_threads(o)) vars.emplace_back("OMP_NUM_THREADS", "1");
  if (!o.store_token.empty()) vars.emplace_back("DIST_STORE_TOKEN", o.store_token);
  return vars;
}

// ddprun's own environment with `vars` put in. A variable of the same name is replaced, so a
// RANK left over from an outer launcher never leaks into a rank.
std::vector<std::string> environment_with(const Variables& vars) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text = *entry;
    const std::string_view name = text.substr(0, text.find('='));
    const bool replaced =
        std::any_of(vars.begin(), vars.end(), [&](const auto& var) { return var.first == name; });
    if (!replaced) env.emplace_back(text);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

// The word that names the local rank, or "" without --local-rank-arg.
std::string local_rank_word(const Options& o, int local_rank) {
  const std::string n = std::to_string(local_rank);
  switch (o.local_rank_arg) {
    case Options::LocalRankArg::kNone:
      return "";
    case Options::LocalRankArg::kDash:
      return "--local-rank=" + n;
    case Options::LocalRankArg::kUnderscore:
      return "--local_rank=" + n;
  }
  return "";
}

// exec wants NULL-terminated arrays of char*; these point into `strings`, which must outlive
// the array.
std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (std::string& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

struct Started {
  pid_t pid = -1;
  int exec_errno = 0;  // non-zero: exec failed, and the child is already reaped
};

// What the child of start_rank needs. A failed exec's errno goes back through `report`, the
// write end of a close-on-exec pipe: a successful exec closes it, so ddprun reads end-of-file.
struct ChildPlan {
  char** argv;
  char** envp;
  const sigset_t* mask;
  ChildStreams streams;
  pid_t launcher;
  int report;
};

// The child's side of start_rank, up to its exec. It shares ddprun's memory (and the calling
// thread's thread-local storage), so it makes raw system calls only: no allocation, no lock, and
// no libc wrapper that a sanitizer intercepts to update its own bookkeeping, which is ddprun's.
// The sanitizers stay out of this function for the same reason.
__attribute__((no_sanitize("address", "thread", "undefined"))) int run_rank(void* arg) {
  auto* plan = static_cast<ChildPlan*>(arg);
  const auto fail = [plan](int error) {
    ::syscall(SYS_write, plan->report, &error, sizeof error);
    ::syscall(SYS_exit_group, kExecFailedExit);
  };
  // The mask survives exec; hand back ours. The kernel's sigset is 64 bits on Linux.
  ::syscall(SYS_rt_sigprocmask, SIG_SETMASK, plan->mask, nullptr, kKernelSigsetBytes);
  // A session and process group of its own, as torchrun does in later releases
  // (SubprocessHandler: Popen(start_new_session=True), then os.killpg to stop it; torch 1.13
  // still signals the worker's pid only). ddprun signals the whole group, so the rank's own
  // children stop with it; and the terminal's Ctrl-C reaches ddprun alone, which passes it on.
  ::syscall(SYS_setsid);
  // If ddprun is killed with SIGKILL it cannot stop its ranks, and they would run on as orphans.
  // The kernel can do it: it sends the rank SIGKILL when its parent dies.
  ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL);
  if (::syscall(SYS_getppid) != plan->launcher) fail(ESRCH);  // ddprun died before prctl took
  // Makes each stream the child's 1 or 2. dup3 clears close-on-exec on the copy; an fd that is
  // already 1 or 2 (ddprun started with that stream closed) needs it cleared by hand.
  for (const auto& [fd, target] :
       {std::pair{plan->streams.out, STDOUT_FILENO}, std::pair{plan->streams.err, STDERR_FILENO}}) {
    if (fd < 0) continue;
    const long done =
        fd == target ? ::syscall(SYS_fcntl, fd, F_SETFD, 0) : ::syscall(SYS_dup3, fd, target, 0);
    if (done < 0) fail(errno);
  }
  ::execvpe(plan->argv[0], plan->argv, plan->envp);  // looks PROGRAM up on ddprun's PATH
  fail(errno);
  return 0;  // not reached: fail() ends the child
}

// Starts one rank and returns once its exec has succeeded or failed, so that ddprun can say
// "cannot run PROGRAM" once instead of N ranks each printing their own copy.
//
// The child is made as posix_spawn makes one: clone(CLONE_VM | CLONE_VFORK) on a small stack of
// its own. It borrows ddprun's memory instead of copying it, and ddprun sleeps until its exec.
// A fork would copy ddprun's page tables and then fault in a private copy of every page either
// side writes before the exec: several milliseconds per rank on a virtual machine, where page
// faults are dear (bench/job_life.py). posix_spawn itself cannot be used: the child must also
// ask for SIGKILL when ddprun dies (prctl), which posix_spawn has no action for.
Started start_rank(char** argv, char** envp, const sigset_t& child_mask,
                   const ChildStreams& streams) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw std::system_error(errno, std::generic_category(), "pipe");
  }
  ChildPlan plan{argv, envp, &child_mask, streams, ::getpid(), pipe_fds[1]};
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  // A sanitizer cannot follow a child that runs in ddprun's memory: ThreadSanitizer's clone()
  // resets its own bookkeeping in the child, which is ddprun's, and then reports races that are
  // not there. Sanitized builds make a copy instead, as the sanitizers' vfork() does.
  const pid_t pid = ::fork();
  if (pid == 0) run_rank(&plan);
#else
  // One stack serves every child: ddprun starts its ranks from one thread, one at a time, and
  // each child is done with it at its exec. execvpe builds PATH/PROGRAM names on it (at most
  // PATH_MAX bytes), and a script's argv when it runs one through /bin/sh.
  alignas(64) static std::byte stack[64 * 1024];
  // The stack grows down on every architecture this runs on (x86-64, arm64).
  const pid_t pid =
      ::clone(run_rank, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &plan);
#endif
  const int clone_errno = errno;
  ::close(pipe_fds[1]);
  if (pid < 0) {
    ::close(pipe_fds[0]);
    throw std::system_error(clone_errno, std::generic_category(), "clone");
  }
  int exec_errno = 0;
  ssize_t got = 0;
  do {
    got = ::read(pipe_fds[0], &exec_errno, sizeof exec_errno);
  } while (got < 0 && errno == EINTR);
  ::close(pipe_fds[0]);
  if (got != sizeof exec_errno) return {pid, 0};
  ::waitpid(pid, nullptr, 0);  // it has exited already; reap it so that no zombie is left
  return {pid, exec_errno};
}

std::string exec_hint(const Options& o, int exec_errno) {
  if (o.runs != Options::Runs::kAsIs) {
    return "set PYTHON_EXEC to the Python that has torch, e.g. PYTHON_EXEC=/usr/bin/python3 "
           "(Debian's python3-torch), or install python3";
  }
  switch (exec_errno) {
    case ENOENT:
      return "check the path; a name without a slash is looked up on PATH, so a program in "
             "this folder needs ./ (and a chapter must be built first)";
    case EACCES:
      return "is it an executable file? (chmod +x PROGRAM; a folder cannot be run; a Python "
             "script whose name does not end in .py runs as: ddprun ... python3 -u SCRIPT)";
    default:
      return "";
  }
}

// What "cannot run" names: PROGRAM, or the interpreter that would have run it.
std::string what_runs(const Options& o) {
  if (o.runs == Options::Runs::kAsIs) return o.program[0];
  return python_interpreter() + ", the Python for " +
         (o.runs == Options::Runs::kModule ? "module " : "") + o.program[0];
}

}  // namespace

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // port 0: the kernel chooses a free one
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int bind_errno = errno;
    ::close(fd);
    throw std::system_error(bind_errno, std::generic_category(), "bind 127.0.0.1:0");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string new_store_token() {
  unsigned char bytes[16];
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom");
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

std::string python_interpreter() {
  const char* exec = std::getenv("PYTHON_EXEC");
  return exec != nullptr && *exec != '\0' ? exec : "python3";
}

std::vector<std::string> rank_command(const Options& o, int local_rank) {
  std::vector<std::string> args;
  if (o.runs != Options::Runs::kAsIs) {
    // -u: unbuffered stdout and stderr, as torchrun runs a script, so that a rank's lines reach
    // the terminal (or its log file) as it prints them, and none are lost when it is killed.
    args = {python_interpreter(), "-u"};
    if (o.runs == Options::Runs::kModule) args.emplace_back("-m");
  }
  args.push_back(o.program[0]);
  const std::string word = local_rank_word(o, local_rank);
  if (!word.empty()) args.push_back(word);
  args.insert(args.end(), o.program.begin() + 1, o.program.end());
  return args;
}

bool sets_omp_num_threads(const Options& options) {
  return options.nproc_per_node > 1 && std::getenv("OMP_NUM_THREADS") == nullptr;
}

Launch start_ranks(const Options& o, const sigset_t& child_mask, RankLogs& logs, int attempt) {
  Launch launch;
  // A script that is not there: said once, before any rank starts, instead of by each rank's
  // Python ("can't open file"). Python opens it from this folder; PATH plays no part.
  if (o.runs == Options::Runs::kScript && ::access(o.program[0].c_str(), F_OK) != 0) {
    launch.error = "cannot run the Python script " + o.program[0] + ": " + std::strerror(errno);
    launch.hint =
        "check its path from this folder, where Python opens it (PATH plays no part); a "
        "chapter's twin is chapters/NN_name/twin.py";
    launch.exit_code = kExitUsage;
    return launch;
  }
  for (int local_rank = 0; local_rank < o.nproc_per_node; ++local_rank) {
    const int rank = o.node_rank * o.nproc_per_node + local_rank;
    std::vector<std::string> args = rank_command(o, local_rank);
    std::vector<std::string> env = environment_with(rank_variables(o, local_rank, attempt));
    std::vector<char*> argv = c_array(args);
    std::vector<char*> envp = c_array(env);
    ChildStreams streams;
    try {
      streams = logs.open_files(local_rank);
    } catch (const std::system_error& e) {
      launch.error =
          "could not open the log files of rank " + std::to_string(rank) + ": " + e.what();
      launch.hint = "is the disk under " + logs.attempt_dir() +
                    " full, or are too many files open (ulimit -n)? try another --log-dir";
      launch.exit_code = kExitCannotStart;
      return launch;
    }
    Started started;
    try {
      started = start_rank(argv.data(), envp.data(), child_mask, streams);
    } catch (const std::system_error& e) {
      RankLogs::close_parent_copies(streams);
      launch.error = "could not start rank " + std::to_string(rank) + ": " + e.what();
      launch.hint =
          "this machine may be out of processes or memory (see ulimit -u); try fewer "
          "ranks";
      launch.exit_code = kExitCannotStart;
      return launch;
    }
    RankLogs::close_parent_copies(streams);  // the rank has its own copies now
    if (started.exec_errno != 0) {
      launch.error = "cannot run " + what_runs(o) + ": " + std::strerror(started.exec_errno);
      launch.hint = exec_hint(o, started.exec_errno);
      launch.exit_code = kExitUsage;
      return launch;
    }
    launch.started.push_back({rank, local_rank, started.pid});
  }
  return launch;
}

}  // namespace ddprun
