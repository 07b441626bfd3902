// dist/comm_hooks.h — DDP communication hooks: what DistributedDataParallel does with a bucket
// of gradients, as torch.distributed.algorithms.ddp_comm_hooks has them.
//
//   dist::DistributedDataParallel ddp(model.parameters());
//   ddp.register_comm_hook(dist::default_group(), dist::fp16_compress_hook);  // before training
//   // or PowerSGD, with its state (torch: PowerSGDState(process_group=None, ...)):
//   dist::PowerSGDState state({.matrix_approximation_rank = 2, .start_powerSGD_iter = 2});
//   ddp.register_comm_hook(state, dist::powerSGD_hook);
//
// Without a hook, DDP averages each bucket with one all_reduce (dist/ddp.h). A hook replaces that
// step: DDP packs the bucket's gradients, NOT divided by world_size (as in torch), calls the hook
// when the bucket is ready, and the hook returns a CommFuture, torch's Future[Tensor]: the
// collective it started, and the steps to run once that has ended (torch's fut.then(...)). When
// DDP waits for the bucket (finish_gradient_sync) it waits for that future; afterwards the
// bucket's buffer must hold the averaged gradients, which DDP copies into the parameters' grads.
//   * allreduce_hook: divide by world_size, all_reduce(SUM). What DDP does without a hook, bit
//     for bit; its all_reduce starts in backward as the bucket fills, as DDP's own does.
//   * fp16_compress_hook, bf16_compress_hook: cast the bucket to float16 (bfloat16), divide by
//     world_size in that type (torch's order: cast first, then divide), all_reduce in half the
//     bytes, and cast the sum back. Gradients lose precision: float16 keeps 11 significant bits
//     and overflows above 65504; bfloat16 keeps float32's range and 8 bits. torch 1.13's
//     bf16_compress_hook refuses to be registered without CUDA 11 and NCCL 2.10 ("BF16 all reduce
//     communication hook required CUDA 11+ and NCCL 2.10+."); this one runs on Gloo too.
//   * powerSGD_hook (Vogels et al., 2019): each gradient viewed as an n x m matrix M (its first
//     dimension by the rest, as torch views it) is sent as two thin matrices, P = M Q (n x r) and
//     Q = M^T P (m x r): (n + m) r values instead of n m. A matrix is compressed only when
//     (n + m) r * min_compression_rate < n m (with min_compression_rate >= 1, never a bias);
//     the others are all_reduced whole, in one call. A step all_reduces the uncompressed values,
//     P and Q: three dependent collectives. The first starts in backward; P's and Q's, which need
//     the previous one's result, run when DDP waits for the bucket (finish_gradient_sync), so
//     PowerSGD overlaps less with backward than the other hooks do. The steps, as torch 1.13's
//     powerSGD_hook: M += the error left last step (use_error_feedback); Q = the last step's Q
//     (warm_start) or, the first time, a matrix drawn as torch draws it
//     (numpy.random.RandomState(random_seed).randint(1_000_000_000) seeds torch.randn,
//     dist/seed.h); orthogonalize Q; P = M Q; all_reduce P; orthogonalize P; Q = M^T P; all_reduce
//     Q; Q /= world_size; M = P Q^T; the error = what was to be sent minus M. Orthogonalization is
//     torch's Gram-Schmidt (torch 1.13 takes a QR factorisation instead for r > 2, whose columns
//     may differ in sign: P Q^T, the result, does not). The first start_powerSGD_iter steps
//     (torch's default 1,000) run allreduce_hook instead, for a warm-up at full precision.
//     Norms, dot products and matrix products are summed in torch 1.13's order on an x86 CPU
//     with AVX2, so with r <= 2 a step matches torch's bit for bit while each product of a
//     matrix by P or Q takes under 400 multiply-adds (beyond that torch's bmm calls a BLAS
//     whose order may differ in the last bits: tests/parity/comm_hooks_parity.py).
//
// Bytes per step, each bucket a separate set of calls (ProcessGroup::bytes_sent;
// tests/multiprocess/comm_hooks_test.cpp measures them): allreduce_hook sends what DDP sends
// (ddp.h); the fp16 and bf16 hooks send half of it (2 bytes a value; on Gloo the one-step
// exchange then takes buckets of up to 65,556 values); PowerSGD all_reduces
// u + sum((n + m) r) float32 values in three calls, u the uncompressed values: with W ranks on
// Gloo's one-step exchange (calls of 128 KiB or less) 4 (W - 1) bytes per value, on the ring
// about 8 (W - 1) / W.
//
// Bad input: a second register_comm_hook, or one after the first gradient sync, is a
// dist::ConfigError (torch 1.13 refuses the first, "register_comm_hook or
// register_builtin_comm_hook can only be called once.", and only documents the second);
// PowerSGDState refuses start_powerSGD_iter <= 1 with error feedback or warm start, as torch;
// powerSGD_hook refuses a Parameter whose shape does not hold its values.
//
// Inside a dist::Join, a rank that has joined runs the hook on buckets of zeros, as torch's
// join hook does, so that its calls meet the training ranks' (PowerSGD's state advances there
// too).
//
// Where this differs from torch: a hook writes its result into bucket.buffer() instead of
// returning a tensor; a GradBucket's gradients are places in that buffer (offset, sizes), not
// views. Like torch's, PowerSGD divides by zero when a compressed gradient is all zeros with
// orthogonalization_epsilon 0: set it (1e-8) if that can happen.
//
// Taught in: chapter 13 (ddp_in_practice: compressed gradients).
// Built in: common/src/parallel/comm_hooks.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "dist/nn.h"
#include "dist/process_group.h"
#include "dist/seed.h"
#include "dist/tensor.h"

