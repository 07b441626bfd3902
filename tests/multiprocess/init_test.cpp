// init_process_group on real processes: the three init methods, precedence, get_dist_info,
// destroy and re-init, and every kind of bad input ending fast with a message that names it.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::RankResult;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_env;
using dist::testing::set_launcher_env;
using Clock = std::chrono::steady_clock;

// Every rank all-reduces (rank + 1) and checks the sum W(W+1)/2.
int sum_check() {
  const int world = dist::get_world_size();
  auto t = dist::full(3, dist::get_rank() + 1.0, dist::kFloat64);
  dist::all_reduce(t);
  return t.equal(dist::full(3, world * (world + 1) / 2.0, dist::kFloat64)) ? 0 : 1;
}

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

TEST(LifeCycle, BeforeInitGetDistInfoAnswersLikeMmcv) {
  expect_all_ok(run_ranks(1, [](int) {
    set_env({{"RANK", ""}, {"WORLD_SIZE", ""}});
    const dist::DistInfo info = dist::get_dist_info();
    DIST_CHECK(!dist::is_initialized() && !info.initialized, "not initialized");
    DIST_CHECK(info.rank == 0 && info.world_size == 1 && info.backend.empty(), "defaults");
    return 0;
  }));
}

TEST(LifeCycle, GetRankBeforeInitIsAnErrorThatSaysWhatToCall) {
  auto results = run_ranks(1, [](int) { return dist::get_rank(); });
  EXPECT_EQ(results[0].exit_code, 1);
  EXPECT_TRUE(contains(results[0].output, "call dist::init_process_group() first"))
      << results[0].output;
}

TEST(LifeCycle, DestroyThenReinitWorksRepeatedly) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(3, [&](int rank) {
    set_launcher_env(rank, 3, port);
    for (int round = 0; round < 3; ++round) {
      dist::init_process_group();
      if (sum_check() != 0) return 1;
      dist::destroy_process_group();
      DIST_CHECK(!dist::is_initialized(), "destroyed");
    }
    return 0;
  }));
}

// The "[rank R/W] " prefix is the launcher's before init, init's own during and after it, and the
// launcher's again after destroy_process_group or a failed init.
TEST(LifeCycle, TheRankPrefixFollowsTheGroup) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(1, [&](int) {
    set_launcher_env(1, 2, port);  // the environment says 1 of 2; the URL's query 0 of 1
    const std::string url = "tcp://127.0.0.1:" + std::to_string(port);
    DIST_CHECK(dist::rank_prefix() == "[rank 1/2] ", "before init: the launcher's");
    dist::init_process_group({.init_method = url + "?rank=0&world_size=1"});
    DIST_CHECK(dist::rank_prefix() == "[rank 0/1] ", "after init: the group's");
    dist::destroy_process_group();
    DIST_CHECK(dist::rank_prefix() == "[rank 1/2] ", "after destroy: the launcher's again");
    try {  // rank 0 of 3, alone: nobody else comes
      dist::init_process_group({.init_method = url + "?rank=0&world_size=3", .timeout = 1s});
      return 1;
    } catch (const dist::TimeoutError&) {
    }
    DIST_CHECK(dist::rank_prefix() == "[rank 1/2] ", "after a failed init: the launcher's");
    return 0;
  }));
}

// init_process_group sets up the process (SIGPIPE ignored, a terminate handler that names the
// rank); new_group() leaves alone whatever the program installed after it.
TEST(LifeCycle, NewGroupKeepsTheProgramsOwnTerminateHandler) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int) {
    struct sigaction pipe {};
    ::sigaction(SIGPIPE, nullptr, &pipe);
    DIST_CHECK(pipe.sa_handler == SIG_IGN, "init ignores SIGPIPE");
    const std::terminate_handler mine = [] { std::_Exit(9); };
    std::set_terminate(mine);
    auto second = dist::new_group();
    DIST_CHECK(std::get_terminate() == mine, "new_group() replaced the program's handler");
    return 0;
  }));
}

