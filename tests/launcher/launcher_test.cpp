// Launcher tests: the real ddprun binary, run on probe_worker.
//
// They check what every rank is told (its variables and arguments), and what happens when
// things go wrong: one failed rank, or one signal, must stop every rank within seconds, and
// ddprun must say which rank failed and how. A bad command line must fail fast with a message
// naming the flag and the value.
//
// The tests must never hang, whatever ddprun does: each ddprun runs in its own process group,
// with a deadline, and at the deadline that group is killed (ddprun; its ranks, each in a group
// of its own, die with it by PR_SET_PDEATHSIG) and the test fails. The tests of "nothing left
// behind" find every process of a job by a marker in its environment, and kill what they find. A
// stop within 5 s is what ddprun promises, so that bound is asserted.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "launcher_variables.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr auto kDeadline = 20s;       // no run in these tests comes near it unless ddprun is broken
constexpr double kStopLimitS = 5.0;   // a failure or a signal stops every rank within this
constexpr double kUsageLimitS = 2.0;  // a bad command line fails at once: nothing is started

// What one ddprun run left behind.
struct Result {
  int exit_code = -1;  // -1: ddprun did not exit by itself
  std::string out;
  std::string err;
  double seconds = 0;  // from the start, or from the first signal the test sent, to the exit
};

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

// One ddprun process, its output collected as it arrives.
class Ddprun {
 public:
  explicit Ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
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

  Ddprun(const Ddprun&) = delete;
  Ddprun& operator=(const Ddprun&) = delete;

  // A test that stops early (a failed ASSERT) still leaves no process behind.
  ~Ddprun() {
    if (!reaped_) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    close_fd(out_fd_);
    close_fd(err_fd_);
  }

  // Reads until `n` probe lines have appeared on stdout: every rank has started and printed.
  bool wait_for_ranks(int n) {
    return wait_until([&] { return std::count(out_.begin(), out_.end(), '\n') >= n; });
  }

  bool wait_for_stderr(const std::string& text) {
    return wait_until([&] { return err_.find(text) != std::string::npos; });
  }

  // To ddprun alone, as `kill PID` would. The first one starts the clock of Result::seconds.
  void send(int signal) {
    if (!signalled_) started_ = Clock::now();
    signalled_ = true;
    ::kill(pid_, signal);
  }

  // Reads to end-of-file on both pipes, then reaps ddprun. Reading first matters: a rank that
  // outlives ddprun keeps the pipes open, and is caught at the deadline.
  Result finish() {
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

 private:
  template <typename Ready>
  bool wait_until(Ready ready) {
    const Clock::time_point deadline = Clock::now() + kDeadline;
    while (!ready() && (out_fd_ >= 0 || err_fd_ >= 0) && Clock::now() < deadline) {
      read_some(deadline);
    }
    return ready();
  }

  void read_some(Clock::time_point deadline) {
    pollfd fds[] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};  // poll skips a closed (-1) fd
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (::poll(fds, 2, static_cast<int>(std::max<long>(left.count(), 0))) <= 0) return;
    read_from(out_fd_, out_, fds[0].revents);
    read_from(err_fd_, err_, fds[1].revents);
  }

  static void read_from(int& fd, std::string& into, short revents) {
    if (fd < 0 || revents == 0) return;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      into.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      close_fd(fd);
    }
  }

  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  Clock::time_point started_;
  bool signalled_ = false;
  bool reaped_ = false;
};

Result run_ddprun(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  Ddprun ddprun(args, env);
  return ddprun.finish();
}

// One probe_worker line: "probe: PID=.. RANK=.. ... argv=ARGS".
struct Probe {
  std::map<std::string, std::string> vars;
  std::string argv;
  const std::string& operator[](const std::string& name) const { return vars.at(name); }
};

// The probe lines in `out`, in order of RANK.
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

// No rank may outlive ddprun: each pid a probe printed must be gone once ddprun has exited.
void expect_every_probe_gone(const std::string& out) {
  for (const Probe& probe : probes_in(out)) {
    const pid_t pid = std::stoi(probe["PID"]);
    EXPECT_TRUE(::kill(pid, 0) != 0 && errno == ESRCH)
        << "rank " << probe["RANK"] << " (pid " << pid << ") is still running after ddprun exited";
  }
}

// ---- What every rank is told