namespace dist {

// One bucket of gradients, as torch.distributed.GradBucket shows it to a hook.
class GradBucket {
 public:
  GradBucket(std::size_t index, bool is_last, Tensor& buffer, std::vector<Parameter*> parameters,
             std::vector<std::int64_t> offsets)
      : index_(index),
        is_last_(is_last),
        buffer_(&buffer),
        parameters_(std::move(parameters)),
        offsets_(std::move(offsets)) {}

  std::size_t index() const { return index_; }  // 0 is the first bucket backward fills
  bool is_last() const { return is_last_; }     // the step's last bucket
  // The bucket's gradients end to end, float32, not divided by world_size. The hook leaves the
  // averages here.
  Tensor& buffer() { return *buffer_; }
  // The parameters whose gradients the bucket holds, in the buffer's order; gradient k is
  // parameters()[k]->data.numel() values from offsets()[k], of shape parameters()[k]->sizes().
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  const std::vector<std::int64_t>& offsets() const { return offsets_; }

 private:
  std::size_t index_;
  bool is_last_;
  Tensor* buffer_;
  std::vector<Parameter*> parameters_;
  std::vector<std::int64_t> offsets_;
};

// What a hook returns: torch's Future[Tensor]. The collective the hook started (a Work, usually
// asynchronous), then the steps added with then(), each run by wait() on the waiting thread
// once the collective before it has ended; a step may start one more collective and return its
// Work (or Work() for none), which the next step waits for. wait() rethrows the first failure
// and runs no later step.
class CommFuture {
 public:
  using Step = std::function<Work()>;
  CommFuture() = default;  // nothing to wait for
  explicit CommFuture(Work first) : first_(std::move(first)) {}
  CommFuture(CommFuture&&) noexcept = default;
  CommFuture& operator=(CommFuture&&) noexcept = default;

  CommFuture then(Step step) && {
    steps_.push_back(std::move(step));
    return std::move(*this);
  }
  void wait();
  // Once wait() has returned: what this rank sent for the bucket, and when its collectives ran.
  std::int64_t bytes_sent() const { return bytes_sent_; }
  Work::Clock::time_point start_time() const { return start_; }
  Work::Clock::time_point end_time() const { return end_; }

 private:
  void add(const Work& work);
  std::vector<Step> steps_;  // declared before first_: a Work waits for its call when destroyed
  Work first_;
  bool waited_ = false;
  std::int64_t bytes_sent_ = 0;
  Work::Clock::time_point start_{}, end_{};
};

// A hook with its state bound (DistributedDataParallel::register_comm_hook makes one).
using CommHook = std::function<CommFuture(GradBucket& bucket)>;

// The default hooks; their state is the process group (torch passes None for the default one).
CommFuture allreduce_hook(ProcessGroup& group, GradBucket& bucket);
CommFuture fp16_compress_hook(ProcessGroup& group, GradBucket& bucket);
CommFuture bf16_compress_hook(ProcessGroup& group, GradBucket& bucket);

struct PowerSGDOptions {
  ProcessGroup* process_group = nullptr;  // nullptr: the default group
  int matrix_approximation_rank = 1;      // r
  std::int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0;
  std::uint32_t random_seed = 0;
};

// torch's PowerSGDState: the options and what PowerSGD keeps between steps (per bucket: the
// error, P and Q), with the step count and the compression statistics.
class PowerSGDState {
 public:
  // Throws dist::ConfigError for r < 1, min_compression_rate < 0, orthogonalization_epsilon
  // < 0, and start_powerSGD_iter <= 1 with use_error_feedback or warm_start.
  explicit PowerSGDState(PowerSGDOptions options = {});

  const PowerSGDOptions& options() const { return options_; }
  std::int64_t iter() const { return iter_; }  // steps begun, counted at each step's last bucket
  // torch's compression_stats(): (values before / after, before, after), over every compressed
  // step so far; the rate is 0 before the first.
  struct CompressionStats {
    double rate = 0;
    std::int64_t numel_before = 0, numel_after = 0;
  };
  CompressionStats compression_stats() const;

 private:
  friend CommFuture powerSGD_hook(PowerSGDState& state, GradBucket& bucket);
  void maybe_increase_iter(const GradBucket& bucket);

  PowerSGDOptions options_;
  NumpyRandomState rng_;
  std::map<std::size_t, Tensor> error_, p_memory_, q_memory_;  // by bucket index
  std::int64_t iter_ = 0;
  std::int64_t numel_before_ = 0, numel_after_ = 0;
};

CommFuture powerSGD_hook(PowerSGDState& state, GradBucket& bucket);

}  // namespace dist