TEST(LifeCycle, TwoGroupsOneAfterAnotherWithDifferentInitMethods) {
  const std::string path = "/tmp/dist_two_groups_" + std::to_string(::getpid());
  std::remove(path.c_str());
  expect_all_ok(run_group(2, {.group_name = "first"}, [&](int) {  // env://, then a file
    if (sum_check() != 0) return 1;
    dist::destroy_process_group();
    dist::init_process_group({.init_method = "file://" + path, .group_name = "second"});
    return sum_check();
  }));
}

TEST(LifeCycle, ASecondInitWithoutDestroyIsAClearError) {
  auto results = run_group(1, {}, [](int) {
    dist::init_process_group();  // the group is there already
    return 0;
  });
  EXPECT_EQ(results[0].exit_code, 1);
  EXPECT_TRUE(contains(results[0].output, "init_process_group was called twice"))
      << results[0].output;
  EXPECT_TRUE(contains(results[0].output, "destroy_process_group()")) << results[0].output;
}

// ---- Bad input: non-zero exit, fast, with a message that names the problem ----------------------

struct Failure {
  int exit_code;
  std::string message;
};

// Runs `world` ranks that only initialise, with a 3 s timeout, and checks every rank fails with
// `want` within `limit`.
void expect_init_fails(int world, const std::function<void(int rank)>& setup, const Failure& want,
                       std::chrono::seconds limit = 15s) {
  const auto start = Clock::now();
  auto results = run_ranks(
      world,
      [&](int rank) {
        setup(rank);
        dist::init_process_group({.timeout = 3s});
        return 0;
      },
      60s);
  EXPECT_LT(Clock::now() - start, limit);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, want.exit_code) << describe(results);
    EXPECT_TRUE(contains(r.output, want.message)) << "wanted: " << want.message << "\n"
                                                  << describe(results);
  }
}

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

TEST(BadInput, MasterPortAlreadyInUse) {
  // Something else holds the port: rank 0 cannot host the store there, and rank 1 finds a
  // stranger instead of a store. Both say so and exit 2.
  const auto holder = dist::testing::listen_on_loopback();
  const int port = holder.port;
  const auto start = Clock::now();
  auto results =
      run_group(2, {.timeout = 20s}, [](int) { return 0; }, {.port = port, .deadline = 60s});
  ::close(holder.fd);
  EXPECT_LT(Clock::now() - start, 15s);
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output,
                       "port " + std::to_string(port) + " on 127.0.0.1 is already in use"))
      << describe(results);
  EXPECT_EQ(results[1].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[1].output, "not this job's store")) << describe(results);
}

TEST(BadInput, ARankThatNeverArrivesIsNamed) {
  // WORLD_SIZE=4 but only ranks 0 and 1 start.
  const int port = dist::testing::free_port();
  expect_init_fails(
      2, [&](int rank) { set_launcher_env(rank, 4, port); },
      {1, "ranks 2, 3 of world_size 4 never joined at 127.0.0.1:" + std::to_string(port)});
}

TEST(BadInput, RankZeroThatNeverStartsIsNamedByTheOthers) {
  const int port = dist::testing::free_port();
  expect_init_fails(1, [&](int) { set_launcher_env(1, 2, port); },
                    {1, "could not reach the store at 127.0.0.1:" + std::to_string(port)});
}

TEST(BadInput, RanksThatDisagreeAboutWorldSizeAllStopAtOnce) {
  // Whichever rank records its world_size second sees the conflict and tells the other.
  const int port = dist::testing::free_port();
  const auto start = Clock::now();
  auto results = run_ranks(
      2,
      [&](int rank) {
        set_launcher_env(rank, rank == 0 ? 2 : 3, port);
        dist::init_process_group({.timeout = 30s});
        return 0;
      },
      60s);
  EXPECT_LT(Clock::now() - start, 10s) << "a conflict must not wait out the timeout";
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "but an earlier rank said")) << describe(results);
    EXPECT_TRUE(contains(r.output, "every rank must use the same WORLD_SIZE")) << describe(results);
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

