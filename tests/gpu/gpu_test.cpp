// The GPU path on a real GPU: tensors on cuda:0 and back, every collective of the NCCL backend
// (world size 1, the most one GPU allows: NCCL refuses two ranks on one GPU), Gloo with GPU
// tensors, `auto` picking NCCL, and the watchdog aborting a collective that outlives its timeout.
//
// Without a usable GPU the whole binary exits 77, which CTest reports as skipped. It is one
// CTest test (not one per TEST) for that reason: discovering the tests would need a GPU too.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/nn.h"
#include "dist/optim.h"
#include "ranks.h"
#include "spin_kernel.h"

namespace {

using namespace std::chrono_literals;
using dist::Device;
using dist::ReduceOp;
using dist::Tensor;
using dist::testing::contains;
using Clock = std::chrono::steady_clock;

const Device kGpu = Device::cuda(0);
const std::vector<dist::DType> kDtypes = {dist::kFloat32, dist::kFloat64, dist::kInt32,
                                          dist::kInt64,   dist::kFloat16, dist::kBFloat16};

// 1, -2, 3, -4, ...: signs and magnitudes that a wrong copy or a wrong dtype would garble. For
// float16 and bfloat16 the magnitudes start again after 2048, inside float16's range (bfloat16
// rounds them).
Tensor pattern(std::int64_t n, dist::DType dtype, Device device = {}) {
  Tensor t(n, dtype);
  const std::int64_t period = dist::element_size(dtype) == 2 ? 2048 : n + 1;
  for (std::int64_t i = 0; i < n; ++i) {
    t.set(i, static_cast<double>((i % 2 ? -1 : 1) * (i % period + 1)));
  }
  return t.to(device);
}

// ---- Tensors on the GPU ------------------------------------------------------------------------

TEST(GpuTensor, RoundTripsEveryDtypeExactly) {
  for (dist::DType dtype : kDtypes) {
    for (std::int64_t n : {1, 7, 1 << 20}) {
      const Tensor host = pattern(n, dtype);
      const Tensor gpu = host.cuda();
      EXPECT_EQ(gpu.device(), kGpu);
      EXPECT_EQ(gpu.dtype(), dtype);
      EXPECT_TRUE(gpu.cpu().equal(host)) << dist::dtype_name(dtype) << " n=" << n;
      EXPECT_DOUBLE_EQ(gpu.item(n - 1), host.item(n - 1));
    }
  }
  EXPECT_EQ(pattern(3, dist::kInt32, kGpu).to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, -2, 3}));
}

TEST(GpuTensor, CopiesAreIndependentAndStayOnTheGpu) {
  const Tensor a = pattern(5, dist::kFloat32, kGpu);
  Tensor b = a;  // a device-to-device copy
  b.set(0, 100);
  b.fill_(0);
  b.set(4, 9);
  EXPECT_EQ(b.device(), kGpu);
  EXPECT_TRUE(a.cpu().equal(pattern(5, dist::kFloat32)));
  EXPECT_TRUE(b.cpu().equal(Tensor::from<float>({0, 0, 0, 0, 9})));
}

TEST(GpuTensor, SlicesAndCopiesBetweenDevices) {
  Tensor big = dist::zeros(6, dist::kInt64, kGpu);
  big.assign_slice(2, Tensor::from<std::int64_t>({7, 8}));  // host values into a GPU tensor
  EXPECT_TRUE(big.cpu().equal(Tensor::from<std::int64_t>({0, 0, 7, 8, 0, 0})));
  const Tensor mid = big.slice(2, 3);
  EXPECT_EQ(mid.device(), kGpu);
  EXPECT_TRUE(mid.cpu().equal(Tensor::from<std::int64_t>({7, 8, 0})));
  Tensor host(3, dist::kFloat64);
  host.copy_(mid);  // converts the dtype, keeps the destination's device
  EXPECT_EQ(host.device(), Device::cpu());
  EXPECT_TRUE(host.equal(Tensor::from<double>({7, 8, 0})));
}

