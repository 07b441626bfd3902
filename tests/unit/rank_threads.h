// Test support: the ranks of a group as threads of this process, meeting through one in-memory
// store (dist::HashStore). The rendezvous, the DIST_DEBUG=DETAIL check and monitored_barrier take
// a Store and a rank, so each can be run as it runs in a job, without processes or sockets.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/check.h"

namespace dist::testing {

// How one rank's body ended.
struct ThreadOutcome {
  std::string
      error;  // "": it returned; else "TimeoutError: ...", "ConfigError: ..." or "Error: ..."
  double seconds = 0;  // from the start of all the threads to the end of this one
  bool ok() const { return error.empty(); }
};

// Runs body(rank) for every rank of `world` on threads started together, and returns each rank's
// outcome. A body still running at `deadline` is a hang, and a thread cannot be stopped: the test
// program then says which ranks hung and exits 1 at once, instead of hanging with them.
inline std::vector<ThreadOutcome> run_rank_threads(
    int world, const std::function<void(int rank)>& body,
    std::chrono::seconds deadline = std::chrono::seconds(60)) {
  std::vector<ThreadOutcome> outcomes(static_cast<std::size_t>(world));
  std::vector<bool> done(static_cast<std::size_t>(world), false);
  std::mutex mutex;
  std::condition_variable ended;
  int finished = 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      std::string error;
      try {
        body(rank);
      } catch (const dist::TimeoutError& e) {
        error = std::string("TimeoutError: ") + e.what();
      } catch (const dist::ConfigError& e) {
        error = std::string("ConfigError: ") + e.what();
      } catch (const std::exception& e) {
        error = std::string("Error: ") + e.what();
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard<std::mutex> lock(mutex);
      outcomes[static_cast<std::size_t>(rank)] = {error, seconds};
      done[static_cast<std::size_t>(rank)] = true;
      ++finished;
      ended.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    if (!ended.wait_until(lock, start + deadline, [&] { return finished == world; })) {
      std::string hung;
      for (int r = 0; r < world; ++r) {
        if (!done[static_cast<std::size_t>(r)]) hung += " " + std::to_string(r);
      }
      std::fprintf(stderr, "FAILED: ranks%s were still running after %lld s: a hang\n",
                   hung.c_str(), static_cast<long long>(deadline.count()));
      std::fflush(stderr);
      std::_Exit(1);
    }
  }
  for (auto& t : threads) t.join();
  return outcomes;
}

// Every outcome, one line per rank, for failure messages.
inline std::string describe(const std::vector<ThreadOutcome>& outcomes) {
  std::string text;
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    text += "rank " + std::to_string(r) + " (" + std::to_string(outcomes[r].seconds) +
            " s): " + (outcomes[r].ok() ? "returned" : outcomes[r].error) + "\n";
  }
  return text;
}

}  // namespace dist::testing