TEST(LifeCycle, DistInfoShowsTheResolvedUrlWithoutItsQuery) {
  const int port = dist::testing::free_port();
  expect_all_ok(run_ranks(1, [&](int) {
    set_env({{"RANK", ""}, {"WORLD_SIZE", ""}});
    dist::init_process_group(
        {.init_method = "tcp://localhost:" + std::to_string(port) + "?world_size=1&rank=0"});
    const auto info = dist::get_dist_info();
    DIST_CHECK(info.init_method == "tcp://localhost:" + std::to_string(port), info.init_method);
    dist::destroy_process_group();
    return 0;
  }));
}

TEST(BadInput, TwoProcessesWithTheSameRank) {
  const int port = dist::testing::free_port();
  auto results = run_ranks(
      3,
      [&](int rank) {
        set_launcher_env(rank == 2 ? 1 : rank, 3, port);
        dist::init_process_group({.timeout = 20s});
        return 0;
      },
      60s);
  int reported = 0;
  for (const auto& r : results) {
    EXPECT_NE(r.exit_code, 0) << describe(results);
    reported += contains(r.output, "two processes claim rank 1");
  }
  EXPECT_EQ(reported, 3) << describe(results);
}

// ---- Failures after init ------------------------------------------------------------------------

TEST(AfterInit, ACollectiveCalledByOnlySomeRanksTimesOutNamingIt) {
  const auto start = Clock::now();
  auto results =
      run_group(2, {.timeout = 2s},
                [&](int rank) {
                  if (rank == 0) {
                    auto t = dist::zeros(4);
                    dist::all_reduce(t);
                  } else {
                    std::this_thread::sleep_for(4s);  // rank 1 skips the call but stays alive
                  }
                  return 0;
                },
                {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  EXPECT_EQ(results[0].exit_code, 1) << describe(results);
  EXPECT_TRUE(
      contains(results[0].output, "all_reduce #1 (SUM, torch.float32, 4 elements) timed out"))
      << describe(results);
}

// Three ranks all_reduce `numel` elements (4: one exchange; 2^16: the ring), and rank 2 first
// does `fault` (dies, or stops). Returns every rank's result.
std::vector<RankResult> all_reduce_after_rank2(std::int64_t numel,
                                               std::chrono::milliseconds timeout,
                                               const std::function<void()>& fault) {
  return run_group(3, {.timeout = timeout},
                   [&](int rank) {
                     if (rank == 2) fault();
                     auto t = dist::zeros(numel);
                     dist::all_reduce(t);
                     return 0;
                   },
                   {.deadline = 60s});
}

TEST(AfterInit, APeerThatDiesMakesTheOthersFailFast) {
  for (const std::int64_t numel : {std::int64_t{4}, std::int64_t{1} << 16}) {
    const auto start = Clock::now();
    const auto results = all_reduce_after_rank2(numel, 30s, [] { ::_exit(3); });  // no word
    EXPECT_LT(Clock::now() - start, 10s) << "survivors must not wait for the 30 s timeout";
    EXPECT_EQ(results[2].exit_code, 3);
    for (int r : {0, 1}) {
      EXPECT_EQ(results[static_cast<std::size_t>(r)].exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(results[static_cast<std::size_t>(r)].output, "all_reduce #1"))
          << describe(results);
    }
  }
}

// A stopped peer (SIGSTOP, a debugger, a frozen machine) is alive and keeps its connections open,
// so nothing tells the others it is gone: they must fail at the timeout, naming the call.
TEST(AfterInit, AStoppedPeerMakesTheOthersFailWithinTheTimeout) {
  const auto stop = [] {
    const pid_t me = ::getpid();
    if (::fork() == 0) {  // a helper ends the stopped rank later, so that the test need not
      std::this_thread::sleep_for(5s);  // well after the survivors' 2 s timeout
      ::kill(me, SIGKILL);
      ::_exit(0);
    }
    std::raise(SIGSTOP);
  };
  for (const std::int64_t numel : {std::int64_t{4}, std::int64_t{1} << 16}) {
    const auto start = Clock::now();
    const auto results = all_reduce_after_rank2(numel, 2s, stop);
    EXPECT_LT(Clock::now() - start, 15s);
    for (int r : {0, 1}) {
      const auto& result = results[static_cast<std::size_t>(r)];
      EXPECT_EQ(result.exit_code, 1) << describe(results);
      // One survivor times out; the other may instead learn of it through the closed group.
      EXPECT_TRUE(contains(result.output, "all_reduce #1")) << describe(results);
    }
    const bool timed_out = contains(results[0].output, "timed out after 2 s") ||
                           contains(results[1].output, "timed out after 2 s");
    EXPECT_TRUE(timed_out) << describe(results);
  }
}

TEST(AfterInit, MismatchedSizesEndWithARankTaggedHintNotAHang) {
  // all_reduce, all_gather and reduce_scatter compare the ranks' calls first (the tests below).
  // Gloo's own algorithms, here broadcast, detect a mismatch on Gloo's network thread, where it
  // cannot be caught: the rank that received too much aborts, after saying which rank it is and
  // what to check. (The source rank only sent; under ddprun, the abort stops it too.)
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 3s},
                           [](int rank) {
                             auto t = dist::zeros(rank == 0 ? 8 : 4);
                             dist::broadcast(t, 0);
                             return 0;
                           },
                           {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  const auto& receiver = results[1];
  EXPECT_EQ(receiver.exit_code, 128 + SIGABRT) << describe(results);
  EXPECT_TRUE(
      contains(receiver.output, "[rank 1/2] fatal: ") &&
      contains(receiver.output, "called a collective with different sizes, dtypes or order"))
      << describe(results);
}

TEST(AfterInit, AllReducesWithDifferentOpsOrSizesStopEveryRankNamingEachCall) {
  // Every rank sends a header (call number, size, dtype, op) first: when the calls differ, every
  // rank stops, naming each rank's call. Small tensors (one exchange) and large ones (the ring).
  struct Case {
    std::int64_t numel0, numel1;
    dist::ReduceOp op1;
  };
  for (const Case c :
       {Case{4, 4, dist::ReduceOp::MAX}, Case{4, 3, dist::ReduceOp::SUM},
        Case{1 << 16, 1 << 16, dist::ReduceOp::MAX}, Case{1 << 16, 1 << 17, dist::ReduceOp::SUM}}) {
    const auto start = Clock::now();
    auto results = run_group(2, {.timeout = 3s},
                             [&](int rank) {
                               auto t = dist::full(rank == 0 ? c.numel0 : c.numel1, 1.0);
                               dist::all_reduce(t, rank == 0 ? dist::ReduceOp::SUM : c.op1);
                               return 0;
                             },
                             {.deadline = 60s});
    EXPECT_LT(Clock::now() - start, 2s) << "a mismatch is found at once, not by a timeout";
    const auto call = [](std::int64_t n, const char* op) {
      return "collective #1, " + std::to_string(n) + " elements, torch.float32, " + op;
    };
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, "the ranks called it with different tensors or reduce ops") &&
                  contains(r.output, "rank 0: " + call(c.numel0, "SUM")) &&
                  contains(r.output, "rank 1: " + call(c.numel1, dist::reduce_op_name(c.op1))))
          << describe(results);
    }
  }
}

