// Chapter 10's driver plumbing (chapters/10_failure_modes/jobs.h): every job it starts ends,
// by itself or at the deadline, with its output and its exit code; a port it holds is taken.
#include "jobs.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dist/check.h>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace {

using namespace std::chrono_literals;

ch10::MachineCommand shell(const std::string& name, const std::string& script) {
  return {name, {"/bin/sh", "-c", script}};
}

// Whether binding 127.0.0.1:port fails because the port is in use.
bool port_in_use(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool in_use =
      bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 && errno == EADDRINUSE;
  close(fd);
  return in_use;
}

TEST(RunJob, KeepsEachMachinesLinesAndExitCode) {
  const auto job = ch10::run_job({shell("machine A", "echo a1; echo a2 >&2; exit 3"),
                                  shell("machine B", "printf 'b without a newline'")},
                                 {}, 10s);
  ASSERT_EQ(job.machines.size(), 2u);
  EXPECT_FALSE(job.timed_out);
  EXPECT_EQ(job.machines[0].name, "machine A");
  EXPECT_EQ(job.machines[0].output, "a1\na2\n");
  EXPECT_EQ(job.machines[0].exit_code, 3);
  EXPECT_EQ(job.machines[1].output, "b without a newline\n");
  EXPECT_EQ(job.machines[1].exit_code, 0);
}

TEST(RunJob, ReportsASignalAs128PlusItsNumber) {
  const auto job = ch10::run_job({shell("machine A", "kill -9 $$")}, {}, 10s);
  EXPECT_EQ(job.machines[0].exit_code, 128 + SIGKILL);
}

TEST(RunJob, SetsAndReplacesEnvironmentVariables) {
  ::setenv("CH10_JOBS_TEST_OLD", "inherited", 1);
  const auto job =
      ch10::run_job({shell("machine A", "echo \"$CH10_JOBS_TEST_OLD $CH10_JOBS_TEST_NEW\"")},
                    {{"CH10_JOBS_TEST_OLD", "replaced"}, {"CH10_JOBS_TEST_NEW", "added"}}, 10s);
  EXPECT_EQ(job.machines[0].output, "replaced added\n");
}

// A job that outlives its deadline is killed whole: the shell and the process it started, which
// holds the pipe open too, in well under the time it would have taken.
TEST(RunJob, KillsAJobThatOutlivesItsDeadline) {
  const std::string pid_file =
      (std::filesystem::temp_directory_path() / ("ch10_jobs_test_" + std::to_string(getpid())))
          .string();
  const auto started = std::chrono::steady_clock::now();
  const auto job = ch10::run_job(
      {shell("machine A", "sleep 60 & echo $! > " + pid_file + "; echo started; wait")}, {}, 1s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(job.timed_out);
  EXPECT_EQ(job.machines[0].output, "started\n");
  EXPECT_EQ(job.machines[0].exit_code, 128 + SIGKILL);
  EXPECT_LT(took, 5s);
  std::ifstream in(pid_file);
  pid_t sleeper = 0;
  ASSERT_TRUE(in >> sleeper) << "the job did not write its child's pid";
  std::filesystem::remove(pid_file);
  // The orphaned sleep is reaped by init once killed; give that a moment.
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = kill(sleeper, 0) != 0 && errno == ESRCH;
    if (!gone) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(gone) << "pid " << sleeper << " outlived the job's deadline";
}

TEST(RunJob, ThrowsWhenAProgramCannotStart) {
  EXPECT_THROW(ch10::run_job({{"machine A", {"/nonexistent/ddprun"}}}, {}, 10s), dist::Error);
}

TEST(RunJob, StopsTheMachinesAlreadyStartedWhenALaterOneCannotStart) {
  const auto started = std::chrono::steady_clock::now();
  EXPECT_THROW(
      ch10::run_job({shell("machine A", "sleep 60"), {"machine B", {"/nonexistent/x"}}}, {}, 30s),
      dist::Error);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);  // machine A was killed, not awaited
}

TEST(PortHolder, HoldsItsPortUntilDestroyed) {
  int port = 0;
  {
    ch10::PortHolder holder;
    port = holder.port();
    ASSERT_GT(port, 0);
    EXPECT_TRUE(port_in_use(port));
  }
  EXPECT_FALSE(port_in_use(port));
  EXPECT_FALSE(port_in_use(ch10::free_port()));
}

}  // namespace
