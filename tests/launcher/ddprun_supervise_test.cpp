// ddprun's supervision (tools/ddprun/supervise.cpp): one failed rank, or one signal sent to
// ddprun, stops every rank within seconds, and ddprun says which rank failed and how.
#include <csignal>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"

namespace {

using namespace ddprun_test;

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

}  // namespace