TEST(GpuTensor, ArithmeticGivesWhatTheCpuGives) {
  const Tensor a = pattern(9, dist::kInt32), b = pattern(9, dist::kFloat32) * 0.5;
  const Tensor ga = a.cuda(), gb = b.cuda();
  EXPECT_TRUE((ga + gb).cpu().equal(a + b));
  EXPECT_TRUE((ga * 3 - 1).cpu().equal(a * 3 - 1));
  EXPECT_TRUE((ga / 2).cpu().equal(a / 2));
  EXPECT_EQ((ga / 2).device(), kGpu);
  Tensor g = ga;
  g += 5;
  EXPECT_TRUE(g.cpu().equal(a + 5));
  EXPECT_TRUE(ga.to(dist::kFloat64).cpu().equal(a.to(dist::kFloat64)));
  EXPECT_DOUBLE_EQ(gb.sum(), b.sum());
}

// Arithmetic on GPU tensors goes through the host, so float16 and bfloat16 round there exactly
// as on the CPU: one rounding per operation.
TEST(GpuTensor, HalfArithmeticGivesWhatTheCpuGives) {
  for (dist::DType dtype : {dist::kFloat16, dist::kBFloat16}) {
    const Tensor a = pattern(9, dtype), b = pattern(9, dtype) * 0.1;
    const Tensor ga = a.cuda(), gb = b.cuda();
    EXPECT_TRUE((ga + gb).cpu().equal(a + b)) << dist::dtype_name(dtype);
    EXPECT_TRUE((ga / 3).cpu().equal(a / 3)) << dist::dtype_name(dtype);
    EXPECT_EQ((ga * gb).dtype(), dtype);
    EXPECT_TRUE(ga.to(dist::kFloat32).cpu().equal(a.to(dist::kFloat32)));
  }
  EXPECT_EQ(dist::full(2, 1.5, dist::kFloat16, kGpu).repr(),
            "tensor([1.5000, 1.5000], device='cuda:0', dtype=torch.float16)");
}

TEST(GpuTensor, PrintsAsTorchDoes) {
  const Tensor t = dist::arange(2, dist::kInt64, kGpu) + 1 + 2 * 1;  // post C, rank 1 of 2
  EXPECT_EQ(t.repr(), "tensor([3, 4], device='cuda:0')");
  EXPECT_EQ(pattern(2, dist::kInt32, kGpu).repr(),
            "tensor([ 1, -2], device='cuda:0', dtype=torch.int32)");
  EXPECT_EQ(dist::full(2, 1.5, dist::kFloat32, kGpu).repr(),
            "tensor([1.5000, 1.5000], device='cuda:0')");
}

TEST(GpuTensor, MixingDevicesAndMissingGpusAreClearErrors) {
  EXPECT_THROW((void)(dist::arange(2, dist::kInt64, kGpu) + dist::arange(2)), dist::Error);
  const int beyond = dist::cuda_device_count();
  try {
    (void)dist::arange(2, dist::kInt64, Device::cuda(beyond));
    FAIL() << "expected a ConfigError";
  } catch (const dist::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "cuda:" + std::to_string(beyond) + " does not exist"))
        << e.what();
  }
}

// ---- The NCCL backend at world size 1
// ------------------------------------------------------------

class WorldOfOne : public ::testing::Test {
 protected:
  void init(const std::string& backend, std::chrono::milliseconds timeout = 20s) {
    // Nothing from the machine's launcher may leak in: one rank, on GPU 0.
    dist::testing::clear_launcher_env();
    dist::init_process_group(
        {.backend = backend,
         .init_method = "tcp://127.0.0.1:" + std::to_string(dist::testing::free_port()),
         .world_size = 1,
         .rank = 0,
         .timeout = timeout});
  }
  void TearDown() override {
    if (dist::is_initialized()) dist::destroy_process_group();
  }
};

std::vector<ReduceOp> ops_for(dist::DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::SUM, ReduceOp::PRODUCT, ReduceOp::MIN, ReduceOp::MAX};
  if (dist::is_floating_point(dtype)) ops.push_back(ReduceOp::AVG);
  return ops;
}