TEST(AfterInit, AllGathersAndReduceScattersOfDifferentSizesStopEveryRankNamingEachCall) {
  for (const bool gather : {true, false}) {
    auto results = run_group(2, {.timeout = 3s},
                             [&](int rank) {
                               const std::int64_t n = rank == 0 ? 5 : 6;
                               if (gather) {
                                 std::vector<dist::Tensor> out;
                                 dist::all_gather(out, dist::zeros(n));
                               } else {
                                 auto out = dist::zeros(n);
                                 dist::reduce_scatter(out, {dist::zeros(n), dist::zeros(n)});
                               }
                               return 0;
                             },
                             {.deadline = 60s});
    const std::string op = gather ? "" : ", SUM";
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, gather ? "all_gather #1" : "reduce_scatter #1") &&
                  contains(r.output, "rank 0: collective #1, 5 elements, torch.float32" + op) &&
                  contains(r.output, "rank 1: collective #1, 6 elements, torch.float32" + op))
          << describe(results);
    }
  }
}

TEST(AfterInit, ARankThatCatchesTheErrorStillLetsItsPeersFailFast) {
  // Rank 1 dies in the middle of a ring all_reduce. Its neighbours notice first; they catch the
  // error and linger, as a program that saves a checkpoint before exiting would. Rank 3 waits
  // only on rank 2: it fails within seconds, not at the 30 s timeout, because rank 2's group
  // closes its connections on the error. Afterwards the group refuses calls, naming that error.
  auto results = run_group(
      4, {.timeout = 30s},
      [](int rank) {
        auto t = dist::zeros(std::int64_t{32} << 20);  // 128 MiB: a ring of a few hundred ms
        dist::barrier();
        if (rank == 1) {
          std::thread([] {
            std::this_thread::sleep_for(80ms);
            ::_exit(3);
          }).detach();
        }
        const auto start = Clock::now();
        try {
          dist::all_reduce(t);
        } catch (const dist::Error& e) {
          const auto ms =
              std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
          std::cout << "failed after " << ms << " ms\n";
          try {
            dist::barrier();
          } catch (const dist::Error& again) {
            std::cout << again.what() << "\n";
          }
          std::this_thread::sleep_for(8s);  // lingers, its connections closed
          return 5;
        }
        return 0;
      },
      {.deadline = 90s});
  EXPECT_EQ(results[1].exit_code, 3) << describe(results);
  for (int r : {0, 2, 3}) {
    const auto& result = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(result.exit_code, 5) << describe(results);
    const auto at = result.output.find("failed after ");
    ASSERT_NE(at, std::string::npos) << describe(results);
    EXPECT_LT(std::stol(result.output.substr(at + 13)), 5000) << describe(results);
    EXPECT_TRUE(contains(result.output, "barrier #3 on rank " + std::to_string(r) +
                                            ": this process group was closed after an earlier "
                                            "error (all_reduce #2"))
        << describe(results);
  }
}

