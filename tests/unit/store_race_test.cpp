// compare_set under a race, on both rendezvous stores: processes on one FileStore, clients of one
// TCPStore. A compare_set whose compare and set are not one step (a lock shared, or taken twice, a
// client that reads, then writes) lets two handles win the same round. The stores' other
// operations are in store_test.cpp.
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/store.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::Store;
using dist::TCPStore;
using Clock = std::chrono::steady_clock;

TCPStore::Options options(bool is_server, int port) {
  TCPStore::Options o;
  o.port = port;
  o.is_server = is_server;
  o.timeout = 10s;
  o.session = 42;
  return o;
}

// kRacers handles race on one key, whose value "r:h" says that handle h won round r. Each handle
// keeps asking to move the key from the value it last saw to the next round, "r+1:h" (from no key
// at all to round 1), and compare_set answers with the value the key holds afterwards: its own
// (it won round r + 1) or the newer one it lost to. If compare and set are one atomic step, each
// round has exactly one winner; if a second handle can compare before the first has set (a lock
// shared, or taken twice), both win it. A race needs both on the CPU at once, which a loaded
// machine grants now and then: so many rounds, stopped after kRaceRounds or kRaceTime.

constexpr int kRacers = 4;
constexpr int kRaceRounds = 50000;
constexpr auto kRaceTime = 2s;

// What the racers share: in memory of the test's own for threads, mapped shared for processes
// forked after it was made (std::atomic<int> is lock-free, so it works across them).
struct Race {
  std::atomic<int> ready{0};             // racers at the start line
  std::atomic<int> wins[kRaceRounds]{};  // wins[r - 1]: how many handles won round r

  static Race* make_shared() {
    void* memory =
        ::mmap(nullptr, sizeof(Race), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return memory == MAP_FAILED ? nullptr : new (memory) Race;
  }
  static void unmap(Race* race) { ::munmap(race, sizeof(Race)); }

  // Handle `me` races on `store` once every racer is at the start line; false if the others
  // never came, or if compare_set's answers never reached the end (nonsense must not loop).
  bool run(Store& store, int me) {
    const auto start_by = Clock::now() + 20s;
    ready.fetch_add(1);
    while (ready.load() < kRacers) {
      if (Clock::now() > start_by) return false;
      std::this_thread::yield();
    }
    const auto stop = Clock::now() + kRaceTime;
    std::string seen;  // "": the key does not exist yet
    for (int attempt = 0; attempt < 2 * kRaceRounds + 2; ++attempt) {
      const int round = seen.empty() ? 0 : std::stoi(seen);
      if (round >= kRaceRounds || Clock::now() > stop) return true;
      const std::string mine = std::to_string(round + 1) + ":" + std::to_string(me);
      seen = store.compare_set("race", seen, mine);
      if (seen == mine) wins[round].fetch_add(1);
    }
    return false;
  }

  // "" if each of the rounds 1 to `last` has exactly one winner; otherwise the first that do not.
  std::string rounds_without_one_winner(int last) const {
    std::string problems;
    int shown = 0;
    for (int round = 1; round <= last && shown < 5; ++round) {
      const int n = wins[round - 1].load();
      if (n == 1) continue;
      ++shown;
      problems += "round " + std::to_string(round) + " won by " + std::to_string(n) + "; ";
    }
    return problems;
  }
};

// The round the key "race" ended at.
int last_round(Store& store) {
  return std::stoi(store.get("race"));
}

TEST(FileStore, CompareSetHasOneWinnerPerRoundAcrossProcesses) {
  const std::string path = "/tmp/dist_store_race_test_" + std::to_string(::getpid());
  std::remove(path.c_str());
  struct RemoveAtTheEnd {  // also when a broken store left its users' count wrong
    std::string path;
    ~RemoveAtTheEnd() { std::remove(path.c_str()); }
  } remove_at_the_end{path};
  dist::FileStore keep(path, 10s);  // keeps the file alive after the other processes close it
  Race* race = Race::make_shared();
  ASSERT_NE(race, nullptr);
  auto results = dist::testing::run_ranks(
      kRacers,
      [&](int rank) {
        dist::FileStore store(path, 10s);
        return race->run(store, rank) ? 0 : 1;
      },
      60s);
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << dist::testing::describe(results);
  const int last = last_round(keep);
  EXPECT_EQ(race->rounds_without_one_winner(last), "") << "after " << last << " rounds";
  Race::unmap(race);
}

TEST(TCPStore, CompareSetHasOneWinnerPerRoundAcrossClients) {
  TCPStore server(options(true, 0));
  std::vector<std::unique_ptr<TCPStore>> clients;
  for (int h = 0; h < kRacers; ++h) {
    clients.push_back(std::make_unique<TCPStore>(options(false, server.port())));
  }
  auto race = std::make_unique<Race>();
  std::atomic<int> finished{0};
  std::vector<std::thread> racers;
  for (int h = 0; h < kRacers; ++h) {
    racers.emplace_back([&, h] { finished += race->run(*clients[h], h) ? 1 : 0; });
  }
  for (auto& t : racers) t.join();
  EXPECT_EQ(finished.load(), kRacers);
  const int last = last_round(server);
  EXPECT_EQ(race->rounds_without_one_winner(last), "") << "after " << last << " rounds";
}

}  // namespace