// With one rank every reduction of x is x, every gather is [x] and every scatter of [x] is x:
// the closed forms. The outputs start as zeros, so a collective that moved nothing fails.
TEST_F(WorldOfOne, EveryNcclCollectiveMatchesItsClosedForm) {
  init("nccl");
  ASSERT_EQ(dist::get_backend(), "nccl");
  ASSERT_EQ(dist::get_device(), kGpu);
  for (dist::DType dtype : kDtypes) {
    for (std::int64_t n : {0, 1, 7, 1 << 22}) {
      SCOPED_TRACE(std::string(dist::dtype_name(dtype)) + " n=" + std::to_string(n));
      const Tensor x = pattern(n, dtype, kGpu);
      const Tensor expected = x.cpu();
      for (ReduceOp op : ops_for(dtype)) {
        Tensor t = x;
        dist::all_reduce(t, op);
        EXPECT_EQ(t.device(), kGpu);
        EXPECT_TRUE(t.cpu().equal(expected)) << dist::reduce_op_name(op);
        Tensor out = dist::zeros(n, dtype, kGpu);
        dist::reduce_scatter(out, {x}, op);
        EXPECT_TRUE(out.cpu().equal(expected)) << "reduce_scatter " << dist::reduce_op_name(op);
        Tensor flat_out = dist::zeros(n, dtype, kGpu);
        dist::default_group().reduce_scatter_tensor(flat_out, x, op);
        EXPECT_TRUE(flat_out.cpu().equal(expected))
            << "reduce_scatter_tensor " << dist::reduce_op_name(op);
      }
      Tensor b = x;
      dist::broadcast(b, 0);
      EXPECT_TRUE(b.cpu().equal(expected));

      std::vector<Tensor> gathered;
      dist::all_gather(gathered, x);
      ASSERT_EQ(gathered.size(), 1u);
      EXPECT_EQ(gathered[0].device(), kGpu);
      EXPECT_TRUE(gathered[0].cpu().equal(expected));
      Tensor flat = dist::zeros(n, dtype, kGpu);
      dist::default_group().all_gather_into_tensor(flat, x);
      EXPECT_TRUE(flat.cpu().equal(expected)) << "all_gather_into_tensor";

      std::vector<Tensor> at_root;
      dist::gather(x, &at_root, 0);
      ASSERT_EQ(at_root.size(), 1u);
      EXPECT_TRUE(at_root[0].cpu().equal(expected));

      Tensor scattered = dist::zeros(n, dtype, kGpu);
      const std::vector<Tensor> parts = {x};
      dist::scatter(scattered, &parts, 0);
      EXPECT_TRUE(scattered.cpu().equal(expected));
    }
  }
  dist::barrier();
  // One rank sends nothing: every nominal count has the factor W-1.
  EXPECT_EQ(dist::default_group().bytes_sent(), 0);
}

TEST_F(WorldOfOne, NcclRefusesWhatItCannotDoWithAMessage) {
  init("nccl");
  Tensor ints = dist::arange(4, dist::kInt32, kGpu);
  try {
    dist::all_reduce(ints, ReduceOp::BXOR);
    FAIL() << "expected a ConfigError";
  } catch (const dist::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "no bitwise reductions")) << e.what();
  }
  Tensor on_host = dist::arange(4, dist::kFloat32);
  try {
    dist::all_reduce(on_host);
    FAIL() << "expected a ConfigError";
  } catch (const dist::ConfigError& e) {
    EXPECT_TRUE(contains(e.what(),
                         "needs tensors on this rank's GPU, cuda:0, but this one is on "
                         "cpu"))
        << e.what();
  }
  EXPECT_THROW(dist::send(ints, 0), dist::ConfigError);  // to itself
  // The refusals above did not break the group.
  Tensor t = dist::full(3, 2.0, dist::kFloat64, kGpu);
  dist::all_reduce(t, ReduceOp::AVG);
  EXPECT_TRUE(t.cpu().equal(dist::full(3, 2.0, dist::kFloat64)));
}