TEST(WriteFileAtomically, AProcessKilledAtAnyMomentLeavesTheOldFileOrTheNewNeverAPart) {
  // A child rewrites one 16 MiB file over and over, each version a header (its number) and a
  // payload of one repeated byte; it is killed (SIGKILL) at a moment drawn at random, 12 times.
  // After every kill the file is absent (no write finished yet) or one whole version.
  const std::string path = "/tmp/dist_atomic_kill_" + std::to_string(::getpid());
  constexpr std::size_t kBytes = 16u << 20;
  const auto whole = [&](std::string* why) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) return true;  // absent: killed before the first rename
    std::string data(static_cast<std::size_t>(in.tellg()), '\0');
    in.seekg(0);
    in.read(data.data(), static_cast<std::streamsize>(data.size()));
    if (data.size() != 16 + kBytes) {
      *why = std::to_string(data.size()) + " bytes";
      return false;
    }
    const int version = std::stoi(data.substr(0, 16));
    const char fill = static_cast<char>(version % 251);
    if (data.find_first_not_of(fill, 16) != std::string::npos) {
      *why = "version " + std::to_string(version) + " has another version's bytes";
      return false;
    }
    return true;
  };
  std::mt19937 random(20261123);
  int versions_seen = 0;
  for (int kill = 0; kill < 12; ++kill) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (int version = 1 + kill * 1000;; ++version) {
        std::string data(16, ' ');
        const std::string number = std::to_string(version);
        data.replace(0, number.size(), number);
        data.append(kBytes, static_cast<char>(version % 251));
        dist::write_file_atomically(path, data);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(random() % 400));
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    std::string why;
    EXPECT_TRUE(whole(&why)) << "after kill " << kill << ": " << why;
    versions_seen += std::ifstream(path).good();
  }
  EXPECT_GT(versions_seen, 0) << "no write ever finished: the kills came too early to test";
  std::filesystem::remove(path);
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().starts_with(path + ".tmp-")) std::filesystem::remove(entry.path());
  }
}

TEST(MonitoredBarrier, PassesWhenEveryRankComes) {
  auto results = run_group(3, {.timeout = 10s},
                           [](int) {
                             for (int i = 0; i < 3; ++i) dist::monitored_barrier(5s);
                             std::cout << "passed\n";
                             return 0;
                           },
                           {.deadline = 60s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "passed")) << describe(results);
  }
}

