// ddprun's restarts (--max-restarts): every rank restarted after a failure, each told its
// attempt, each attempt's logs in a folder of its own, and no restart when ddprun is stopped.
#include <csignal>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"

namespace {

using namespace ddprun_test;

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

// --standalone picks a new free port for every attempt, as torchrun --standalone's agent does for
// each rendezvous round: the last attempt's port was free for a moment, and another program may
// hold it now.
TEST(DdprunRestarts, StandaloneGivesEachAttemptAPortOfItsOwn) {
  const std::string marker = new_job_marker();
  const Result r =
      run_ddprun({"--standalone", "--nproc-per-node", "2", "--max-restarts", "2", "sh", "-c",
                  "echo \"port of attempt $TORCHELASTIC_RESTART_COUNT: $MASTER_PORT\"; "
                  "if [ \"$RANK\" = 1 ] && [ \"$TORCHELASTIC_RESTART_COUNT\" -lt 2 ]; then "
                  "sleep 0.3; exit 3; fi"},
                 {marker});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> ports;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string line = "port of attempt " + std::to_string(attempt) + ": ";
    const std::size_t at = r.out.find(line);
    ASSERT_NE(at, std::string::npos) << r.out;
    const std::size_t from = at + line.size();
    ports.push_back(r.out.substr(from, r.out.find('\n', from) - from));
    int ranks = 0;  // both ranks of an attempt meet at the same port
    for (std::size_t i = r.out.find(line + ports.back() + "\n"); i != std::string::npos;
         i = r.out.find(line + ports.back() + "\n", i + 1)) {
      ++ranks;
    }
    EXPECT_EQ(ranks, 2) << r.out;
  }
  EXPECT_NE(ports[0], ports[1]) << r.out;
  EXPECT_NE(ports[1], ports[2]) << r.out;
  EXPECT_NE(ports[0], ports[2]) << r.out;
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

}  // namespace