// Point to point needs a second rank (NCCL refuses two ranks on one GPU): here, its refusals,
// made before anything is posted, leave the group usable.
TEST_F(WorldOfOne, NcclPointToPointRefusesBadArgumentsBeforePostingAnything) {
  init("nccl");
  Tensor t = dist::arange(4, dist::kFloat32, kGpu);
  EXPECT_THROW((void)dist::isend(t, 0), dist::ConfigError);  // to itself
  EXPECT_THROW((void)dist::irecv(t, 1), dist::ConfigError);  // no rank 1
  EXPECT_THROW((void)dist::batch_isend_irecv({}), dist::ConfigError);
  Tensor s = dist::full(3, 2.0, dist::kFloat64, kGpu);
  dist::all_reduce(s);
  EXPECT_TRUE(s.cpu().equal(dist::full(3, 2.0, dist::kFloat64)));
  EXPECT_EQ(dist::default_group().header_bytes_sent(), 0);
}

TEST_F(WorldOfOne, AutoPicksNcclWhenTheRankHasAGpu) {
  init("auto");
  EXPECT_EQ(dist::get_backend(), "nccl");
  EXPECT_EQ(dist::get_device(), kGpu);
}

TEST_F(WorldOfOne, DestroyAndInitAgainMakesAFreshCommunicator) {
  for (int round = 0; round < 3; ++round) {
    init("nccl");
    Tensor t = dist::full(4, round, dist::kInt64, kGpu);
    dist::all_reduce(t);
    EXPECT_TRUE(t.cpu().equal(dist::full(4, round, dist::kInt64)));
    dist::destroy_process_group();
  }
}

TEST_F(WorldOfOne, GlooMovesGpuTensorsThroughTheHost) {
  init("gloo");
  Tensor t = pattern(5, dist::kFloat32, kGpu);
  dist::all_reduce(t, ReduceOp::MAX);
  EXPECT_EQ(t.device(), kGpu);
  EXPECT_TRUE(t.cpu().equal(pattern(5, dist::kFloat32)));
  std::vector<Tensor> gathered;
  dist::all_gather(gathered, t);
  ASSERT_EQ(gathered.size(), 1u);
  EXPECT_EQ(gathered[0].device(), kGpu);
  EXPECT_TRUE(gathered[0].cpu().equal(pattern(5, dist::kFloat32)));
  // The input may be one of the outputs, as torch allows: the list still ends on the GPU.
  std::vector<Tensor> aliased{pattern(5, dist::kFloat32, kGpu)};
  dist::all_gather(aliased, aliased[0]);
  EXPECT_EQ(aliased[0].device(), kGpu);
  EXPECT_TRUE(aliased[0].cpu().equal(pattern(5, dist::kFloat32)));
  std::vector<Tensor> gathered_here{pattern(5, dist::kFloat32, kGpu)};
  dist::gather(gathered_here[0], &gathered_here, 0);
  EXPECT_EQ(gathered_here[0].device(), kGpu);
  EXPECT_TRUE(gathered_here[0].cpu().equal(pattern(5, dist::kFloat32)));
  // The flat forms, both tensors on the GPU.
  Tensor flat = dist::zeros(5, dist::kFloat32, kGpu);
  dist::default_group().all_gather_into_tensor(flat, t);
  EXPECT_EQ(flat.device(), kGpu);
  EXPECT_TRUE(flat.cpu().equal(pattern(5, dist::kFloat32)));
  Tensor part = dist::zeros(5, dist::kFloat32, kGpu);
  dist::default_group().reduce_scatter_tensor(part, t, ReduceOp::MAX);
  EXPECT_EQ(part.device(), kGpu);
  EXPECT_TRUE(part.cpu().equal(pattern(5, dist::kFloat32)));
}

