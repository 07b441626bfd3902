// Choosing the backend on real processes, on machines without a usable GPU (on a GPU machine
// these tests skip; tests/gpu covers that side): an explicit nccl stops every rank with exit 2
// and a message that says what is missing, auto falls back to gloo and says why, and ranks that
// ask for different backends stop at once.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <vector>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::run_group;
using dist::testing::run_ranks;
using dist::testing::set_launcher_env;
using Clock = std::chrono::steady_clock;

#define SKIP_ON_A_GPU_MACHINE()                                                      \
  if (dist::cuda_is_available()) {                                                   \
    GTEST_SKIP() << "this machine has a usable GPU; tests/gpu covers the NCCL side"; \
  }

TEST(BackendNccl, WithoutAUsableGpuEveryRankExits2SayingWhatIsMissing) {
  SKIP_ON_A_GPU_MACHINE();
  const auto start = Clock::now();
  auto results =
      run_group(2, {.backend = "nccl", .timeout = 30s}, [](int) { return 0; }, {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 10s) << "a refusal must not wait out the 30 s timeout";
  for (int rank = 0; rank < 2; ++rank) {
    const auto& r = results[static_cast<std::size_t>(rank)];
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "backend nccl cannot run on rank")) << describe(results);
    EXPECT_TRUE(contains(r.output, dist::cuda_unavailable_reason())) << describe(results);
    EXPECT_TRUE(contains(r.output, "(--backend gloo)")) << describe(results);
  }
}

TEST(BackendAuto, WithoutAUsableGpuPicksGlooAndRankZeroSaysWhy) {
  SKIP_ON_A_GPU_MACHINE();
  auto results = run_group(3, {.backend = "auto", .timeout = 30s}, [](int rank) {
    auto t = dist::full(2, rank + 1.0, dist::kFloat32, dist::get_device());
    dist::all_reduce(t);
    const bool ok = dist::get_backend() == "gloo" && dist::get_device() == dist::Device::cpu() &&
                    t.equal(dist::full(2, 6.0));
    return ok ? 0 : 1;
  });
  const std::string line =
      "[rank 0/3] backend auto chose gloo: on every rank, " + dist::cuda_unavailable_reason();
  for (int rank = 0; rank < 3; ++rank) {
    const auto& r = results[static_cast<std::size_t>(rank)];
    EXPECT_EQ(r.exit_code, 0) << describe(results);
    EXPECT_EQ(contains(r.output, line), rank == 0) << describe(results);
  }
}

TEST(BackendMismatch, RanksThatAskForDifferentBackendsAllStopAtOnce) {
  const int port = dist::testing::free_port();
  const auto start = Clock::now();
  auto results = run_ranks(
      2,
      [&](int rank) {
        set_launcher_env(rank, 2, port);
        dist::init_process_group({.backend = rank == 0 ? "gloo" : "auto", .timeout = 30s});
        return 0;
      },
      60s);
  EXPECT_LT(Clock::now() - start, 10s);
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "every rank must use the same backend (--backend)"))
        << describe(results);
  }
}

TEST(BackendNames, AnUnknownBackendIsAConfigError) {
  auto results = run_group(1, {.backend = "mpi"}, [](int) { return 0; });
  EXPECT_EQ(results[0].exit_code, 2);
  EXPECT_TRUE(contains(results[0].output, "unknown backend \"mpi\": use gloo, nccl or auto"))
      << results[0].output;
}

}  // namespace

namespace {

TEST(BadArguments, ReduceScatterAndScatterNameTheOddInput) {
  auto results = run_group(1, {.backend = "gloo"}, [](int) {
    dist::Tensor out(2, dist::kFloat32);
    const std::vector<dist::Tensor> two = {dist::zeros(2), dist::zeros(2)};
    const std::vector<dist::Tensor> odd = {dist::zeros(3)};
    int caught = 0;
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { dist::reduce_scatter(out, two); }, [&] { dist::reduce_scatter(out, odd); },
             [&] { dist::scatter(out, &odd, 0); }, [&] { dist::scatter(out, nullptr, 0); }}) {
      try {
        call();
      } catch (const dist::ConfigError& e) {
        dist::write_stdout(std::string(e.what()) + "\n");
        ++caught;
      }
    }
    return caught == 4 ? 0 : 1;
  });
  const std::string& out = results[0].output;
  EXPECT_EQ(results[0].exit_code, 0) << out;
  EXPECT_TRUE(
      contains(out, "reduce_scatter needs one input tensor per rank: got 2 for world_size 1"))
      << out;
  EXPECT_TRUE(contains(out,
                       "reduce_scatter input 0 (torch.float32, 3 elements) does not match the "
                       "output (torch.float32, 2 elements)"))
      << out;
  EXPECT_TRUE(contains(out, "scatter input 0 (torch.float32, 3 elements) does not match")) << out;
  EXPECT_TRUE(contains(out, "scatter needs one input tensor per rank: got none")) << out;
}

}  // namespace
