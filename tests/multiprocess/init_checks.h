// What the tests of init_process_group share (init_resolve_test, init_meet_test, lifecycle_test):
// a collective that proves a group works, and the check that ranks which only initialise all fail
// fast with one message.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>

#include "dist/dist.h"
#include "ranks.h"

namespace dist::testing {

// Every rank all-reduces (rank + 1) and checks the sum W(W+1)/2: 0 if it holds.
inline int sum_check() {
  const int world = dist::get_world_size();
  auto t = dist::full(3, dist::get_rank() + 1.0, dist::kFloat64);
  dist::all_reduce(t);
  return t.equal(dist::full(3, world * (world + 1) / 2.0, dist::kFloat64)) ? 0 : 1;
}

struct Failure {
  int exit_code;
  std::string message;
};

// Runs `world` ranks that only initialise, with a 3 s timeout, and checks every rank fails with
// `want` within `limit`.
inline void expect_init_fails(int world, const std::function<void(int rank)>& setup,
                              const Failure& want,
                              std::chrono::seconds limit = std::chrono::seconds(15)) {
  const auto start = std::chrono::steady_clock::now();
  auto results = run_ranks(
      world,
      [&](int rank) {
        setup(rank);
        dist::init_process_group({.timeout = std::chrono::seconds(3)});
        return 0;
      },
      std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - start, limit);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, want.exit_code) << describe(results);
    EXPECT_TRUE(contains(r.output, want.message)) << "wanted: " << want.message << "\n"
                                                  << describe(results);
  }
}

}  // namespace dist::testing
