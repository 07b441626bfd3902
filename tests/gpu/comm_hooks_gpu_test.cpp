// DDP communication hooks (dist/comm_hooks.h) with the model on the GPU, over NCCL at world size
// 1 (the most one GPU allows): allreduce_hook leaves a rank's gradient as it is, the fp16 and
// bf16 hooks leave it rounded to float16 or bfloat16 (their all_reduce runs as ncclFloat16 or
// ncclBfloat16), and PowerSGD brings a rank-1 gradient through intact. Closed forms computed on
// the CPU.
//
// Without a usable GPU the binary exits 77, which CTest reports as skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "dist/comm_hooks.h"
#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/half.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
const dist::Device kGpu = dist::Device::cuda(0);

class HooksOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    dist::testing::clear_launcher_env();
    dist::init_process_group(
        {.backend = "nccl",
         .init_method = "tcp://127.0.0.1:" + std::to_string(dist::testing::free_port()),
         .world_size = 1,
         .rank = 0,
         .timeout = 20s});
  }
  void TearDown() override {
    if (dist::is_initialized()) dist::destroy_process_group();
  }
};

struct TwoLayers {
  dist::Linear a{16, 12, {std::vector<float>(192, 0.1f), std::vector<float>(12, 0)}, kGpu};
  dist::Linear b{12, 4, {std::vector<float>(48, 0.1f), std::vector<float>(4, 0)}, kGpu};
  std::vector<dist::Parameter*> parameters() {
    return {a.parameters()[0], a.parameters()[1], b.parameters()[0], b.parameters()[1]};
  }
};

TEST_F(HooksOnGpu, DefaultAndCompressionHooksGiveTheCastOfARanksGradient) {
  for (const std::string hook : {"allreduce", "fp16", "bf16"}) {
    TwoLayers m;
    dist::DistributedDataParallel ddp(m.parameters());
    ddp.register_comm_hook(dist::default_group(), hook == "fp16"   ? dist::fp16_compress_hook
                                                  : hook == "bf16" ? dist::bf16_compress_hook
                                                                   : dist::allreduce_hook);
    dist::Generator g(5);
    std::vector<dist::Tensor> given;
    for (dist::Parameter* p : m.parameters()) {
      given.push_back(dist::randn(p->grad.numel(), g));
      p->grad.copy_(given.back().to(kGpu));
    }
    ddp.average_gradients();
    std::int64_t differ = 0;
    for (std::size_t k = 0; k < given.size(); ++k) {
      const dist::Tensor got = m.parameters()[k]->grad.cpu();
      EXPECT_TRUE(m.parameters()[k]->grad.is_cuda());
      for (std::int64_t i = 0; i < got.numel(); ++i) {
        const auto v = static_cast<float>(given[k].item(i));
        const float want = hook == "fp16"   ? static_cast<float>(dist::Half(v))
                           : hook == "bf16" ? static_cast<float>(dist::BFloat16(v))
                                            : v;
        if (std::bit_cast<std::uint32_t>(static_cast<float>(got.item(i))) !=
            std::bit_cast<std::uint32_t>(want)) {
          ++differ;
        }
      }
    }
    EXPECT_EQ(differ, 0) << hook;
  }
}

// A rank-1 gradient u v^T is what PowerSGD at rank 1 sends exactly, to float32 rounding.
TEST_F(HooksOnGpu, PowerSgdBringsARankOneGradientThroughIntact) {
  TwoLayers m;
  dist::DistributedDataParallel ddp(m.parameters());
  dist::PowerSGDState state({.start_powerSGD_iter = 2});
  ddp.register_comm_hook(state, dist::powerSGD_hook);
  double worst = 0;
  for (int step = 0; step < 4; ++step) {
    for (dist::Parameter* p : m.parameters()) {
      const std::int64_t cols = p->data.numel() / p->sizes()[0];
      dist::Tensor grad(p->data.numel(), dist::kFloat32);
      for (std::int64_t i = 0; i < grad.numel(); ++i) {
        grad.set(i, (1 + (i / cols) % 5) * (0.5 - (i % cols) % 3));
      }
      p->grad.copy_(grad.to(kGpu));
    }
    ddp.average_gradients();
    for (dist::Parameter* p : m.parameters()) {
      const std::int64_t cols = p->data.numel() / p->sizes()[0];
      const dist::Tensor got = p->grad.cpu();
      for (std::int64_t i = 0; i < got.numel(); ++i) {
        const double want = (1 + (i / cols) % 5) * (0.5 - (i % cols) % 3);
        worst = std::max(worst, std::abs(got.item(i) - want));
      }
    }
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(state.iter(), 4);
  EXPECT_GT(state.compression_stats().numel_after, 0);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dist::cuda_is_available()) {
    std::printf("comm_hooks_gpu_test: skipped: %s\n", dist::cuda_unavailable_reason().c_str());
    return dist::kExitSkipped;
  }
  return RUN_ALL_TESTS();
}
