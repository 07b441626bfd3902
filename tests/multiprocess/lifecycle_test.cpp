// A process group's life cycle (common/src/init/init.cpp): get_dist_info before and after init,
// destroy and re-init, the rank prefix, the process set-up, and a second init without destroy.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "dist/dist.h"
#include "init_checks.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::expect_all_ok;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_env;
using dist::testing::set_launcher_env;
using dist::testing::sum_check;

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

}  // namespace
