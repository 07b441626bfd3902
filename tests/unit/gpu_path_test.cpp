// The parts of the GPU path that need no GPU: what each "no usable GPU" situation says, what
// `--backend auto` picks, how ranks share an NCCL unique id through the store, dist::Device, and
// what a GPU tensor does on a machine (or a build) without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "backends/choice.h"
#include "backends/unique_id.h"
#include "dist/dist.h"
#include "gpu/gpu.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::backends::choose_auto;
using dist::backends::nccl_problem;
using dist::gpu::Census;
using dist::testing::contains;
using Clock = std::chrono::steady_clock;

Census built_without_cuda() {
  return Census{};
}

Census no_driver() {
  Census c;
  c.built_with_cuda = true;
  c.runtime_error = dist::gpu::kCudaErrorInsufficientDriver;  // what CUDA says without a driver
  c.runtime_error_text = "CUDA driver version is insufficient for CUDA runtime version";
  return c;
}

Census gpus(int count) {
  Census c;
  c.built_with_cuda = true;
  c.driver_loaded = true;
  c.device_count = count;
  return c;
}

// ---- What each "no usable GPU" situation says --------------------------------------------------

TEST(NoUsableGpu, ACpuOnlyBuildSaysHowToBuildTheGpuPath) {
  const std::string why = nccl_problem(built_without_cuda(), 0, 1);
  EXPECT_TRUE(contains(why, "built without the GPU path")) << why;
  EXPECT_TRUE(contains(why, "cmake --workflow --preset cuda")) << why;
}

TEST(NoUsableGpu, NoDriverIsNamedAsSuchNotAsAnOldDriver) {
  const std::string why = nccl_problem(no_driver(), 0, 1);
  EXPECT_TRUE(contains(why, "no NVIDIA driver is loaded")) << why;
  EXPECT_FALSE(contains(why, "upgrade")) << why;
}

TEST(NoUsableGpu, AnOldDriverIsToldToUpgrade) {
  Census c = no_driver();
  c.driver_loaded = true;
  const std::string why = nccl_problem(c, 0, 1);
  EXPECT_TRUE(contains(why, "older than this CUDA toolkit needs")) << why;
  EXPECT_TRUE(contains(why, "upgrade the driver")) << why;
}

TEST(NoUsableGpu, ADriverWithNoVisibleDevicePointsAtCudaVisibleDevices) {
  Census c = gpus(0);
  c.runtime_error = dist::gpu::kCudaErrorNoDevice;
  ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
  const std::string hidden = nccl_problem(c, 0, 1);
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  const std::string plain = nccl_problem(c, 0, 1);
  EXPECT_TRUE(contains(hidden, "sees no GPU")) << hidden;
  EXPECT_TRUE(contains(hidden, "CUDA_VISIBLE_DEVICES=\"\"")) << hidden;
  EXPECT_TRUE(contains(plain, "nvidia-smi")) << plain;
  EXPECT_FALSE(contains(plain, "CUDA_VISIBLE_DEVICES")) << plain;
}

TEST(NoUsableGpu, AnyOtherCudaErrorIsQuoted) {
  Census c = gpus(0);
  c.runtime_error = 999;
  c.runtime_error_text = "unknown error";
  EXPECT_TRUE(contains(nccl_problem(c, 0, 1), "CUDA says: unknown error"));
}

TEST(NoUsableGpu, MoreLocalRanksThanGpusIsRefusedOnEveryLocalRank) {
  // 4 ranks on a 2-GPU machine: ranks 2 and 3 have no GPU, and ranks 0 and 1 must not start
  // NCCL without them either.
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const std::string why = nccl_problem(gpus(2), local_rank, 4);
    EXPECT_TRUE(contains(
        why, "4 ranks run on this machine (LOCAL_RANK " + std::to_string(local_rank) + " of 4)"))
        << why;
    EXPECT_TRUE(contains(why, "sees only 2 GPUs")) << why;
    EXPECT_TRUE(contains(why, "NCCL cannot put two ranks on one GPU")) << why;
    EXPECT_TRUE(contains(why, "--nproc-per-node 2")) << why;
  }
}

TEST(NoUsableGpu, OneGpuPerLocalRankIsEnough) {
  EXPECT_EQ(nccl_problem(gpus(1), 0, 1), "");
  EXPECT_EQ(nccl_problem(gpus(8), 3, 4), "");
  EXPECT_EQ(nccl_problem(gpus(4), 3, 4), "");
}

TEST(NoUsableGpu, TheRefusalNamesTheRankAndTheWayOut) {
  const std::string text = dist::backends::nccl_refusal(3, 1, "no NVIDIA driver is loaded");
  EXPECT_EQ(text,
            "backend nccl cannot run on rank 3 (LOCAL_RANK 1): no NVIDIA driver is loaded. Use the "
            "CPU backend instead (--backend gloo), or --backend auto to pick one for you");
}

