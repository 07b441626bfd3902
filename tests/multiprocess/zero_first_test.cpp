// dist::zero_first (dist/zero_first.h, chapter 05) on real processes: the leaders run first and
// the others find their work done; a leader's failure reaches every waiting rank as an error
// naming it, not as a timeout; a leader slower than the timeout is named as such; and the
// ZeroFirst guard keeps the same promises. Registered by chapters/05_barrier/CMakeLists.txt.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "dist/dist.h"
#include "dist/zero_first.h"
#include "ranks.h"

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using dist::Leaders;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_launcher_env;
using Clock = std::chrono::steady_clock;

// A directory of its own for each test run, the same on every rank (ranks are forked children).
fs::path scratch(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("dist-zero-first-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// The leader's work: slow enough that a rank which did not wait would look before it is done.
int prepare(const fs::path& file) {
  std::this_thread::sleep_for(300ms);
  dist::write_file_atomically(file.string(), "42\n");
  return 42;
}

int read_number(const fs::path& file) {
  std::ifstream in(file);
  int value = -1;
  in >> value;
  return value;
}

// A leader's own error, which must come out of zero_first unchanged.
struct DownloadFailed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ZeroFirstWorlds : public ::testing::TestWithParam<int> {};

// Rank 0 finds no file and writes it; every other rank runs after it and finds the whole file.
// Every rank gets the callable's result, and each callable ran exactly once.
TEST_P(ZeroFirstWorlds, RankZeroRunsFirstAndTheOthersFindItsWorkDone) {
  const int world = GetParam();
  const fs::path file = scratch("order") / "data.txt";
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    int runs = 0;
    bool prepared_here = false;
    const int value = dist::zero_first([&] {
      ++runs;
      if (fs::exists(file)) return read_number(file);
      prepared_here = true;
      return prepare(file);
    });
    const bool ok = value == 42 && runs == 1 && prepared_here == (rank == 0);
    if (!ok)
      std::printf("rank %d: value %d, runs %d, prepared %d\n", rank, value, runs, prepared_here);
    return dist::all_ranks_ok(ok) ? 0 : 1;
  }));
  fs::remove_all(file.parent_path());
}

// Rank 0's callable throws: rank 0 gets its own exception back, unchanged; every other rank gets
// dist::Error naming rank 0 (not a TimeoutError: the group's timeout is a minute), without running
// its callable; and the group is still in step afterwards.
TEST_P(ZeroFirstWorlds, ALeadersErrorReachesEveryWaitingRankAtOnce) {
  const int world = GetParam();
  const auto start = Clock::now();
  expect_all_ok(run_group(world, {.timeout = 60s}, [&](int rank) {
    bool ran = false;
    std::string seen = "no error";
    try {
      dist::zero_first([&] {
        ran = true;
        if (rank == 0) throw DownloadFailed("the mirror answered 404");
      });
    } catch (const DownloadFailed& e) {
      seen = std::string("own: ") + e.what();
    } catch (const dist::TimeoutError& e) {
      seen = std::string("timeout: ") + e.what();
    } catch (const dist::Error& e) {
      seen = std::string("error: ") + e.what();
    }
    const bool ok = rank == 0 ? seen == "own: the mirror answered 404" && ran
                              : contains(seen, "error: rank 0 failed inside zero_first") && !ran;
    if (!ok) std::printf("rank %d saw %s (ran: %d)\n", rank, seen.c_str(), ran);
    return dist::all_ranks_ok(ok) ? 0 : 1;  // one more collective: the group is in step
  }));
  EXPECT_LT(Clock::now() - start, 30s);
}

// The leader takes longer than the group's timeout: the waiting ranks give up with a TimeoutError
// that says what they were waiting for. The leader does not hang: its zero_first returns (the
// others had sent their "fine" before they gave up) or throws, and its next collective would fail.
// (From 2 ranks: with 1, nobody waits.)
class ZeroFirstWaitingWorlds : public ::testing::TestWithParam<int> {};

