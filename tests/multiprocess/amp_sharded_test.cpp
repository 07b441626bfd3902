// dist/amp.h across ranks. With sharded gradients: each rank checks only its own shard, so the
// ranks must agree on found_inf (the scaler's process group, as torch's ShardedGradScaler
// all_reduces it), or a rank whose shard is finite steps while another skips, and the shards no
// longer belong to one model.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <vector>

#include "dist/amp.h"
#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/optim.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// One step on this rank's shard, whose gradient is inf on rank 0 only; returns whether it stepped
// and checks that the scale backed off (or not) alike on every rank.
bool shard_step(int rank, dist::ProcessGroup* agree) {
  dist::GradScaler scaler({.init_scale = 1024}, agree);
  const float g = rank == 0 ? std::numeric_limits<float>::infinity() : 1.0f;
  dist::Parameter shard{"shard", dist::Tensor::from({1.0f, 2.0f}), dist::Tensor::from({g, g})};
  dist::SGD optimizer({&shard}, 0.1);
  const bool stepped = scaler.step(optimizer);
  scaler.update();
  std::printf("rank %d: stepped %d, found_inf %d, scale %g\n", rank, stepped, scaler.found_inf(),
              scaler.get_scale());
  return stepped;
}

TEST(GradScalerSharded, EveryRankSkipsWhenOneShardHasAnInf) {
  expect_all_ok(run_group(3, {.timeout = 30s}, [](int rank) {
    const bool stepped = shard_step(rank, &dist::default_group());
    return stepped ? 1 : 0;  // every rank must skip
  }));
}

TEST(GradScalerSharded, WithoutAGroupTheRanksDisagree) {
  // Why the group is needed: alone, only rank 0 sees its inf.
  expect_all_ok(run_group(3, {.timeout = 30s}, [](int rank) {
    const bool stepped = shard_step(rank, nullptr);
    return stepped == (rank != 0) ? 0 : 1;
  }));
}

TEST(GradScalerDdp, EveryRankFindsTheSameInfWithoutAGroup) {
  // DDP averages the gradients before the scaler sees them: an inf on rank 0 is an inf in every
  // rank's mean, so every rank skips the step with no found_inf group at all.
  expect_all_ok(run_group(3, {.timeout = 30s}, [](int rank) {
    const float g = rank == 0 ? std::numeric_limits<float>::infinity() : 1.0f;
    dist::Parameter p{"weight", dist::Tensor::from({1.0f, 2.0f}), dist::Tensor::zeros(2)};
    dist::DistributedDataParallel ddp({&p});
    dist::SGD optimizer({&p}, 0.1);
    dist::GradScaler scaler({.init_scale = 1024});
    p.grad = dist::Tensor::from({g, 1.0f});
    ddp.grads_ready({&p});
    ddp.finish_gradient_sync();
    const bool stepped = scaler.step(optimizer);
    scaler.update();
    std::printf("rank %d: stepped %d, scale %g\n", rank, stepped, scaler.get_scale());
    return !stepped && scaler.get_scale() == 512.0f ? 0 : 1;
  }));
}

}  // namespace