// ---- What auto picks ---------------------------------------------------------------------------

TEST(BackendAuto, PicksNcclOnlyWhenEveryRankCanRunIt) {
  const auto all = choose_auto({"", "", "", ""});
  EXPECT_EQ(all.backend, "nccl");
  EXPECT_EQ(all.reason, "every rank has a GPU of its own");

  const auto one_short = choose_auto({"", "", "no NVIDIA driver", ""});
  EXPECT_EQ(one_short.backend, "gloo");
  EXPECT_EQ(one_short.reason, "rank 2: no NVIDIA driver");
}

TEST(BackendAuto, NamesTheFirstRankThatCannotAndCountsTheOthers) {
  EXPECT_EQ(choose_auto({"", "a", "b"}).reason, "rank 1 (and 1 other): a");
  EXPECT_EQ(choose_auto({"a", "b", "c", ""}).reason, "rank 0 (and 2 others): a");
}

TEST(BackendAuto, OneReasonSharedByEveryRankIsSaidOnce) {
  EXPECT_EQ(choose_auto({"x", "x"}).reason, "on every rank, x");
  EXPECT_EQ(choose_auto({"x"}).reason, "x");
}

// ---- Sharing the NCCL unique id through the store ----------------------------------------------

dist::TCPStore::Options store_options(int port, bool server, std::chrono::milliseconds timeout) {
  dist::TCPStore::Options o;
  o.port = port;
  o.is_server = server;
  o.timeout = timeout;
  o.session = 7;
  return o;
}

dist::backends::NcclUniqueId id_filled_with(char c) {
  dist::backends::NcclUniqueId id;
  id.fill(c);
  id[0] = '\0';  // ids are binary: a zero byte must survive the store
  return id;
}

TEST(NcclUniqueId, RankZeroMakesItOnceAndEveryRankReceivesItsBytes) {
  dist::TCPStore server(store_options(0, true, 5s));
  constexpr int kWorld = 4;
  std::atomic<int> made{0};
  std::vector<dist::backends::NcclUniqueId> got(kWorld);
  std::vector<std::thread> ranks;
  for (int rank = kWorld - 1; rank >= 0; --rank) {  // rank 0 last: the others must wait for it
    ranks.emplace_back([&, rank] {
      dist::TCPStore store(store_options(server.port(), false, 5s));
      got[static_cast<std::size_t>(rank)] = dist::backends::share_unique_id(store, rank, [&] {
        ++made;
        return id_filled_with('q');
      });
    });
  }
  for (auto& t : ranks) t.join();
  EXPECT_EQ(made.load(), 1) << "only rank 0 may call ncclGetUniqueId";
  for (const auto& id : got) EXPECT_EQ(id, id_filled_with('q'));
}

TEST(NcclUniqueId, EachGroupReadsTheIdOfItsOwnKeySpace) {
  // The default group and a new_group() share one store, each under a prefix of its own.
  auto server = std::make_shared<dist::TCPStore>(store_options(0, true, 5s));
  auto client = std::make_shared<dist::TCPStore>(store_options(server->port(), false, 5s));
  const std::vector<std::string> groups = {"default/0/nccl", "default/0/subgroup/0/nccl"};
  for (std::size_t g = 0; g < groups.size(); ++g) {
    dist::PrefixStore on_rank0(groups[g], server);
    const char fill = static_cast<char>('a' + g);
    dist::backends::share_unique_id(on_rank0, 0, [&] { return id_filled_with(fill); });
  }
  auto never = []() -> dist::backends::NcclUniqueId { throw std::logic_error("not rank 0"); };
  dist::PrefixStore second(groups[1], client), first(groups[0], client);
  EXPECT_EQ(dist::backends::share_unique_id(second, 1, never), id_filled_with('b'));
  EXPECT_EQ(dist::backends::share_unique_id(first, 1, never), id_filled_with('a'));
}

TEST(NcclUniqueId, ARankZeroThatNeverPublishesEndsInATimeoutNamingIt) {
  dist::TCPStore server(store_options(0, true, 5s));
  dist::TCPStore client(store_options(server.port(), false, 300ms));
  const auto start = Clock::now();
  try {
    dist::backends::share_unique_id(client, 2, [] { return dist::backends::NcclUniqueId{}; });
    FAIL() << "expected a timeout";
  } catch (const dist::TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "rank 2 waited 0.3 s for rank 0 to publish the NCCL unique id"))
        << what;
    EXPECT_TRUE(contains(what, dist::backends::kUniqueIdKey)) << what;
  }
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST(NcclUniqueId, AValueOfTheWrongSizeIsRefused) {
  dist::TCPStore server(store_options(0, true, 5s));
  server.set(dist::backends::kUniqueIdKey, "not an id");
  try {
    dist::backends::share_unique_id(server, 1, [] { return dist::backends::NcclUniqueId{}; });
    FAIL() << "expected an error";
  } catch (const dist::Error& e) {
    EXPECT_TRUE(contains(e.what(), "has 9 bytes instead of 128")) << e.what();
  }
}

