// ddprun leaves nothing of a job behind, grandchildren included (tools/ddprun/supervise.cpp: each
// rank leads a process group of its own, and asks to die with ddprun): whatever ends the job.
#include <csignal>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"

namespace {

using namespace ddprun_test;

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
  at_1_2_and_4_ranks([](int nproc, const std::string& marker) {
    const Result r = run_ddprun(
        ranks_with_a_child(nproc, "",
                           "if [ \"$RANK\" = $((WORLD_SIZE - 1)) ]; then sleep 0.3; exit 3; fi; "
                           "sleep 60"),
        {marker});
    EXPECT_EQ(r.exit_code, 3) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_EQ(count_of(r.out, "started\n"), nproc) << r.out;
  });
}

TEST(DdprunHygiene, StopsEveryRanksChildrenWhenDdprunGetsSigtermOrSigint) {
  for (const int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE("signal " + std::to_string(signal));
    at_1_2_and_4_ranks([&](int nproc, const std::string& marker) {
      // sh -c catches SIGINT, and may outlive it: the grace period, kept short, ends that too.
      const Result r =
          run_and_signal(ranks_with_a_child(nproc, "", "sleep 60", {"--grace-period", "1"}),
                         {marker}, nproc, signal);
      EXPECT_EQ(r.exit_code, 128 + signal) << r.err;
      EXPECT_LT(r.seconds, kStopLimitS);
    });
  }
}

// ddprun killed by SIGKILL can stop nothing; the kernel does it for it: each rank asks for
// SIGKILL when its parent dies (PR_SET_PDEATHSIG), in the child ddprun makes, before its exec.
// Each rank execs its sleep itself, so that the rank is what must die.
TEST(DdprunHygiene, RanksDieWithDdprunWhenItIsKilledBySigkillAt1_2And4Ranks) {
  at_1_2_and_4_ranks([](int nproc, const std::string& marker) {
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
  });
}

TEST(DdprunHygiene, SigkillsRanksAndChildrenThatIgnoreSigtermAtTheDeadline) {
  at_1_2_and_4_ranks([](int nproc, const std::string& marker) {
    // `trap "" TERM` ignores SIGTERM in the shell, and in the child it starts (an ignored
    // signal stays ignored across fork and exec).
    const Result r = run_and_signal(
        ranks_with_a_child(nproc, "trap \"\" TERM; ", "sleep 60", {"--grace-period", "1"}),
        {marker}, nproc, SIGTERM);
    EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;
    EXPECT_GE(r.seconds, 0.95);  // the grace period was given
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_TRUE(contains(r.err, "still running after the 1 s grace period; sending SIGKILL"))
        << r.err;
  });
}

// A rank that succeeds may still leave a child running: it is stopped like the rest (SIGTERM,
// then SIGKILL after the grace period), ddprun says so, and the exit code stays the ranks' own.
TEST(DdprunHygiene, StopsWhatRanksLeaveRunningWhenTheyExit0) {
  at_1_2_and_4_ranks([](int nproc, const std::string& marker) {
    const Result r = run_ddprun(
        ranks_with_a_child(nproc, "trap \"\" TERM; ", "exit 0", {"--grace-period", "0.5"}),
        {marker});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_LT(r.seconds, kStopLimitS);
    EXPECT_TRUE(contains(r.err, "every rank has exited, but they left ")) << r.err;
    EXPECT_TRUE(contains(r.err, "grace period; sending SIGKILL")) << r.err;
  });
}

// A job whose ranks leave nothing behind ends when its last rank does: no grace period is spent.
TEST(DdprunHygiene, EndsAtOnceWhenTheRanksLeaveNothingBehind) {
  const Result r = run_ddprun({"--nproc-per-node", "4", "--grace-period", "5", PROBE_PATH});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(r.seconds, 2.0);
  EXPECT_FALSE(contains(r.err, "left")) << r.err;
}

}  // namespace
