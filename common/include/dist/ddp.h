// dist/ddp.h — DistributedDataParallel: every rank trains the same model on its own shard.
//
//   dist::Linear model(1, 1, init_that_differs_per_rank, dist::get_device());
//   dist::DistributedDataParallel ddp(model.parameters());   // now every rank holds rank 0's
//   for (batch : my_shard) {
//     optimizer.zero_grad();
//     model.backward(dist::mse_loss(model.forward(x), y).grad);
//     ddp.average_gradients();                              // the mean over all ranks' batches
//     optimizer.step();                                     // the same step on every rank
//   }
//
// torch.nn.parallel.DistributedDataParallel keeps two promises, and so does this class:
//   1. At construction every rank's parameters are overwritten with rank 0's (a broadcast), so
//      replicas that were initialised differently (a per-rank seed, chapter 06) start equal.
//   2. After backward, every gradient is the average over the ranks: each rank divides its
//      gradients by world_size, packs them into buckets, and an all_reduce(SUM) of each bucket
//      adds them up. Equal gradients and equal parameters give an equal optimizer step, so the
//      replicas stay equal, bit for bit, without ever sending a parameter again.
// Because every rank's batch has the same size (DistributedSampler pads so that they do), the
// average of the ranks' mean gradients is the mean gradient of the global batch: W ranks with
// batch B take the steps one process would take with batch W * B, to float32 rounding (chapter
// 08 tests it).
//
// Buckets and overlap (chapter 09). Parameters are packed into buckets of about bucket_cap_mb,
// in reverse order, because backward produces the last layer's gradients first. A backward that
// calls grads_ready() as each layer finishes lets a full bucket's all_reduce start at once, on
// a thread of its own, while backward goes on with the earlier layers; finish_gradient_sync()
// waits for the last bucket. That thread uses a second process group (new_group()), so its
// collectives never interleave with the ones the main thread makes meanwhile (SyncBatchNorm's).
// Buckets start in order, 0, 1, 2, ..., on every rank, so every rank makes the same calls in the
// same order. no_sync() skips the averaging for the steps of gradient accumulation.
// With NCCL, overlap is safe only if nothing else issues NCCL calls on the same GPU meanwhile:
// NCCL does not allow two threads to do so, even on two communicators. A model that
// communicates in its own backward (SyncBatchNorm) must turn overlap off there (chapter 09 does).
//
// Where this differs from torch: torch hooks into autograd; here backward is written by hand, so
// the program says when gradients are ready (grads_ready) or, in the simplest loop, calls
// average_gradients() once after backward. On a GPU the division by world_size goes through the
// host (dist::Tensor arithmetic does), a copy torch does not make.
//
// Taught in: chapter 08 (ddp_linear) and chapter 09 (ddp_classifier: buckets, overlap, no_sync,
// broadcast_buffers).
// Built in: common/src/ddp.cpp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "dist/nn.h"
#include "dist/process_group.h"
#include "dist/trace.h"