// The watchdog. A kernel holds the default stream for 8 s; the collective, which must wait for
// the program's earlier GPU work, cannot start, and its 3 s timeout passes. The watchdog aborts
// the communicator, with NCCL's kernel still queued behind the spinning one (AVG makes NCCL
// launch a kernel even for one rank), and says which call. The aborted kernel must not touch
// the data; the group then refuses further calls, and a new group works.
TEST_F(WorldOfOne, TheWatchdogAbortsACollectiveThatOutlivesItsTimeout) {
  init("nccl");  // the first communicator of a process pays NCCL's one-time setup: not in the 3 s
  dist::destroy_process_group();
  init("nccl", 3s);
  Tensor t = dist::full(8, 1.0, dist::kFloat32, kGpu);
  ASSERT_TRUE(dist::testing::spin_on_default_stream(8s));
  const auto start = Clock::now();
  try {
    dist::all_reduce(t, ReduceOp::AVG);
    FAIL() << "expected a TimeoutError";
  } catch (const dist::TimeoutError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what,
                         "all_reduce #1 (AVG, torch.float32, 8 elements, cuda:0) timed out "
                         "after 3 s on rank 0"))
        << what;
    EXPECT_TRUE(contains(what, "The NCCL communicator was aborted")) << what;
  }
  // At the timeout, or once the spinning kernel ends if ncclCommAbort waits for it.
  EXPECT_GE(Clock::now() - start, 3s);
  EXPECT_LT(Clock::now() - start, 13s);
  ASSERT_TRUE(dist::testing::wait_for_the_gpu());
  EXPECT_TRUE(t.cpu().equal(dist::full(8, 1.0)));
  try {
    dist::barrier();
    FAIL() << "expected an error from the aborted group";
  } catch (const dist::Error& e) {
    EXPECT_TRUE(contains(e.what(), "was closed after an earlier error (all_reduce #1")) << e.what();
  }
  dist::destroy_process_group();
  init("nccl");
  Tensor again = dist::full(8, 3.0, dist::kFloat32, kGpu);
  dist::all_reduce(again);
  EXPECT_TRUE(again.cpu().equal(dist::full(8, 3.0)));
}

// ---- dist/nn.h and DDP on the GPU (chapter 08) ------------------------------------------------

// The same Linear, loss and SGD step on the CPU and on the GPU, from the same inputs: the kernels
// sum in double like the CPU loops, so outputs and gradients are the same bits.
TEST(GpuNn, LinearLossAndSgdGiveTheCpuBits) {
  const dist::LinearInit init{{0.5f, -1.25f, 2.0f, 0.75f, -0.5f, 1.5f}, {0.1f, -0.2f}};
  dist::Linear cpu(3, 2, init), gpu(3, 2, init, kGpu);
  std::vector<float> xs, ys;
  for (int i = 0; i < 3 * 37; ++i) xs.push_back(static_cast<float>((i * 7919) % 101) / 50.0f - 1);
  for (int i = 0; i < 2 * 37; ++i) ys.push_back(static_cast<float>((i * 31) % 17) / 8.0f - 1);
  const Tensor x = Tensor::from(xs), y = Tensor::from(ys);
  dist::SGD cpu_opt(cpu.parameters(), 0.05), gpu_opt(gpu.parameters(), 0.05);
  for (int step = 0; step < 3; ++step) {
    const Tensor out_cpu = cpu.forward(x), out_gpu = gpu.forward(x.cuda());
    EXPECT_EQ(out_gpu.device(), kGpu);
    EXPECT_TRUE(out_gpu.cpu().equal(out_cpu)) << "step " << step;
    const dist::MseLoss l_cpu = dist::mse_loss(out_cpu, y),
                        l_gpu = dist::mse_loss(out_gpu, y.cuda());
    EXPECT_NEAR(l_gpu.loss, l_cpu.loss, 1e-12 * l_cpu.loss);
    EXPECT_TRUE(l_gpu.grad.cpu().equal(l_cpu.grad));
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    EXPECT_TRUE(gpu.backward(l_gpu.grad).cpu().equal(cpu.backward(l_cpu.grad)));
    EXPECT_TRUE(gpu.weight().grad.cpu().equal(cpu.weight().grad));
    EXPECT_TRUE(gpu.bias().grad.cpu().equal(cpu.bias().grad));
    cpu_opt.step();
    gpu_opt.step();
    EXPECT_TRUE(gpu.weight().data.cpu().equal(cpu.weight().data));
    EXPECT_TRUE(gpu.bias().data.cpu().equal(cpu.bias().data));
  }
}

