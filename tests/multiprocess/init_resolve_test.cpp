// init_process_group on real processes, its first step (common/src/init/rendezvous.h, resolve): the
// three init methods, which value wins (explicit arguments > the URL's query > the environment),
// and every bad or missing value ending fast with a message that names it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "dist/dist.h"
#include "init_checks.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::expect_init_fails;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_env;
using dist::testing::set_launcher_env;
using dist::testing::sum_check;
using Clock = std::chrono::steady_clock;

// ---- The init methods -------------------------------------------------------------------------

TEST(InitMethod, EnvReadsRankWorldSizeAndMaster) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_group(
      3, {},
      [&](int rank) {
        const dist::DistInfo info = dist::get_dist_info();
        DIST_CHECK(info.initialized && info.rank == rank && info.world_size == 3, "identity");
        DIST_CHECK(info.local_rank == rank && info.local_world_size == 3, "local identity");
        DIST_CHECK(info.master_addr == "127.0.0.1" && info.master_port == port, "master");
        DIST_CHECK(info.backend == "gloo" && info.init_method == "env://", "backend");
        return sum_check();
      },
      {.port = port}));
}

TEST(InitMethod, TcpUrlWithRankAndWorldSizeInTheQuery) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(2, [&](int rank) {
    set_env({{"RANK", ""}, {"WORLD_SIZE", ""}, {"MASTER_ADDR", ""}, {"MASTER_PORT", ""}});
    const std::string url = "tcp://127.0.0.1:" + std::to_string(port) +
                            "?rank=" + std::to_string(rank) + "&world_size=2";
    dist::init_process_group({.init_method = url});
    DIST_CHECK(dist::get_rank() == rank && dist::get_world_size() == 2, "identity");
    DIST_CHECK(dist::get_dist_info().master_port == port, "port from the URL");
    const int rc = sum_check();
    dist::destroy_process_group();
    return rc;
  }));
}

TEST(InitMethod, FileUrlWithExplicitArguments) {
  const std::string path = "/tmp/dist_init_test_" + std::to_string(::getpid());
  std::remove(path.c_str());
  expect_all_ok(run_ranks(4, [&](int rank) {
    set_env({{"RANK", ""}, {"WORLD_SIZE", ""}, {"MASTER_ADDR", ""}, {"MASTER_PORT", ""}});
    dist::init_process_group({.init_method = "file://" + path, .world_size = 4, .rank = rank});
    const int rc = sum_check();
    dist::destroy_process_group();
    return rc;
  }));
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << "the file store was left behind";
}

// ---- Precedence: explicit arguments > URL query > environment
// ------------------------------------

TEST(Precedence, ExplicitArgumentsBeatTheEnvironment) {
  // Post B: WORLD_SIZE=2 in the environment, world_size=1 in the call: it runs alone, at once.
  const int port = dist::testing::free_port();
  const auto start = Clock::now();
  expect_all_ok(run_ranks(1, [&](int) {
    set_launcher_env(0, 2, port);
    dist::init_process_group({.world_size = 1, .rank = 0});
    DIST_CHECK(dist::get_world_size() == 1 && dist::get_rank() == 0, "explicit arguments win");
    dist::destroy_process_group();
    return 0;
  }));
  EXPECT_LT(Clock::now() - start, 10s);
}

TEST(Precedence, TheUrlQueryBeatsTheEnvironment) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(1, [&](int) {
    set_launcher_env(1, 2, port);
    dist::init_process_group(
        {.init_method = "tcp://127.0.0.1:" + std::to_string(port) + "?rank=0&world_size=1"});
    DIST_CHECK(dist::get_world_size() == 1 && dist::get_rank() == 0, "the query wins");
    dist::destroy_process_group();
    return 0;
  }));
}

TEST(Precedence, ExplicitArgumentsBeatTheUrlQuery) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(1, [&](int) {
    set_launcher_env(1, 4, port);
    dist::init_process_group(
        {.init_method = "tcp://127.0.0.1:" + std::to_string(port) + "?rank=1&world_size=2",
         .world_size = 1,
         .rank = 0});
    DIST_CHECK(dist::get_world_size() == 1 && dist::get_rank() == 0, "the arguments win");
    dist::destroy_process_group();
    return 0;
  }));
}