TEST(Ddprun, GivesEachOfFourRanksItsRankAndTheSharedWorldSize) {
  const Result r = run_ddprun({"--nproc-per-node", "4", PROBE_PATH});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> ranks = probes_in(r.out);
  ASSERT_EQ(ranks.size(), 4u) << r.out;
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE("rank " + std::to_string(i));
    const Probe& p = ranks[i];
    EXPECT_EQ(p["RANK"], std::to_string(i));
    EXPECT_EQ(p["LOCAL_RANK"], std::to_string(i));
    EXPECT_EQ(p["WORLD_SIZE"], "4");
    EXPECT_EQ(p["LOCAL_WORLD_SIZE"], "4");
    EXPECT_EQ(p["GROUP_RANK"], "0");
    EXPECT_EQ(p["GROUP_WORLD_SIZE"], "1");
    EXPECT_EQ(p["ROLE_RANK"], std::to_string(i));
    EXPECT_EQ(p["ROLE_WORLD_SIZE"], "4");
    EXPECT_EQ(p["ROLE_NAME"], "default");
    EXPECT_EQ(p["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(p["MASTER_PORT"], "29500");
    EXPECT_EQ(p["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(p["TORCHELASTIC_MAX_RESTARTS"], "0");
    EXPECT_EQ(p["TORCHELASTIC_RUN_ID"], "none");
    EXPECT_EQ(p["OMP_NUM_THREADS"], "1");
    EXPECT_EQ(p["DIST_LAUNCHER"], "ddprun");
    EXPECT_EQ(p.argv, "");
  }
  EXPECT_TRUE(contains(r.err, "ddprun: setting OMP_NUM_THREADS=1 for each rank")) << r.err;
  EXPECT_TRUE(contains(
      r.err, "ddprun: starting 4 ranks (node 0 of 1, ranks 0-3), master 127.0.0.1:29500\n"))
      << r.err;
  EXPECT_EQ(count_of(r.err, "ddprun:"), 2) << "success should be quiet:\n" << r.err;
}

TEST(Ddprun, GivesAOneMachineJobAStoreTokenOfItsOwn) {
  const auto tokens = [](const Result& r) {
    std::vector<std::string> all;
    for (const Probe& p : probes_in(r.out)) all.push_back(p["DIST_STORE_TOKEN"]);
    return all;
  };
  const Result first = run_ddprun({"--nproc-per-node", "2", PROBE_PATH});
  const Result second = run_ddprun({"--nproc-per-node", "2", PROBE_PATH});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.err;
  const auto a = tokens(first), b = tokens(second);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(a[0].size(), 32u) << a[0];
  EXPECT_EQ(a[0].find_first_not_of("0123456789abcdef"), std::string::npos) << a[0];
  EXPECT_EQ(a[0], a[1]) << "every rank of a job has the same token";
  EXPECT_EQ(b[0], b[1]);
  EXPECT_NE(a[0], b[0]) << "each job a fresh one";
  // An exported token is kept; on several machines ddprun makes none (the nodes must agree).
  const Result kept = run_ddprun({"--nproc-per-node", "2", PROBE_PATH}, {"DIST_STORE_TOKEN=ours"});
  EXPECT_EQ(tokens(kept), (std::vector<std::string>{"ours", "ours"}));
  const Result nodes = run_ddprun({"--nnodes", "2", "--node-rank", "1", PROBE_PATH});
  EXPECT_EQ(tokens(nodes), (std::vector<std::string>{"<unset>"}));
}

TEST(Ddprun, StartsOneRankByDefaultAndLeavesItsThreadsAlone) {
  const Result r = run_ddprun({PROBE_PATH});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> ranks = probes_in(r.out);
  ASSERT_EQ(ranks.size(), 1u) << r.out;
  EXPECT_EQ(ranks[0]["RANK"], "0");
  EXPECT_EQ(ranks[0]["WORLD_SIZE"], "1");
  EXPECT_EQ(ranks[0]["OMP_NUM_THREADS"], "<unset>");
  EXPECT_TRUE(contains(r.err, "starting 1 rank (node 0 of 1, rank 0), master 127.0.0.1:29500"))
      << r.err;
  EXPECT_FALSE(contains(r.err, "OMP_NUM_THREADS")) << r.err;
}

TEST(Ddprun, NumbersRanksAcrossNodesFromTheNodeRank) {
  const Result r = run_ddprun({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2",
                               "--master-addr", "10.1.2.3", "--master-port", "29999", PROBE_PATH});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> ranks = probes_in(r.out);
  ASSERT_EQ(ranks.size(), 2u) << r.out;
  for (int local = 0; local < 2; ++local) {
    SCOPED_TRACE("local rank " + std::to_string(local));
    const Probe& p = ranks[local];
    EXPECT_EQ(p["RANK"], std::to_string(2 + local));  // node_rank * nproc_per_node + local_rank
    EXPECT_EQ(p["LOCAL_RANK"], std::to_string(local));
    EXPECT_EQ(p["ROLE_RANK"], std::to_string(2 + local));
    EXPECT_EQ(p["WORLD_SIZE"], "4");
    EXPECT_EQ(p["ROLE_WORLD_SIZE"], "4");
    EXPECT_EQ(p["LOCAL_WORLD_SIZE"], "2");
    EXPECT_EQ(p["GROUP_RANK"], "1");
    EXPECT_EQ(p["GROUP_WORLD_SIZE"], "2");
    EXPECT_EQ(p["MASTER_ADDR"], "10.1.2.3");
    EXPECT_EQ(p["MASTER_PORT"], "29999");
  }
  EXPECT_TRUE(contains(r.err, "starting 2 ranks (node 1 of 2, ranks 2-3), master 10.1.2.3:29999"))
      << r.err;
}

TEST(Ddprun, AcceptsTorchrunSpellingsWithUnderscoresAndEquals) {
  const Result dashes =
      run_ddprun({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2", "--master-addr",
                  "localhost", "--master-port", "29501", "--grace-period", "2", PROBE_PATH});
  const Result underscores = run_ddprun(
      {"--nnodes=2", "--node_rank=1", "--nproc_per_node", "2", "--master_addr=localhost",
       "--master_port", "29501", "--grace_period=2", "--no-python", "--no_python", PROBE_PATH});
  ASSERT_EQ(dashes.exit_code, 0) << dashes.err;
  ASSERT_EQ(underscores.exit_code, 0) << underscores.err;
  std::vector<Probe> a = probes_in(dashes.out);
  std::vector<Probe> b = probes_in(underscores.out);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i].vars.erase("PID");
    b[i].vars.erase("PID");
    EXPECT_EQ(a[i].vars, b[i].vars);
    EXPECT_EQ(a[i]["RANK"], std::to_string(2 + i));
    EXPECT_EQ(a[i]["MASTER_ADDR"], "localhost");
    EXPECT_EQ(a[i]["MASTER_PORT"], "29501");
  }
}

TEST(Ddprun, KeepsTheRestOfTheEnvironmentButReplacesStaleLauncherVariables) {
  const Result r = run_ddprun({"--nproc-per-node", "2", PROBE_PATH},
                              {"DDPRUN_TEST_MARKER=kept", "OMP_NUM_THREADS=7", "RANK=99",
                               "WORLD_SIZE=99", "MASTER_PORT=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> ranks = probes_in(r.out);
  ASSERT_EQ(ranks.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(ranks[i]["DDPRUN_TEST_MARKER"], "kept");
    EXPECT_EQ(ranks[i]["OMP_NUM_THREADS"], "7");  // the user's choice wins over ddprun's default
    EXPECT_EQ(ranks[i]["RANK"], std::to_string(i));
    EXPECT_EQ(ranks[i]["WORLD_SIZE"], "2");
    EXPECT_EQ(ranks[i]["MASTER_PORT"], "29500");
  }
  EXPECT_FALSE(contains(r.err, "OMP_NUM_THREADS")) << r.err;
}

// torch.distributed.launch passes the local rank right after the script, before the script's
// own arguments: "--local-rank=N" from torch 2.0, "--local_rank=N" in 1.x; torchrun passes none.
TEST(Ddprun, PassesTheLocalRankArgumentWhereAndAsTorchsLaunchDoesOnlyWhenAsked) {
  struct Case {
    std::vector<std::string> flags;
    std::string rank0_argv, rank1_argv;
  };
  const std::vector<Case> cases = {
      {{}, "--sleep 0", "--sleep 0"},
      {{"--local-rank-arg"}, "--local-rank=0 --sleep 0", "--local-rank=1 --sleep 0"},
      {{"--local-rank-arg=dash"}, "--local-rank=0 --sleep 0", "--local-rank=1 --sleep 0"},
      {{"--local-rank-arg=underscore"}, "--local_rank=0 --sleep 0", "--local_rank=1 --sleep 0"},
      {{"--local_rank_arg=underscore"}, "--local_rank=0 --sleep 0", "--local_rank=1 --sleep 0"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"--nproc-per-node", "2"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), {PROBE_PATH, "--sleep", "0"});
    SCOPED_TRACE(c.flags.empty() ? "no flag" : c.flags[0]);
    const Result r = run_ddprun(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::vector<Probe> p = probes_in(r.out);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].argv, c.rank0_argv);
    EXPECT_EQ(p[1].argv, c.rank1_argv);
  }
}

TEST(Ddprun, PassesEverythingAfterProgramToTheProgram) {
  const Result after_program = run_ddprun({PROBE_PATH, "--nproc-per-node", "9", "--bogus"});
  ASSERT_EQ(after_program.exit_code, 0) << after_program.err;
  const std::vector<Probe> a = probes_in(after_program.out);
  ASSERT_EQ(a.size(), 1u);  // --nproc-per-node 9 was PROGRAM's, not ddprun's
  EXPECT_EQ(a[0].argv, "--nproc-per-node 9 --bogus");

  const Result after_dashes = run_ddprun({"--nproc-per-node", "2", "--", PROBE_PATH, "--", "-x"});
  ASSERT_EQ(after_dashes.exit_code, 0) << after_dashes.err;
  const std::vector<Probe> b = probes_in(after_dashes.out);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].argv, "-- -x");
}