namespace dist {

struct DdpOptions {
  double bucket_cap_mb = 25;  // torch's default bucket size
  // all_reduce buckets on a thread of their own, during backward (world_size > 1 only).
  bool overlap = true;
  Timeline* timeline = nullptr;  // records each bucket's all_reduce, if given; not owned
  // The model's buffers (BatchNorm's running statistics): state that is not trained, so DDP
  // never averages it. Rank 0's are copied to every rank at construction, as torch copies the
  // module's buffers with its parameters, and, with broadcast_buffers (torch's default), again
  // before every training forward: see before_forward(). Not owned.
  std::vector<Tensor*> buffers;
  bool broadcast_buffers = true;
};

class DistributedDataParallel {
 public:
  // Checks that every rank has the same parameters (count and sizes; a mismatch is a
  // dist::ConfigError naming the ranks), then broadcasts rank 0's values to all, over the default
  // group. A collective: every rank must construct it. The parameters must outlive this object.
  explicit DistributedDataParallel(std::vector<Parameter*> parameters, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Backward says which gradients are final for this step. A bucket whose gradients are all
  // ready is packed and its all_reduce started (after every earlier bucket's).
  void grads_ready(const std::vector<Parameter*>& ready);
  // Waits for every bucket and writes the averages back into the grads. Every parameter must
  // have been marked ready. Within no_sync() both calls do nothing.
  void finish_gradient_sync();
  // What torch's DDP.forward does before it runs the module, to call before each forward through
  // the model (`training`: a forward whose gradients backward will use, torch's
  // is_grad_enabled()): with broadcast_buffers, rank 0's buffers are copied to every rank, so
  // every replica normalises with the same running statistics. As in torch 1.13, the copy is
  // made only when the previous forward was a training forward outside no_sync() (or there was
  // none yet): a run of evaluation forwards, or of accumulation steps, copies once. A collective
  // whenever it copies: every rank must call it alike.
  void before_forward(bool training = true);
  // grads_ready(every parameter), then finish_gradient_sync(): the loop of chapter 08.
  // Once a gradient all_reduce has failed, all three throw dist::Error: the replicas may no
  // longer be equal, so destroy this object and the process group.
  void average_gradients();

  // torch's `with ddp.no_sync():` for gradient accumulation: while the returned guard lives,
  // gradients are not averaged; they accumulate locally and the next synchronised step averages
  // the sum. Every rank must skip the same steps.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp) {
      ++ddp_->no_sync_depth_;
      ++ddp_->no_sync_guards_;
    }
    ~NoSync() { --ddp_->no_sync_depth_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* ddp_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  struct Bucket {
    std::vector<std::size_t> params;  // indices into parameters(), in the order they are packed
    std::int64_t numel = 0;
    Tensor buffer;
  };
  const std::vector<Parameter*>& parameters() const { return parameters_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  bool overlapping() const { return comm_ != nullptr; }
  // Payload bytes this rank has sent for the gradients' all_reduces (ProcessGroup::bytes_sent):
  // per step, 2 * 4 * n(W - 1)/W for a ring bucket of n float32 values, give or take a value per
  // half (the ring's segments are n/W rounded down or up; buckets of at most 128 KiB take a
  // one-step exchange instead, 4n(W - 1)).
  std::int64_t bytes_sent() const { return bytes_sent_.load(); }
  // How many NoSync guards have been made on this object: with average_gradients()' count of
  // all_reduces, it tells a guard that ended too early (made, yet every call sent) from none.
  std::int64_t no_sync_guards() const { return no_sync_guards_; }

 private:
  // Throws once a gradient all_reduce has failed: the group that carried it is closed, and the
  // step's gradients are only partly averaged, so no later step may build on them.
  void check_usable() const;
  void copy_rank0_buffers();
  void launch_ready_buckets();
  void all_reduce_bucket(std::size_t b, ProcessGroup& group);
  void worker();

  std::vector<Parameter*> parameters_;
  DdpOptions options_;
  int world_;
  std::chrono::milliseconds timeout_;
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;   // parameter index -> bucket
  std::vector<std::int64_t> offset_of_;  // parameter index -> offset in its bucket
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  int no_sync_depth_ = 0;
  std::int64_t no_sync_guards_ = 0;
  bool sync_buffers_next_ = true;  // torch's require_forward_param_sync
  bool failed_ = false;            // a gradient all_reduce failed (see check_usable)
  std::atomic<std::int64_t> bytes_sent_{0};

  // This step's progress.
  std::vector<bool> ready_;
  std::vector<std::size_t> missing_;  // per bucket: parameters not ready yet
  std::size_t launched_ = 0;

  // The gradient thread (overlap) and its own group.
  std::unique_ptr<ProcessGroup> comm_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::size_t> queue_;
  std::size_t reduced_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace dist