// SGD with momentum, dampening and nesterov (chapter 11): the kernel updates the momentum buffer
// and the parameter as the CPU loop does, bit for bit, and a loaded buffer continues the same.
TEST(GpuNn, SgdMomentumGivesTheCpuBits) {
  const std::vector<float> start{1, -2, 0.5f, 3, -0.25f};
  for (const dist::SGDOptions options :
       {dist::SGDOptions{.momentum = 0.9}, dist::SGDOptions{.momentum = 0.5, .dampening = 0.25},
        dist::SGDOptions{.momentum = 0.9, .nesterov = true}}) {
    dist::Parameter cpu{"p", Tensor::from(start), dist::zeros(5)};
    dist::Parameter gpu{"p", Tensor::from(start, kGpu), dist::zeros(5, dist::kFloat32, kGpu)};
    dist::SGD cpu_opt({&cpu}, 0.1, options), gpu_opt({&gpu}, 0.1, options);
    for (int step = 0; step < 4; ++step) {
      std::vector<float> g;
      for (int i = 0; i < 5; ++i)
        g.push_back(static_cast<float>((i * 7 + step * 3) % 11) / 7 - 0.7f);
      cpu.grad = Tensor::from(g);
      gpu.grad = Tensor::from(g, kGpu);
      cpu_opt.step();
      gpu_opt.step();
      EXPECT_EQ(gpu_opt.momentum_buffers()[0].device(), kGpu);
      EXPECT_TRUE(gpu.data.cpu().equal(cpu.data)) << "step " << step;
      EXPECT_TRUE(gpu_opt.momentum_buffers()[0].cpu().equal(cpu_opt.momentum_buffers()[0]));
    }
    dist::SGD resumed({&gpu}, 0.1, options);  // a snapshot's CPU buffers, loaded onto the GPU
    resumed.load_momentum_buffers({cpu_opt.momentum_buffers()[0].cpu()});
    EXPECT_EQ(resumed.momentum_buffers()[0].device(), kGpu);
    cpu_opt.step();
    resumed.step();
    EXPECT_TRUE(gpu.data.cpu().equal(cpu.data));
  }
}

// Adam (chapter 12): the kernel computes nn_math::adam, fused multiply-adds included (__fmaf_rn),
// so parameters and both moments keep the CPU loop's bits, which are torch's (optim_test), with
// weight decay off and on, over more values than one block and a partial block.
TEST(GpuNn, AdamGivesTheCpuBits) {
  constexpr std::int64_t kValues = 300;
  for (const double weight_decay : {0.0, 0.1}) {
    std::vector<float> start;
    for (std::int64_t i = 0; i < kValues; ++i)
      start.push_back(static_cast<float>((i * 37) % 101) / 50 - 1);
    dist::Parameter cpu{"p", Tensor::from(start), dist::zeros(kValues)};
    dist::Parameter gpu{"p", Tensor::from(start, kGpu), dist::zeros(kValues, dist::kFloat32, kGpu)};
    const dist::AdamOptions options{.beta1 = 0.8, .beta2 = 0.99, .weight_decay = weight_decay};
    dist::Adam cpu_opt({&cpu}, 0.05, options), gpu_opt({&gpu}, 0.05, options);
    for (int step = 0; step < 10; ++step) {
      std::vector<float> g;
      for (std::int64_t i = 0; i < kValues; ++i)
        g.push_back(std::ldexp(static_cast<float>((i * 7 + step * 3) % 11) - 5, -(i % 13)));
      cpu.grad = Tensor::from(g);
      gpu.grad = Tensor::from(g, kGpu);
      cpu_opt.step();
      gpu_opt.step();
      EXPECT_EQ(gpu_opt.exp_avg()[0].device(), kGpu);
      EXPECT_TRUE(gpu.data.cpu().equal(cpu.data)) << "weight decay " << weight_decay;
      EXPECT_TRUE(gpu_opt.exp_avg()[0].cpu().equal(cpu_opt.exp_avg()[0]));
      EXPECT_TRUE(gpu_opt.exp_avg_sq()[0].cpu().equal(cpu_opt.exp_avg_sq()[0]));
    }
  }
}