TEST(MonitoredBarrier, NamesEveryRankThatDidNotCome) {
  // Ranks 1 and 2 come 3 s late: rank 0 gives up after 2 s and names both; ranks 0 and 3, and
  // the late ranks when they come (within another 2 s), all stop with that verdict.
  const auto start = Clock::now();
  auto results = run_group(4, {.timeout = 20s},
                           [](int rank) {
                             if (rank == 1 || rank == 2) std::this_thread::sleep_for(3s);
                             dist::monitored_barrier(2s);
                             return 0;
                           },
                           {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 15s);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(r.output, "monitored_barrier #1") &&
                contains(r.output, "ranks 1, 2 did not arrive within 2 s"))
        << describe(results);
  }
}

TEST(MonitoredBarrier, NamesRankZeroWhenItIsTheOneMissing) {
  auto results = run_group(
      2, {.timeout = 20s},
      [](int rank) {
        if (rank == 0) {
          std::this_thread::sleep_for(4s);  // stays alive (it hosts the store) but never comes
          return 0;
        }
        dist::monitored_barrier(1s);
        return 0;
      },
      {.deadline = 60s});
  EXPECT_EQ(results[1].exit_code, 1) << describe(results);
  EXPECT_TRUE(contains(results[1].output, "rank 0, which checks the barrier, gave no verdict"))
      << describe(results);
}

// ---- DIST_DEBUG=DETAIL -------------------------------------------------------------------------

TEST(DebugDetail, MatchingCallsGiveTheUsualResults) {
  auto results = run_group(3, {.timeout = 20s},
                           [](int rank) {
                             auto t = dist::full(5, rank + 1.0);
                             dist::all_reduce(t);  // 1 + 2 + 3
                             auto b = dist::full(3, rank == 2 ? 7.0 : 0.0);
                             dist::broadcast(b, 2);
                             std::vector<dist::Tensor> all;
                             dist::all_gather(all, dist::full(2, rank * 1.0));
                             dist::barrier();
                             auto sub = dist::new_group();  // checked as well
                             auto m = dist::full(1, rank * 1.0);
                             sub->all_reduce(m, dist::ReduceOp::MAX);
                             sub.reset();
                             std::cout << "sum " << t.item(0) << " bcast " << b.item(2)
                                       << " gathered " << all[2].item(1) << " max " << m.item(0)
                                       << "\n";
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "detail"}}, .deadline = 60s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_TRUE(contains(r.output, "sum 6 bcast 7 gathered 2 max 2")) << describe(results);
  }
}

TEST(DebugDetail, CallsThatDifferStopEveryRankShowingEachCall) {
  // A different reduce op (which torch's check ignores), and a different collective altogether.
  for (const bool other_op : {true, false}) {
    const auto start = Clock::now();
    auto results = run_group(2, {.timeout = 20s},
                             [&](int rank) {
                               auto t = dist::zeros(4);
                               dist::barrier();
                               if (rank == 0) {
                                 dist::all_reduce(t, dist::ReduceOp::SUM);
                               } else if (other_op) {
                                 dist::all_reduce(t, dist::ReduceOp::MAX);
                               } else {
                                 dist::broadcast(t, 0);
                               }
                               return 0;
                             },
                             {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
    EXPECT_LT(Clock::now() - start, 10s) << "found by comparing, not by a timeout";
    const std::string other = other_op ? "all_reduce(MAX, torch.float32, 4 elements, cpu)"
                                       : "broadcast(src 0, torch.float32, 4 elements, cpu)";
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(contains(r.output, "DIST_DEBUG=DETAIL: collective #2") &&
                  contains(r.output, "the ranks' calls differ") &&
                  contains(r.output, "rank 0: all_reduce(SUM, torch.float32, 4 elements, cpu)") &&
                  contains(r.output, "rank 1: " + other))
          << describe(results);
    }
  }
}

TEST(DebugDetail, ARankThatNeverCallsIsNamed) {
  auto results = run_group(3, {.timeout = 2s},
                           [](int rank) {
                             if (rank == 1) {
                               std::this_thread::sleep_for(4s);  // skips the call but stays alive
                               return 0;
                             }
                             auto t = dist::zeros(4);
                             dist::all_reduce(t);
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
  for (int r : {0, 2}) {
    const auto& result = results[static_cast<std::size_t>(r)];
    EXPECT_EQ(result.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(result.output, "collective #1 all_reduce(SUM") &&
                contains(result.output, "rank 1 did not reach it within 2 s"))
        << describe(results);
  }
}

// A bad argument on one rank only: the DETAIL check comes first, so every rank stops at once with
// each rank's call, instead of the others waiting out the timeout for the rank that was refused.
TEST(DebugDetail, ABadArgumentOnOneRankStopsEveryRankShowingEachCall) {
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 20s},
                           [](int rank) {
                             auto t = dist::zeros(4);
                             dist::broadcast(t, rank == 0 ? 7 : 0);  // src 7 of world_size 2
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
  EXPECT_LT(Clock::now() - start, 10s) << "found by comparing, not by a timeout";
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << describe(results);
    EXPECT_TRUE(contains(r.output, "the ranks' calls differ") &&
                contains(r.output, "rank 0: broadcast(src 7, torch.float32, 4 elements, cpu)"))
        << describe(results);
  }
}

TEST(DebugDetail, AnUnknownLevelIsAConfigErrorNamingTheVariable) {
  auto results = run_group(1, {.timeout = 5s}, [](int) { return 0; },
                           {.env = {{"DIST_DEBUG", "INFO"}}, .deadline = 60s});
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output, "DIST_DEBUG=\"INFO\" is not a debug level"))
      << describe(results);
}