TEST(Precedence, EachValueIsResolvedOnItsOwn) {
  // rank from the argument, world_size from the environment.
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(2, [&](int rank) {
    set_launcher_env(0, 2, port);  // every process claims RANK=0 in the environment
    dist::init_process_group({.rank = rank});
    DIST_CHECK(dist::get_rank() == rank && dist::get_world_size() == 2, "mixed sources");
    dist::destroy_process_group();
    return 0;
  }));
}

// ---- Life cycle --------------------------------------------------------------------------------

// ---- Bad input: non-zero exit, fast, with a message that names the problem ----------------------

TEST(BadInput, RankNotBelowWorldSize) {
  const int port = dist::testing::free_port();
  expect_init_fails(1,
                    [&](int) {
                      set_launcher_env(0, 2, port);
                      set_env({{"RANK", "2"}});
                    },
                    {2,
                     "rank 2 (from RANK) is out of range for world_size 2 (from WORLD_SIZE): "
                     "ranks are 0..1"});
}

TEST(BadInput, NonNumericWorldSize) {
  const int port = dist::testing::free_port();
  expect_init_fails(1,
                    [&](int) {
                      set_launcher_env(0, 1, port);
                      set_env({{"WORLD_SIZE", "two"}});
                    },
                    {2, "WORLD_SIZE=\"two\" is not an integer"});
}

TEST(BadInput, MissingMasterAddr) {
  const int port = dist::testing::free_port();
  expect_init_fails(1,
                    [&](int) {
                      set_launcher_env(0, 1, port);
                      set_env({{"MASTER_ADDR", ""}});
                    },
                    {2, "MASTER_ADDR is not set"});
}

// mpirun and srun number the ranks but name no meeting point: the message says how to pass one.
TEST(BadInput, MissingMasterAddrUnderMpirunOrSlurmSaysHowToPassIt) {
  // A launcher's variables with no meeting point, and none of torchrun's.
  const auto only = [](std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](int) {
      dist::testing::clear_launcher_env();
      set_env(vars);
    };
  };
  expect_init_fails(1, only({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}),
                    {2, "under mpirun, pass both to every rank: mpirun -x MASTER_ADDR="});
  expect_init_fails(
      1, only({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"MASTER_ADDR", "127.0.0.1"}}),
      {2,
       "MASTER_PORT is not set: env:// needs a free port on rank 0's machine, "
       "e.g. export MASTER_PORT=29500 (ddprun and torchrun set it for you); "
       "under Slurm, export both before srun"});
}

TEST(BadInput, MissingRank) {
  expect_init_fails(1,
                    [&](int) {
                      set_env({{"RANK", ""}, {"WORLD_SIZE", "1"}});
                    },
                    {2, "rank is not set: pass it to init_process_group"});
}

TEST(BadInput, MalformedInitMethod) {
  for (const std::string url : {"tcp://127.0.0.1", "tcp://127.0.0.1:99999", "file://relative/path",
                                "udp://127.0.0.1:1", "env://?rank=x", "env://?color=blue"}) {
    auto results = run_group(1, {.init_method = url}, [](int) { return 0; });
    EXPECT_EQ(results[0].exit_code, 2) << url << "\n" << results[0].output;
    EXPECT_TRUE(contains(results[0].output, "init_method")) << results[0].output;
  }
}

TEST(BadInput, ANetworkInterfaceThatDoesNotExist) {
  const int port = dist::testing::free_port();
  expect_init_fails(1,
                    [&](int) {
                      set_launcher_env(0, 1, port);
                      set_env({{"DIST_IFNAME", "bogus0"}});
                    },
                    {2, "DIST_IFNAME=bogus0 is not a network interface of this machine"});
}

TEST(BadInput, ATimeoutBeyondAWeek) {
  auto results = run_group(1, {.timeout = std::chrono::milliseconds::max()}, [](int) { return 0; });
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output, "must be positive and at most one week"))
      << describe(results);
}

}  // namespace