TEST_P(ZeroFirstWaitingWorlds, ALeaderSlowerThanTheTimeoutIsNamed) {
  const int world = GetParam();
  auto results = run_group(world, {.timeout = 1s}, [&](int rank) {
    try {
      dist::zero_first([&] {
        if (rank == 0) std::this_thread::sleep_for(3s);
      });
    } catch (const dist::TimeoutError& e) {
      std::printf("%s\n", e.what());
      return rank == 0 ? 8 : 7;
    } catch (const dist::Error& e) {
      std::printf("%s\n", e.what());
      return rank == 0 ? 8 : 1;
    }
    return rank == 0 ? 0 : 1;
  });
  for (int rank = 0; rank < world; ++rank) {
    const auto& r = results[static_cast<std::size_t>(rank)];
    if (rank == 0) {
      EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 8) << describe(results);  // not killed
    } else {
      EXPECT_EQ(r.exit_code, 7) << describe(results);
      EXPECT_TRUE(contains(r.output, "zero_first: rank " + std::to_string(rank) +
                                         " waited for the rank(s) going first longer than the "
                                         "group's timeout"))
          << describe(results);
    }
  }
}

// The guard form keeps the same promises: an exception leaving rank 0's scope reaches the others.
TEST_P(ZeroFirstWorlds, TheGuardPublishesAFailureToo) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 60s}, [&](int rank) {
    std::string seen = "no error";
    try {
      dist::ZeroFirst first;
      if (first.leads()) throw DownloadFailed("404");
    } catch (const DownloadFailed&) {
      seen = "own";
    } catch (const dist::TimeoutError&) {
      seen = "timeout";
    } catch (const dist::Error& e) {
      seen = contains(e.what(), "rank 0 failed inside zero_first") ? "named" : e.what();
    }
    const bool ok = seen == (rank == 0 ? "own" : "named");
    return dist::all_ranks_ok(ok) ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ZeroFirstWorlds, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });
INSTANTIATE_TEST_SUITE_P(WorldSizes, ZeroFirstWaitingWorlds, ::testing::Values(2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

// Leaders::kLocalRank0 on 2 machines of 2 ranks (LOCAL_RANK = rank % 2): ranks 0 and 2 go first,
// each preparing its machine's own directory; when rank 2 fails, rank 0 (whose part succeeded)
// and both waiting ranks are told, and nobody carries on with half of the job's data.
TEST(ZeroFirstLocalLeaders, EachMachinePreparesItsOwnAndAFailureOnOneStopsAll) {
  const fs::path dir = scratch("machines");
  const int port = dist::testing::free_port();
  for (const bool fail : {false, true}) {
    const int round_port = fail ? dist::testing::free_port() : port;
    expect_all_ok(run_ranks(4, [&](int rank) {
      set_launcher_env(rank, 4, round_port);
      dist::testing::set_env({{"LOCAL_RANK", std::to_string(rank % 2)},
                              {"LOCAL_WORLD_SIZE", "2"},
                              {"GROUP_RANK", std::to_string(rank / 2)}});
      dist::init_process_group({.timeout = 60s});
      const fs::path file =
          dir / ("round" + std::to_string(fail) + "-machine" + std::to_string(rank / 2));
      std::string seen = "no error";
      int value = -1;
      try {
        value = dist::zero_first(
            [&] {
              if (fail && rank == 2) throw DownloadFailed("disk full");
              return fs::exists(file) ? read_number(file) : prepare(file);
            },
            Leaders::kLocalRank0);
      } catch (const DownloadFailed&) {
        seen = "own";
      } catch (const dist::Error& e) {
        seen = contains(e.what(), "rank 2 failed inside zero_first") ? "named" : e.what();
      }
      const bool ok = fail ? seen == (rank == 2 ? "own" : "named")
                           : value == 42 && fs::exists(file) && seen == "no error";
      if (!ok) std::printf("rank %d: %s, value %d\n", rank, seen.c_str(), value);
      const bool job_ok = dist::all_ranks_ok(ok);
      dist::destroy_process_group();
      return job_ok ? 0 : 1;
    }));
  }
  fs::remove_all(dir);
}

// Without a process group there is nobody to wait for: the callable just runs, once.
TEST(ZeroFirstAlone, WithoutAGroupItRunsTheCallable) {
  ASSERT_FALSE(dist::is_initialized());
  int runs = 0;
  EXPECT_EQ(dist::zero_first([&] { return ++runs; }), 1);
  dist::zero_first([&] { ++runs; });
  EXPECT_EQ(runs, 2);
  EXPECT_THROW(dist::zero_first([]() -> int { throw DownloadFailed("x"); }), DownloadFailed);
}

}  // namespace