TEST(AfterInit, ReduceOpsThatDoNotFitTheDtypeAreRefused) {
  auto results = run_group(1, {}, [](int) {
    auto f = dist::zeros(2);
    auto i = dist::arange(2);
    int refused = 0;
    try {
      dist::all_reduce(f, dist::ReduceOp::BAND);
    } catch (const dist::ConfigError& e) {
      refused += contains(e.what(),
                          "ReduceOp::BAND needs an integer tensor, but this one is torch.float32");
    }
    try {
      dist::all_reduce(i, dist::ReduceOp::AVG);
    } catch (const dist::ConfigError& e) {
      refused += contains(e.what(), "ReduceOp::AVG needs a floating-point tensor");
    }
    return refused == 2 ? 0 : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

}  // namespace

namespace {

// The signals (SIGTERM, SIGUSR1) that every thread of this process blocks, as /proc says: bit
// s - 1 of SigBlk is signal s. Returns the threads other than the main one, and whether each of
// them blocks both.
struct ThreadMasks {
  int others = 0, blocking_both = 0;
  bool main_blocks_either = false;
};
ThreadMasks thread_masks() {
  ThreadMasks m;
  const unsigned long long both = (1ULL << (SIGTERM - 1)) | (1ULL << (SIGUSR1 - 1));
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream status(task.path() / "status");
    unsigned long long blocked = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("SigBlk:", 0) == 0) blocked = std::stoull(line.substr(7), nullptr, 16);
    }
    if (task.path().filename() == std::to_string(::getpid())) {
      m.main_blocks_either = (blocked & both) != 0;
    } else {
      ++m.others;
      if ((blocked & both) == both) ++m.blocking_both;
    }
  }
  return m;
}

}  // namespace

// A SIGTERM or SIGUSR1 sent to a rank must reach a thread that runs the program (the flight
// recorder writes what that thread was doing): every thread the library starts (Gloo's loop, the
// store's server on rank 0, the group's communication thread, DDP's worker) blocks both.
TEST(Threads, TheLibrarysThreadsLeaveSigtermAndSigusr1ToTheProgram) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [](int) {
    dist::barrier({.async_op = true}).wait();  // the default group's communication thread
    dist::Linear model(1, 1, {{1}, {0}});
    dist::DistributedDataParallel ddp(model.parameters());  // and DDP's worker, on a new group
    const ThreadMasks m = thread_masks();
    std::printf("%d other threads, %d block SIGTERM and SIGUSR1; main blocks them: %s\n", m.others,
                m.blocking_both, m.main_blocks_either ? "yes" : "no");
    return m.others >= 3 && m.blocking_both == m.others && !m.main_blocks_either ? 0 : 1;
  }));
}
