// dist::DistributedDataParallel on real processes (chapter 08): the broadcast at construction,
// the average of the gradients, and a model that differs between ranks named as an error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::run_ranks;
using dist::testing::set_launcher_env;

class DdpWorlds : public ::testing::TestWithParam<int> {};

// Rank r starts from w = r + 1 and b = -r, and has the gradients dW = 2 (r + 1), db = r + 1.
// After construction every rank holds rank 0's (1, 0); after average_gradients every rank holds
// the mean over ranks: dW = W + 1, db = (W + 1) / 2.
TEST_P(DdpWorlds, BroadcastsRankZerosWeightsAndAveragesTheGradients) {
  const int world = GetParam();
  const int port = dist::testing::free_port();
  auto results = run_ranks(world, [&](int rank) {
    set_launcher_env(rank, world, port);
    dist::init_process_group({.timeout = 30s});
    const auto r = static_cast<float>(rank);
    dist::Linear model(1, 1, {{r + 1}, {-r}});
    dist::DistributedDataParallel ddp(model.parameters());
    bool ok = model.weight().data.item(0) == 1 && model.bias().data.item(0) == 0;
    model.forward(dist::Tensor::from<float>({2}));       // x = 2
    model.backward(dist::Tensor::from<float>({r + 1}));  // d loss/d out = r + 1: dW = 2 (r + 1)
    ddp.average_gradients();
    // mean over ranks of 2 (r + 1) is W + 1; of r + 1 it is (W + 1) / 2 (exact in float32).
    ok = ok && model.weight().grad.item(0) == world + 1.0 &&
         model.bias().grad.item(0) == (world + 1.0) / 2;
    dist::destroy_process_group();
    return ok ? 0 : 1;
  });
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, DdpWorlds, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

TEST(Ddp, RanksThatWrapDifferentModelsAllStopWithAMessage) {
  const int port = dist::testing::free_port();
  auto results = run_ranks(3, [&](int rank) {
    set_launcher_env(rank, 3, port);
    dist::init_process_group({.timeout = 30s});
    const std::int64_t in = rank == 2 ? 2 : 1;  // rank 2 built Linear(2, 1)
    dist::Linear model(in, 1, {std::vector<float>(static_cast<std::size_t>(in), 0.5f), {0}});
    try {
      dist::DistributedDataParallel ddp(model.parameters());
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output,
                         "rank 2 wraps 2 parameters with 3 values, rank 0 wraps 2 with "
                         "2: every rank must build the same model"))
        << describe(results);
  }
}

}  // namespace