TEST(Ddprun, StandalonePicksAFreePortOnLoopback) {
  const Result r = run_ddprun({"--standalone", "--nproc-per-node", "2", PROBE_PATH});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> ranks = probes_in(r.out);
  ASSERT_EQ(ranks.size(), 2u) << r.out;
  EXPECT_EQ(ranks[0]["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(ranks[0]["MASTER_PORT"], ranks[1]["MASTER_PORT"]);  // every rank meets at one place
  const int port = std::stoi(ranks[0]["MASTER_PORT"]);
  EXPECT_NE(port, 29500);
  ASSERT_TRUE(port > 0 && port <= 65535);
  EXPECT_TRUE(
      contains(r.err, "master 127.0.0.1:" + std::to_string(port) + " (picked by --standalone)"))
      << r.err;

  // Free means rank 0 could listen there: try it.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << "port " << port << ": " << std::strerror(errno);
  ::close(fd);
}

// ---- One failure stops everyone

TEST(Ddprun, StopsTheOtherRanksWhenOneExitsNonZero) {
  const Result r =
      run_ddprun({"--nproc-per-node", "4", PROBE_PATH, "--exit-on-rank", "2:3", "--sleep", "60"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_TRUE(contains(r.err, "ddprun: rank 2 (local_rank 2, pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, ") exited with code 3; stopping the other 3 ranks\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun: ---- summary ----\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun:   rank 0  stopped by ddprun (SIGTERM)\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun:   rank 2  exit code 3   <- first failure\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun: first failure: rank 2 exited with code 3; ddprun exits 3\n"))
      << r.err;
  expect_every_probe_gone(r.out);
}

// On the second of two machines a rank's number is not its local rank: the second machine's
// local rank 1 is rank 3, and every line names rank 3 (the first with its local rank beside).
// The probes talk to no one, so this ddprun needs no first machine.
TEST(Ddprun, NamesTheFailedRankByItsGlobalRankOnTheSecondMachine) {
  const Result r = run_ddprun({"--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2",
                               PROBE_PATH, "--exit-on-rank", "3:3", "--sleep", "60"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  for (const std::string line :
       {"ddprun: rank 3 (local_rank 1, pid ", ") exited with code 3; stopping the other rank\n",
        "ddprun:   rank 2  stopped by ddprun (SIGTERM)\n",
        "ddprun:   rank 3  exit code 3   <- first failure\n",
        "ddprun: first failure: rank 3 exited with code 3; ddprun exits 3\n"}) {
    EXPECT_TRUE(contains(r.err, line)) << r.err;
  }
  expect_every_probe_gone(r.out);
}

TEST(Ddprun, ReportsARankKilledBySignalAndExits128PlusTheSignal) {
  const Result r =
      run_ddprun({"--nproc-per-node", "4", PROBE_PATH, "--sigkill-on-rank", "1", "--sleep", "60"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_TRUE(contains(r.err, "ddprun: rank 1 (local_rank 1, pid ")) << r.err;
  EXPECT_TRUE(contains(r.err, "was killed by signal 9 (SIGKILL); stopping the other 3 ranks"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1  killed by signal 9 (SIGKILL)   <- first failure")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 3  stopped by ddprun (SIGTERM)")) << r.err;
  EXPECT_TRUE(contains(r.err, "out-of-memory")) << r.err;  // the hint for an unexplained SIGKILL
  expect_every_probe_gone(r.out);
}

// A stopped rank is the cause the first failure hides: the others time out waiting for it.
TEST(Ddprun, NamesARankThatWasStoppedWhenTheFirstFailureCame) {
  // Rank 0 fails after 1.5 s: rank 2 must have started and stopped itself by then, also under
  // ThreadSanitizer on a loaded machine (at 0.1 s it sometimes had not).
  const Result r = run_ddprun({"--nproc-per-node", "3", PROBE_PATH, "--stop-on-rank", "2",
                               "--exit-on-rank", "0:1", "--fail-after", "1.5", "--sleep", "60"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_TRUE(contains(r.err, "rank 0  exit code 1   <- first failure\n")) << r.err;
  EXPECT_TRUE(contains(r.err,
                       "rank 2  stopped by ddprun (SIGTERM)   <- stopped before the "
                       "first failure: likely cause\n"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun: hint: rank 2 had been stopped (SIGSTOP) for ")) << r.err;
  // SIGCONT after SIGTERM: the stopped rank ended within the grace period, without SIGKILL.
  EXPECT_FALSE(contains(r.err, "sending SIGKILL")) << r.err;
  expect_every_probe_gone(r.out);
}

TEST(Ddprun, WaitsForEveryRankWhenOneFinishesEarlyWithExitCode0) {
  const Result r =
      run_ddprun({"--nproc-per-node", "3", PROBE_PATH, "--exit-on-rank", "0:0", "--sleep", "0.5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(probes_in(r.out).size(), 3u);
  EXPECT_GE(r.seconds, 0.5);  // the other ranks were allowed to finish their sleep
  EXPECT_FALSE(contains(r.err, "summary")) << r.err;
}

// ---- Signals sent to ddprun reach every rank

TEST(Ddprun, PassesSigintSigtermAndSighupOnToEveryRank) {
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) {
    const std::string name = signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "SIGHUP";
    SCOPED_TRACE(name);
    Ddprun ddprun({"--nproc-per-node", "4", PROBE_PATH, "--sleep", "60"});
    ASSERT_TRUE(ddprun.wait_for_ranks(4));
    ddprun.send(signal);
    const Result r = ddprun.finish();
    EXPECT_EQ(r.exit_code, 128 + signal) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_TRUE(
        contains(r.err, "ddprun: received " + name + "; passing it on to the 4 running ranks"))
        << r.err;
    EXPECT_EQ(count_of(r.err, "stopped by ddprun (" + name + ")"), 4) << r.err;
    EXPECT_TRUE(
        contains(r.err, "stopped by " + name + "; ddprun exits " + std::to_string(128 + signal)))
        << r.err;
    expect_every_probe_gone(r.out);
  }
}

TEST(Ddprun, SigkillsRanksThatIgnoreSigtermAfterTheGracePeriod) {
  Ddprun ddprun({"--nproc-per-node", "4", "--grace-period", "1", PROBE_PATH, "--ignore-sigterm",
                 "--sleep", "60"});
  ASSERT_TRUE(ddprun.wait_for_ranks(4));
  ddprun.send(SIGTERM);
  const Result r = ddprun.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_GE(r.seconds, 0.95);  // the ranks did get their grace period
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_TRUE(contains(r.err, "4 ranks still running after the 1 s grace period; sending SIGKILL"))
      << r.err;
  EXPECT_EQ(count_of(r.err, "killed by ddprun (SIGKILL)"), 4) << r.err;
  expect_every_probe_gone(r.out);
}

TEST(Ddprun, ASecondSignalSkipsTheGracePeriod) {
  Ddprun ddprun({"--nproc-per-node", "2", "--grace-period", "30", PROBE_PATH, "--ignore-sigterm",
                 "--sleep", "60"});
  ASSERT_TRUE(ddprun.wait_for_ranks(2));
  ddprun.send(SIGTERM);
  // Wait until ddprun has taken the first one: two pending SIGTERMs would merge into one.
  ASSERT_TRUE(ddprun.wait_for_stderr("received SIGTERM"));
  ddprun.send(SIGINT);
  const Result r = ddprun.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;  // the first signal decides
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_TRUE(contains(r.err, "received SIGINT while stopping; sending SIGKILL to the 2 ranks"))
      << r.err;
  expect_every_probe_gone(r.out);
}

// ---- No process of the job is left behind, grandchildren included

// The processes whose environment holds `entry` ("NAME=value"), found in /proc: ddprun passes its
// environment on to the ranks, and they to their children, so a marker given to ddprun finds
// every process of that one job, even one that moved to a session of its own.
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

// A marker of its own for every job of a test.
std::string new_job_marker() {
  static int jobs = 0;
  return "DDPRUN_TEST_JOB=" + std::to_string(::getpid()) + "_" + std::to_string(++jobs);
}

// Once ddprun has exited, nothing of its job may still run; what does is reported, and killed so
// that the test leaves nothing behind either.
void expect_nothing_of_the_job_left(const std::string& marker) {
  const std::vector<pid_t> left = processes_with(marker);
  for (const pid_t pid : left) {
    ADD_FAILURE() << "process " << pid << " of the job is still running after ddprun exited";
    ::kill(pid, SIGKILL);
  }
}

// Each rank (sh) starts a child that outlives it unless stopped, prints "started", then does
// `then`. The child's output goes to /dev/null, so that it cannot hold the test's pipes open:
// a child left behind is found by its marker, not by a test that waits for end-of-file.
std::vector<std::string> ranks_with_a_child(int nproc, const std::string& before,
                                            const std::string& then,
                                            const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {"--nproc-per-node", std::to_string(nproc)};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(),
              {"sh", "-c", before + "sleep 60 >/dev/null 2>&1 & echo started; " + then});
  return args;
}

// The issue that made ranks leaders of their own process groups: a rank's own children were not
// stopped, and ddprun exited while they ran on (holding its stdout).
TEST(DdprunHygiene, StopsEveryRanksChildrenWhenOneRankFailsAt1_2And4Ranks) {
  for (const int nproc : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string marker = new_job_marker();
    const Result r = run_ddprun(
        ranks_with_a_child(nproc, "",
                           "if [ \"$RANK\" = $((WORLD_SIZE - 1)) ]; then sleep 0.3; exit 3; fi; "
                           "sleep 60"),
        {marker});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_EQ(count_of(r.out, "started\n"), nproc) << r.out;
    expect_nothing_of_the_job_left(marker);
  }
}

TEST(DdprunHygiene, StopsEveryRanksChildrenWhenDdprunGetsSigtermOrSigint) {
  for (const int signal : {SIGTERM, SIGINT}) {
    for (const int nproc : {1, 2, 4}) {
      SCOPED_TRACE(std::to_string(nproc) + " ranks, signal " + std::to_string(signal));
      const std::string marker = new_job_marker();
      // sh -c catches SIGINT, and may outlive it: the grace period, kept short, ends that too.
      Ddprun ddprun(ranks_with_a_child(nproc, "", "sleep 60", {"--grace-period", "1"}), {marker});
      ASSERT_TRUE(ddprun.wait_for_ranks(nproc));
      ddprun.send(signal);
      const Result r = ddprun.finish();
      EXPECT_EQ(r.exit_code, 128 + signal) << r.err;
      EXPECT_LT(r.seconds, kStopLimitS);
      expect_nothing_of_the_job_left(marker);
    }
  }
}

// ddprun killed by SIGKILL can stop nothing; the kernel does it for it: each rank asks for
// SIGKILL when its parent dies (PR_SET_PDEATHSIG), in the child ddprun makes, before its exec.
// Each rank execs its sleep itself, so that the rank is what must die.
TEST(DdprunHygiene, RanksDieWithDdprunWhenItIsKilledBySigkillAt1_2And4Ranks) {
  for (const int nproc : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string marker = new_job_marker();
    Ddprun ddprun(
        {"--nproc-per-node", std::to_string(nproc), "sh", "-c", "echo started; exec sleep 60"},
        {marker});
    ASSERT_TRUE(ddprun.wait_for_ranks(nproc));
    // ddprun and every rank, seen at least once: a rank in the middle of its exec has no
    // environment to read in /proc for a moment, so a count can come out low, never high.
    bool all_there = false;
    for (int i = 0; i < 200 && !all_there; ++i) {
      all_there = processes_with(marker).size() >= static_cast<std::size_t>(nproc + 1);
      if (!all_there) std::this_thread::sleep_for(10ms);
    }
    ASSERT_TRUE(all_there);
    ddprun.send(SIGKILL);
    const Result r = ddprun.finish();     // end-of-file on the pipes only once every rank is gone
    EXPECT_EQ(r.exit_code, -1) << r.err;  // killed: no exit code
    EXPECT_LT(r.seconds, kStopLimitS);
    expect_nothing_of_the_job_left(marker);
  }
}

TEST(DdprunHygiene, SigkillsRanksAndChildrenThatIgnoreSigtermAtTheDeadline) {
  for (const int nproc : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string marker = new_job_marker();
    // `trap "" TERM` ignores SIGTERM in the shell, and in the child it starts (an ignored
    // signal stays ignored across fork and exec).
    Ddprun ddprun(
        ranks_with_a_child(nproc, "trap \"\" TERM; ", "sleep 60", {"--grace-period", "1"}),
        {marker});
    ASSERT_TRUE(ddprun.wait_for_ranks(nproc));
    ddprun.send(SIGTERM);
    const Result r = ddprun.finish();
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    EXPECT_GE(r.seconds, 0.95);  // the grace period was given
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_TRUE(contains(r.err, "still running after the 1 s grace period; sending SIGKILL"))
        << r.err;
    expect_nothing_of_the_job_left(marker);
  }
}

// A rank that succeeds may still leave a child running: it is stopped like the rest (SIGTERM,
// then SIGKILL after the grace period), ddprun says so, and the exit code stays the ranks' own.
TEST(DdprunHygiene, StopsWhatRanksLeaveRunningWhenTheyExit0) {
  for (const int nproc : {1, 2, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string marker = new_job_marker();
    const Result r = run_ddprun(
        ranks_with_a_child(nproc, "trap \"\" TERM; ", "exit 0", {"--grace-period", "0.5"}),
        {marker});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_TRUE(contains(r.err, "every rank has exited, but they left ")) << r.err;
    EXPECT_TRUE(contains(r.err, "grace period; sending SIGKILL")) << r.err;
    expect_nothing_of_the_job_left(marker);
  }
}

// A job whose ranks leave nothing behind ends when its last rank does: no grace period is spent.
TEST(DdprunHygiene, EndsAtOnceWhenTheRanksLeaveNothingBehind) {
  const Result r = run_ddprun({"--nproc-per-node", "4", "--grace-period", "5", PROBE_PATH});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.seconds, 2.0);
  EXPECT_FALSE(contains(r.err, "left")) << r.err;
}

// ---- Mistakes on the command line

TEST(Ddprun, RejectsBadFlagValuesWithExitCode2NamingTheFlagAndValue) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> message;  // parts the error line must contain
  };
  const std::vector<Case> cases = {
      {{"--nproc-per-node", "0", PROBE_PATH}, {"--nproc-per-node", "'0'", "1 to 1024"}},
      {{"--nproc-per-node", "1025", PROBE_PATH}, {"--nproc-per-node", "'1025'"}},
      {{"--nproc_per_node=abc", PROBE_PATH}, {"--nproc_per_node", "'abc'"}},
      {{"--nproc-per-node", "4x", PROBE_PATH}, {"--nproc-per-node", "'4x'"}},
      {{"--nproc-per-node", "auto", PROBE_PATH}, {"--nproc-per-node", "'auto'"}},
      {{"--nproc-per-node=", PROBE_PATH}, {"--nproc-per-node", "''"}},
      {{"--nnodes", "0", PROBE_PATH}, {"--nnodes", "'0'"}},
      {{"--nnodes", "1:4", PROBE_PATH}, {"--nnodes", "'1:4'", "MIN:MAX"}},
      {{"--nnodes", "2", "--node-rank", "2", PROBE_PATH}, {"--node-rank", "'2'", "--nnodes (2)"}},
      {{"--node_rank=-1", PROBE_PATH}, {"--node_rank", "'-1'"}},
      {{"--master-port", "0", PROBE_PATH}, {"--master-port", "'0'", "1 to 65535"}},
      {{"--master_port=65536", PROBE_PATH}, {"--master_port", "'65536'"}},
      {{"--master-port", "http", PROBE_PATH}, {"--master-port", "'http'"}},
      {{"--master-addr=", PROBE_PATH}, {"--master-addr", "''"}},
      {{"--grace-period", "0", PROBE_PATH}, {"--grace-period", "'0'"}},
      {{"--grace-period", "61", PROBE_PATH}, {"--grace-period", "'61'", "at most 60"}},
      {{"--grace_period=-1", PROBE_PATH}, {"--grace_period", "'-1'"}},
      {{"--grace-period", "nan", PROBE_PATH}, {"--grace-period", "'nan'"}},
      {{"--standalone", "--nnodes", "2", PROBE_PATH}, {"--standalone", "--nnodes is 2"}},
      {{"--standalone", "--master-port", "1234", PROBE_PATH},
       {"--standalone", "--master-port '1234'"}},
      {{"--standalone=yes", PROBE_PATH}, {"--standalone", "'yes'"}},
      {{"--local-rank-arg=yes", PROBE_PATH}, {"--local-rank-arg", "'yes'", "dash or underscore"}},
      {{"--local-rank-arg=", PROBE_PATH}, {"--local-rank-arg", "''"}},
      {{"--local_rank_arg=Underscore", PROBE_PATH}, {"--local_rank_arg", "'Underscore'"}},
      {{"--redirects", "4", PROBE_PATH}, {"--redirects", "'4'", "0, 1, 2 or 3"}},
      {{"--redirects", "01", PROBE_PATH}, {"--redirects", "'01'"}},
      {{"--tee=", PROBE_PATH}, {"--tee", "''"}},
      {{"-t", "both", PROBE_PATH}, {"-t", "'both'"}},
      {{"-r", "0:1,", PROBE_PATH}, {"-r", "'0:1,'", "LOCAL_RANK:VALUE"}},
      {{"--redirects", "0:4", PROBE_PATH}, {"--redirects", "'0:4'"}},
      {{"--redirects", ":3", PROBE_PATH}, {"--redirects", "':3'"}},
      {{"--tee", "0:1,0:2", PROBE_PATH}, {"--tee", "local rank 0 twice"}},
      {{"--nproc-per-node", "2", "--tee", "0:3,2:1", PROBE_PATH},
       {"--tee", "local rank 2", "--nproc-per-node is 2", "0 to 1"}},
      {{"--log-dir=", PROBE_PATH}, {"--log-dir", "''"}},
      {{"--bogus", PROBE_PATH}, {"unknown flag '--bogus'"}},
      {{"--max-restarts", "-1", PROBE_PATH}, {"--max-restarts", "'-1'", "0 to 1000"}},
      {{"--max_restarts=three", PROBE_PATH}, {"--max_restarts", "'three'"}},
      {{"--max-restarts", "1001", PROBE_PATH}, {"--max-restarts", "'1001'"}},
      {{"--max-restarts"}, {"--max-restarts needs a value"}},
      {{"--monitor-interval", "0", PROBE_PATH}, {"--monitor-interval", "'0'"}},
      {{"--monitor_interval=nan", PROBE_PATH}, {"--monitor_interval", "'nan'"}},
      {{"--monitor-interval", "3601", PROBE_PATH}, {"--monitor-interval", "'3601'", "3600"}},
      {{"--rdzv-backend", "c10d", PROBE_PATH}, {"unknown flag '--rdzv-backend'"}},
      {{"--agent-port", "29500", "--nnodes", "2", PROBE_PATH},
       {"--agent-port '29500' is --master-port too"}},
      {{"--nnodes", "2", "--max-restarts", "1", "--master-port", "65535", PROBE_PATH},
       {"--master-port 65535 leaves no port", "--agent-port"}},
      {{"--join-timeout", "0", PROBE_PATH}, {"--join-timeout", "'0'"}},
      {{"--exit-barrier-timeout", "x", PROBE_PATH}, {"--exit-barrier-timeout", "'x'"}},
      {{"--nproc-per-node"}, {"--nproc-per-node needs a value"}},
      {{}, {"missing PROGRAM"}},
      {{"--nproc-per-node", "2"}, {"missing PROGRAM"}},
      {{"--nproc-per-node", "2", "--"}, {"missing PROGRAM"}},
  };
  for (const Case& c : cases) {
    std::string command = "ddprun";
    for (const std::string& arg : c.args) command += " '" + arg + "'";
    SCOPED_TRACE(command);
    const Result r = run_ddprun(c.args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_LT(r.seconds, kUsageLimitS);
    EXPECT_EQ(r.out, "");  // nothing was started
    EXPECT_EQ(count_of(r.err, "ddprun: error: "), 1) << r.err;
    EXPECT_EQ(count_of(r.err, "ddprun: hint: "), 1) << r.err;
    for (const std::string& part : c.message) EXPECT_TRUE(contains(r.err, part)) << r.err;
  }
}

TEST(Ddprun, ReportsAProgramThatDoesNotExistOnceAndExits2) {
  for (const std::string program :
       {"/nonexistent/ddprun-test-program", "ddprun-test-no-such-program"}) {
    SCOPED_TRACE(program);
    const Result r = run_ddprun({"--nproc-per-node", "4", program});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_LT(r.seconds, kUsageLimitS);
    EXPECT_EQ(count_of(r.err, "cannot run"), 1) << r.err;
    EXPECT_TRUE(
        contains(r.err, "ddprun: error: cannot run " + program + ": No such file or directory\n"))
        << r.err;
    EXPECT_FALSE(contains(r.err, "summary")) << r.err;  // no rank had started
  }
}

TEST(Ddprun, ReportsAFileThatIsNotExecutableOnce) {
  std::string path =
      (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + std::string("/ddprun-test-XXXXXX");
  const int fd = ::mkstemp(path.data());
  ASSERT_GE(fd, 0);
  ::close(fd);
  ::chmod(path.c_str(), 0644);
  const Result r = run_ddprun({"--nproc-per-node", "2", path});
  ::unlink(path.c_str());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "cannot run"), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot run " + path + ": Permission denied")) << r.err;
  EXPECT_TRUE(contains(r.err, "chmod +x")) << r.err;
}

// ---- Per-rank logs: --log-dir, --redirects, --tee

// A new folder for one test's logs, removed with everything in it at the end.
class TempFolder {
 public:
  TempFolder() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp ? tmp : "/tmp") + "/ddprun-logs-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempFolder() { std::filesystem::remove_all(path_); }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The entries of `folder`, by name, sorted.
std::vector<std::string> entries_of(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// torchrun's layout: LOG_DIR/none_XXXXXX/attempt_0/<local_rank>/. Returns the attempt folder, or
// "" (with a failure) when the layout is not that.
std::string attempt_folder(const std::string& log_dir, int nproc) {
  const std::vector<std::string> runs = entries_of(log_dir);
  if (runs.size() != 1 || !runs[0].starts_with("none_") || runs[0].size() != 11) {
    ADD_FAILURE() << "want one folder none_XXXXXX in " << log_dir << ", found "
                  << ::testing::PrintToString(runs);
    return "";
  }
  const std::string run = log_dir + "/" + runs[0];
  EXPECT_EQ(entries_of(run), std::vector<std::string>{"attempt_0"});
  std::vector<std::string> ranks;
  for (int i = 0; i < nproc; ++i) ranks.push_back(std::to_string(i));
  std::sort(ranks.begin(), ranks.end());
  EXPECT_EQ(entries_of(run + "/attempt_0"), ranks);
  return run + "/attempt_0";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// What probe_worker --lines N writes: its probe line first on stdout.
std::string expected_stdout_lines(int rank, int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "rank " + std::to_string(rank) + " out " + std::to_string(i) + "\n";
  return text;
}
std::string expected_stderr(int rank, int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += "rank " + std::to_string(rank) + " err " + std::to_string(i) + "\n";
  return text + "rank " + std::to_string(rank) + " unterminated";
}

// The lines of `text` that start with `prefix`, in order.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    if (line.starts_with(prefix)) lines.push_back(line);
  }
  return lines;
}

TEST(DdprunLogs, RedirectsEachRanksStdoutAndStderrToItsOwnFilesInTorchrunsLayout) {
  TempFolder logs;
  constexpr int kLines = 50;
  const Result r = run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "--redirects",
                               "3", PROBE_PATH, "--lines", std::to_string(kLines)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "") << "--redirects 3 sends stdout to the files only";
  EXPECT_FALSE(contains(r.err, "rank 0 err")) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err, "ddprun: logs in " + attempt +
                                  "/LOCAL_RANK/: stdout.log of every rank; stderr.log of every "
                                  "rank\n"))
      << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string folder = attempt + "/" + std::to_string(rank);
    const std::string out = read_file(folder + "/stdout.log");
    const std::vector<Probe> probes = probes_in(out);
    ASSERT_EQ(probes.size(), 1u) << out;
    EXPECT_EQ(probes[0]["RANK"], std::to_string(rank));
    EXPECT_EQ(out.substr(out.find('\n') + 1), expected_stdout_lines(rank, kLines));
    EXPECT_EQ(read_file(folder + "/stderr.log"), expected_stderr(rank, kLines));
  }
}

TEST(DdprunLogs, TeeWritesTheFilesAndCopiesWholeLinesToTheTerminal) {
  TempFolder logs;
  constexpr int kLines = 300;
  const Result r = run_ddprun({"--nproc_per_node=3", "--log_dir=" + logs.path(), "-t", "3",
                               PROBE_PATH, "--lines", std::to_string(kLines)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err,
                       "stdout.log of every rank (also shown here); stderr.log of every "
                       "rank (also shown here)"))
      << r.err;
  for (int rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string who = "rank " + std::to_string(rank);
    const std::string folder = attempt + "/" + std::to_string(rank);
    EXPECT_EQ(read_file(folder + "/stderr.log"), expected_stderr(rank, kLines));
    // On the terminal: every line once, whole and in order, whatever the other ranks wrote.
    std::vector<std::string> want;
    for (int i = 0; i < kLines; ++i) want.push_back(who + " out " + std::to_string(i));
    EXPECT_EQ(lines_starting(r.out, who + " "), want);
    want.clear();
    for (int i = 0; i < kLines; ++i) want.push_back(who + " err " + std::to_string(i));
    want.push_back(who + " unterminated");  // the file keeps it as it was; the terminal gets a '\n'
    EXPECT_EQ(lines_starting(r.err, who + " "), want);
  }
  EXPECT_EQ(probes_in(r.out).size(), 3u) << r.out;
  // Nothing but whole lines: ranks' lines and ddprun's own.
  std::size_t start = 0;
  for (std::size_t end; (end = r.err.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = r.err.substr(start, end - start);
    EXPECT_TRUE(line.starts_with("rank ") || line.starts_with("ddprun: ")) << "torn: " << line;
  }
}

TEST(DdprunLogs, RedirectsOnlyTheStreamsOfTheLocalRanksNamed) {
  TempFolder logs;
  const Result r = run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "-r", "0:1,2:2",
                               PROBE_PATH, "--lines", "5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_TRUE(contains(r.err, "stdout.log of local rank 0; stderr.log of local rank 2\n")) << r.err;
  // Rank 0: stdout to its file, stderr here. Rank 1: both here. Rank 2: stderr to its file.
  EXPECT_EQ(entries_of(attempt + "/0"), std::vector<std::string>{"stdout.log"});
  EXPECT_EQ(entries_of(attempt + "/1"), std::vector<std::string>{});
  EXPECT_EQ(entries_of(attempt + "/2"), std::vector<std::string>{"stderr.log"});
  EXPECT_TRUE(contains(read_file(attempt + "/0/stdout.log"), "rank 0 out 4\n"));
  EXPECT_EQ(read_file(attempt + "/2/stderr.log"), expected_stderr(2, 5));
  EXPECT_EQ(lines_starting(r.out, "rank 0 ").size(), 0u) << r.out;
  EXPECT_EQ(lines_starting(r.out, "rank 1 ").size(), 5u) << r.out;
  EXPECT_EQ(lines_starting(r.out, "rank 2 ").size(), 5u) << r.out;
  EXPECT_TRUE(contains(r.err, "rank 0 err 4\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 err 4\n")) << r.err;
  EXPECT_FALSE(contains(r.err, "rank 2 err")) << r.err;
}

TEST(DdprunLogs, KeepsACrashingRanksLastLinesAndShowsThemBeforeTheFailure) {
  TempFolder logs;
  const Result r =
      run_ddprun({"--nproc-per-node", "3", "--log-dir", logs.path(), "--tee", "3", PROBE_PATH,
                  "--lines", "20", "--sigkill-on-rank", "1", "--sleep", "10"});
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  const std::string attempt = attempt_folder(logs.path(), 3);
  ASSERT_FALSE(attempt.empty());
  EXPECT_EQ(read_file(attempt + "/1/stderr.log"), expected_stderr(1, 20));
  EXPECT_TRUE(read_file(attempt + "/1/stdout.log").ends_with("rank 1 out 19\n"));
  // The crashed rank's last whole line comes before ddprun says it failed; its unterminated
  // last words are shown once every rank has exited (the file has them as they were).
  const std::size_t last_line = r.err.find("rank 1 err 19\n");
  const std::size_t notice = r.err.find("ddprun: rank 1 (local_rank 1");
  ASSERT_NE(last_line, std::string::npos) << r.err;
  ASSERT_NE(notice, std::string::npos) << r.err;
  EXPECT_LT(last_line, notice) << r.err;
  EXPECT_TRUE(contains(r.err, "rank 1 unterminated\n")) << r.err;
  EXPECT_TRUE(contains(r.err, "ddprun: each rank's own output: " + attempt + "/LOCAL_RANK/\n"))
      << r.err;
  expect_every_probe_gone(read_file(attempt + "/0/stdout.log"));
}

TEST(DdprunLogs, MakesAFolderUnderTmpdirWhenNoLogDirIsGiven) {
  TempFolder tmp;
  const Result r = run_ddprun({"--nproc-per-node", "2", "--redirects", "1", PROBE_PATH},
                              {"TMPDIR=" + tmp.path()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> made = entries_of(tmp.path());
  ASSERT_EQ(made.size(), 1u);
  EXPECT_TRUE(made[0].starts_with("ddprun_")) << made[0];
  const std::string attempt = attempt_folder(tmp.path() + "/" + made[0], 2);
  ASSERT_FALSE(attempt.empty());
  EXPECT_EQ(probes_in(read_file(attempt + "/1/stdout.log")).size(), 1u);
}

TEST(DdprunLogs, RefusesALogFolderItCannotCreateWithExitCode2) {
  TempFolder tmp;
  const std::string file = tmp.path() + "/a-file";
  std::ofstream(file) << "not a folder\n";
  for (const std::string& dir : {file, file + "/logs"}) {
    SCOPED_TRACE(dir);
    const Result r =
        run_ddprun({"--nproc-per-node", "2", "--log-dir", dir, "--tee", "3", PROBE_PATH});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");  // nothing was started
    EXPECT_TRUE(contains(r.err, "ddprun: error: cannot create the log folder '" + file)) << r.err;
    EXPECT_TRUE(contains(r.err, "Not a directory")) << r.err;
    EXPECT_EQ(count_of(r.err, "ddprun: hint: "), 1) << r.err;
  }
}

// ---- Restarts: --max-restarts

// A rank script that says which attempt it is, and fails on request: rank `rank` exits 3 while
// TORCHELASTIC_RESTART_COUNT is below `fail_until` (every attempt when it is large).
std::vector<std::string> attempt_script(int nproc, int max_restarts, int rank, int fail_until,
                                        const std::string& then = "sleep 60") {
  return {"--nproc-per-node",
          std::to_string(nproc),
          "--max-restarts",
          std::to_string(max_restarts),
          "sh",
          "-c",
          "echo \"rank $RANK attempt $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS\"; "
          "if [ \"$RANK\" = " +
              std::to_string(rank) + " ] && [ \"$TORCHELASTIC_RESTART_COUNT\" -lt " +
              std::to_string(fail_until) + " ]; then sleep 0.2; exit 3; fi; " + then};
}

// A torchrun line pastes: --monitor_interval is accepted (ddprun wakes when a rank exits and
// needs no polling interval), and a job that succeeds at once runs its single attempt.
TEST(DdprunRestarts, TellsEachRankTheMaxRestartsAndAcceptsTorchrunsSpellings) {
  const Result r =
      run_ddprun({"--nproc_per_node=2", "--max_restarts=3", "--monitor_interval=0.5", PROBE_PATH});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<Probe> probes = probes_in(r.out);
  ASSERT_EQ(probes.size(), 2u) << r.out;
  for (const Probe& p : probes) {
    EXPECT_EQ(p["TORCHELASTIC_RESTART_COUNT"], "0");
    EXPECT_EQ(p["TORCHELASTIC_MAX_RESTARTS"], "3");
  }
  EXPECT_FALSE(contains(r.err, "summary")) << r.err;
}

TEST(DdprunRestarts, RestartsEveryRankAfterAFailureAndTellsEachItsAttempt) {
  const std::string marker = new_job_marker();
  const Result r = run_ddprun(attempt_script(4, 3, 2, 1, "sleep 0.5"), {marker});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  for (int rank = 0; rank < 4; ++rank) {  // every rank of the second attempt ran, and knew it
    EXPECT_TRUE(contains(r.out, "rank " + std::to_string(rank) + " attempt 1 of 3\n")) << r.out;
  }
  EXPECT_FALSE(contains(r.out, "attempt 2")) << r.out;  // one restart was enough
  for (const std::string line :
       {"ddprun: rank 2 (local_rank 2, pid ", "exited with code 3; stopping the other 3 ranks\n",
        "ddprun: attempt 0 has ended; restarting every rank (restart 1 of 3)\n",
        "ddprun: ---- summary ----\n",
        "ddprun: attempt 0: first failure: rank 2 exited with code 3; restart 1 of 3\n",
        "ddprun: attempt 1: every rank exited 0; ddprun exits 0\n"}) {
    EXPECT_TRUE(contains(r.err, line)) << r.err;
  }
  expect_nothing_of_the_job_left(marker);
}

TEST(DdprunRestarts, GivesUpAfterMaxRestartsWithTheLastAttemptsExitCode) {
  for (const int nproc : {1, 3}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string marker = new_job_marker();
    const Result r = run_ddprun(attempt_script(nproc, 2, nproc - 1, 1000), {marker});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_EQ(count_of(r.err, "restarting every rank"), 2) << r.err;
    for (const std::string& line : std::vector<std::string>{
             "ddprun: attempt 0: first failure: rank " + std::to_string(nproc - 1) +
                 " exited with code 3; restart 1 of 2\n",
             "ddprun: attempt 1: first failure: rank " + std::to_string(nproc - 1) +
                 " exited with code 3; restart 2 of 2\n",
             "ddprun: attempt 2:\n",
             "ddprun: first failure: rank " + std::to_string(nproc - 1) +
                 " exited with code 3; no restart left (--max-restarts 2); ddprun exits 3\n"}) {
      EXPECT_TRUE(contains(r.err, line)) << r.err;
    }
    expect_nothing_of_the_job_left(marker);
  }
}

TEST(DdprunRestarts, DoesNotRestartWhenDdprunIsStoppedBySignal) {
  const std::string marker = new_job_marker();
  Ddprun ddprun(attempt_script(2, 3, 0, 0), {marker});
  ASSERT_TRUE(ddprun.wait_for_ranks(2));
  ddprun.send(SIGTERM);
  const Result r = ddprun.finish();
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
  EXPECT_LT(r.seconds, kStopLimitS);
  EXPECT_FALSE(contains(r.err, "restarting")) << r.err;
  EXPECT_TRUE(contains(r.err, "stopped by SIGTERM; ddprun exits 143\n")) << r.err;
  expect_nothing_of_the_job_left(marker);
}

TEST(DdprunRestarts, DoesNotRestartAProgramThatCannotRun) {
  const Result r = run_ddprun({"--max-restarts", "3", "/nonexistent/ddprun-test-program"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(count_of(r.err, "cannot run /nonexistent/ddprun-test-program"), 1) << r.err;
  EXPECT_FALSE(contains(r.err, "restarting")) << r.err;
}

// torchrun's layout: attempt_0, attempt_1, ... side by side, each with every local rank's files.
TEST(DdprunRestarts, WritesEachAttemptsLogsToItsOwnFolder) {
  const TempFolder logs;
  std::vector<std::string> args = {"--log-dir", logs.path(), "--redirects", "1"};
  const std::vector<std::string> job = attempt_script(2, 1, 1, 1, "exit 0");
  args.insert(args.end(), job.begin(), job.end());
  const Result r = run_ddprun(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> runs = entries_of(logs.path());
  ASSERT_EQ(runs.size(), 1u);
  const std::string run = logs.path() + "/" + runs[0];
  EXPECT_EQ(entries_of(run), (std::vector<std::string>{"attempt_0", "attempt_1"}));
  for (const int attempt : {0, 1}) {
    for (const int rank : {0, 1}) {
      const std::string file =
          run + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(rank) + "/stdout.log";
      EXPECT_EQ(read_file(file),
                "rank " + std::to_string(rank) + " attempt " + std::to_string(attempt) + " of 1\n")
          << file;
    }
  }
  EXPECT_TRUE(contains(r.err, "logs of attempt 1 in " + run + "/attempt_1/LOCAL_RANK/")) << r.err;
}

// ---- Help

TEST(Ddprun, ExplainsEveryFlagAndEveryVariableInItsHelp) {
  std::vector<std::string> parts = {"usage: ddprun [options] PROGRAM [ARGS...]",
                                    "--nproc-per-node",
                                    "--nnodes",
                                    "--node-rank",
                                    "--master-addr",
                                    "--master-port",
                                    "--standalone",
                                    "--local-rank-arg",
                                    "--local-rank=N",
                                    "--local-rank-arg=underscore",
                                    "--local_rank=N",
                                    "--grace-period",
                                    "--max-restarts",
                                    "--monitor-interval",
                                    "--agent-port",
                                    "--join-timeout",
                                    "--exit-barrier-timeout",
                                    "--log-dir",
                                    "--redirects",
                                    "--tee",
                                    "stdout.log",
                                    "--no-python",
                                    "--help",
                                    "--version",
                                    "OMP_NUM_THREADS",
                                    "Exit codes"};
  parts.insert(parts.end(), std::begin(dist::testing::kDdprunVariables),
               std::end(dist::testing::kDdprunVariables));
  for (const std::string flag : {"--help", "-h"}) {
    SCOPED_TRACE(flag);
    const Result r = run_ddprun({flag});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.err, "");
    for (const std::string& part : parts) {
      EXPECT_TRUE(contains(r.out, part)) << "--help does not mention " << part;
    }
  }
  const Result version = run_ddprun({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(version.out.starts_with("ddprun ")) << version.out;
}

}  // namespace
