// ddprun's command line (tools/ddprun/options.cpp): a bad flag value, or a PROGRAM that cannot
// run, fails fast with exit code 2 and a message naming the flag and the value; --help explains
// every flag and every variable.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"
#include "launcher_variables.h"

namespace {

using namespace ddprun_test;

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
