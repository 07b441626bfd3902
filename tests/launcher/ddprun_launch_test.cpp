// ddprun's launch (tools/ddprun/launch.cpp) on probe_worker: what every rank is told, its
// variables and its arguments, on one machine and on the second of two.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ddprun_harness.h"

namespace {

using namespace ddprun_test;

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

}  // namespace