// ---- dist::Device ------------------------------------------------------------------------------

TEST(Device, ParsesTorchSpellings) {
  EXPECT_EQ(dist::Device::parse("cpu"), dist::Device::cpu());
  EXPECT_EQ(dist::Device::parse("cuda"), dist::Device::cuda(0));
  EXPECT_EQ(dist::Device::parse("cuda:3"), dist::Device::cuda(3));
  EXPECT_EQ(dist::Device::cuda(3).str(), "cuda:3");
  EXPECT_EQ(dist::Device().str(), "cpu");
  EXPECT_EQ(dist::Device::cuda(1).index(), 1);
  EXPECT_EQ(dist::Device::cpu().index(), -1);
  EXPECT_NE(dist::Device::cuda(0), dist::Device::cuda(1));
}

TEST(Device, RefusesWhatTorchRefuses) {
  EXPECT_THROW(dist::Device::parse("gpu"), dist::ConfigError);
  EXPECT_THROW(dist::Device::parse("cuda:"), dist::ConfigError);
  EXPECT_THROW(dist::Device::parse("cuda:-1"), dist::ConfigError);
  EXPECT_THROW(dist::Device::parse("cuda:x"), dist::ConfigError);
  EXPECT_THROW(dist::Device::cuda(-1), dist::ConfigError);
}

// ---- GPU tensors where there is no GPU ----------------------------------------------------------

TEST(GpuTensorWithoutGpu, IsAConfigErrorThatSaysWhatIsMissing) {
  if (dist::cuda_is_available()) GTEST_SKIP() << "this machine has a GPU; see tests/gpu";
  const bool built = dist::gpu::census().built_with_cuda;
  for (const auto& make : std::vector<std::function<void()>>{
           [] { dist::Tensor(4, dist::kFloat32, dist::Device::cuda(0)); },
           [] { (void)dist::arange(4, dist::kInt64, dist::Device::cuda(0)); },
           [] { (void)dist::full(2, 1.5, dist::kFloat64).cuda(); },
           [] {
             (void)dist::Tensor::from({1, 2}, dist::Device::cuda(1));
           }}) {
    try {
      make();
      FAIL() << "expected a ConfigError";
    } catch (const dist::ConfigError& e) {
      const std::string what = e.what();
      EXPECT_TRUE(contains(what, built ? "no NVIDIA driver" : "needs the GPU path")) << what;
    }
  }
}

TEST(GpuTensorWithoutGpu, EmptyOnesNeedNoMemoryButKeepTheirDevice) {
  // Like torch, a 0-element tensor allocates nothing, so it can be made anywhere; it still
  // prints its device, which is what a chapter shows before any data moves.
  const dist::Tensor t(0, dist::kInt64, dist::Device::cuda(0));
  EXPECT_EQ(t.device(), dist::Device::cuda(0));
  EXPECT_TRUE(t.is_cuda());
  EXPECT_EQ(t.repr(), "tensor([], device='cuda:0', dtype=torch.int64)");
}

TEST(GpuTensorWithoutGpu, CudaIsAvailableAgreesWithTheReason) {
  EXPECT_EQ(dist::cuda_is_available(), dist::cuda_unavailable_reason().empty());
  EXPECT_EQ(dist::cuda_is_available(), dist::cuda_device_count() > 0);
}

TEST(Tensor, OperandsOnDifferentDevicesAreRefusedAsTorchDoes) {
  const dist::Tensor cpu = dist::arange(2);
  const dist::Tensor gpu(0, dist::kInt64, dist::Device::cuda(0));
  const dist::Tensor empty_cpu(0, dist::kInt64);
  try {
    (void)(empty_cpu + gpu);
    FAIL() << "expected an error";
  } catch (const dist::Error& e) {
    EXPECT_TRUE(contains(e.what(),
                         "Expected all tensors to be on the same device, but found at least two "
                         "devices, cpu and cuda:0!"))
        << e.what();
  }
  EXPECT_THROW((void)empty_cpu.equal(gpu), dist::Error);
  EXPECT_EQ(cpu.device(), dist::Device::cpu());
}

}  // namespace