// The storage counters count GPU tensors apart from CPU ones.
TEST(GpuTensor, MemoryAllocatedCountsGpuStorage) {
  const std::int64_t cpu_base = dist::memory_allocated(), base = dist::memory_allocated(kGpu);
  dist::reset_peak_memory_stats(kGpu);
  {
    Tensor t(1000, dist::kFloat32, kGpu);
    EXPECT_EQ(dist::memory_allocated(kGpu), base + 4000);
    EXPECT_EQ(dist::memory_allocated(), cpu_base);
  }
  EXPECT_EQ(dist::memory_allocated(kGpu), base);
  EXPECT_EQ(dist::max_memory_allocated(kGpu), base + 4000);
}

// ReLU, BatchNorm1d (training and evaluation) and cross_entropy: the GPU kernels give the CPU's
// bits for outputs and gradients.
TEST(GpuNn, ReluBatchNormAndCrossEntropyGiveTheCpuBits) {
  std::vector<float> xs;
  for (int i = 0; i < 4 * 29; ++i) xs.push_back(static_cast<float>((i * 7919) % 53) / 13.0f - 2);
  const Tensor x = Tensor::from(xs);
  dist::ReLU relu_cpu, relu_gpu;
  EXPECT_TRUE(relu_gpu.forward(x.cuda()).cpu().equal(relu_cpu.forward(x)));
  EXPECT_TRUE(relu_gpu.backward(x.cuda()).cpu().equal(relu_cpu.backward(x)));
  dist::BatchNorm1d bn_cpu(4), bn_gpu(4, kGpu);
  EXPECT_TRUE(bn_gpu.forward(x.cuda()).cpu().equal(bn_cpu.forward(x)));
  EXPECT_TRUE(bn_gpu.backward(x.cuda()).cpu().equal(bn_cpu.backward(x)));
  EXPECT_TRUE(bn_gpu.weight().grad.cpu().equal(bn_cpu.weight().grad));
  EXPECT_TRUE(bn_gpu.running_var().cpu().equal(bn_cpu.running_var()));
  bn_cpu.train(false);
  bn_gpu.train(false);
  EXPECT_TRUE(bn_gpu.forward(x.cuda()).cpu().equal(bn_cpu.forward(x)));
  std::vector<std::int64_t> labels;
  for (int r = 0; r < 29; ++r) labels.push_back(r % 4);
  const Tensor y = Tensor::from(labels);
  const dist::CrossEntropy ce_cpu = dist::cross_entropy(x, y, 4);
  const dist::CrossEntropy ce_gpu = dist::cross_entropy(x.cuda(), y.cuda(), 4);
  EXPECT_TRUE(ce_gpu.grad.cpu().equal(ce_cpu.grad));
  EXPECT_EQ(ce_gpu.correct, ce_cpu.correct);
  EXPECT_NEAR(ce_gpu.loss, ce_cpu.loss, 1e-12 * ce_cpu.loss);
}

// DDP over NCCL with one rank: the broadcast keeps the weights, the average is the gradient itself.
TEST_F(WorldOfOne, DdpOverNcclKeepsTheGradientOfASingleRank) {
  init("nccl");
  dist::Linear model(1, 1, {{0.5f}, {-0.25f}}, kGpu);
  dist::DistributedDataParallel ddp(model.parameters());
  EXPECT_EQ(model.weight().data.item(0), 0.5);
  const Tensor x = Tensor::from<float>({1, 2, 3}, kGpu), y = Tensor::from<float>({5, 8, 11}, kGpu);
  model.backward(dist::mse_loss(model.forward(x), y).grad);
  const Tensor grad_before = model.weight().grad.cpu();
  ddp.average_gradients();
  EXPECT_TRUE(model.weight().grad.cpu().equal(grad_before));
  // d/dw mean((w x + b - y)^2) = 2 mean((w x + b - y) x), here with w = 0.5, b = -0.25.
  double closed = 0;
  for (int i = 1; i <= 3; ++i) closed += 2 * (0.5 * i - 0.25 - (3 * i + 2)) * i / 3.0;
  EXPECT_NEAR(grad_before.item(0), closed, 1e-5 * std::abs(closed));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (!dist::cuda_is_available()) {
    std::printf("gpu_test: skipped: %s\n", dist::cuda_unavailable_reason().c_str());
    return dist::kExitSkipped;
  }
  return RUN_ALL_TESTS();
}
