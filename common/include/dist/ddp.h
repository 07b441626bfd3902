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
// calls grads_ready() as each layer finishes lets a full bucket's all_reduce start at once, as an
// asynchronous call on the model's process group (async_op: it runs on the group's communication
// thread), while backward goes on with the earlier layers; finish_gradient_sync() waits for every
// bucket's Work, as torch's Reducer waits for its buckets' work at the end of backward. DDP has
// no thread and no process group of its own. A collective the program makes on the group
// meanwhile (SyncBatchNorm's, in backward) waits for the buckets queued before it and runs after
// them: buckets start in order, 0, 1, 2, ..., on every rank, so every rank makes the same calls
// in the same order. no_sync() skips the averaging for the steps of gradient accumulation.
// With NCCL, no other thread may issue NCCL calls on the same GPU while buckets travel (NCCL does
// not allow two threads to do so at once, even on two communicators); the group itself runs its
// calls one at a time.
//
// Where this differs from torch: torch hooks into autograd; here backward is written by hand, so
// the program says when gradients are ready (grads_ready) or, in the simplest loop, calls
// average_gradients() once after backward. On a GPU the division by world_size goes through the
// host (dist::Tensor arithmetic does), a copy torch does not make.
//
// Communication hooks (chapter 13): register_comm_hook hands each bucket to a hook instead
// (dist/comm_hooks.h: allreduce_hook, the fp16 and bf16 compression hooks, PowerSGD). The hook
// is called where the bucket's all_reduce would start, and its CommFuture waited for where that
// all_reduce would be.
//
// Taught in: chapter 08 (ddp_linear) and chapter 09 (ddp_classifier: buckets, overlap, no_sync,
// broadcast_buffers); chapter 13 (ddp_in_practice: register_comm_hook).
// Built in: common/src/parallel/ddp.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "dist/comm_hooks.h"
#include "dist/nn.h"
#include "dist/process_group.h"
#include "dist/trace.h"

namespace dist {

struct DdpOptions {
  double bucket_cap_mb = 25;  // torch's default bucket size
  // all_reduce buckets asynchronously, during backward (world_size > 1 only).
  bool overlap = true;
  // Records each bucket's all_reduce, if given, from its Work's times: with overlap, on a lane
  // named "gradient all_reduce" (the group's communication thread); without, on the caller's.
  // Not owned.
  Timeline* timeline = nullptr;
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
  // group, which then carries the gradients too. A collective: every rank must construct it. The
  // parameters must outlive this object. Destroying it waits for buckets still in flight.
  explicit DistributedDataParallel(std::vector<Parameter*> parameters, DdpOptions options = {});
  ~DistributedDataParallel() = default;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Backward says which gradients are final for this step. A bucket whose gradients are all
  // ready is packed and its all_reduce started (after every earlier bucket's); without overlap,
  // it returns once that all_reduce has ended.
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

  // torch's ddp.register_comm_hook(state, hook): from now on each bucket, its gradients packed
  // without dividing by world_size, is handed to hook(state, bucket) when it is ready, and the
  // future it returns is waited for in finish_gradient_sync() (dist/comm_hooks.h). `state` must
  // outlive this object. Every rank must register the same hook. Once only, and before the first
  // gradient sync: a second hook, or one after a bucket was reduced, is a dist::ConfigError.
  //   ddp.register_comm_hook(dist::default_group(), dist::fp16_compress_hook);
  //   ddp.register_comm_hook(powersgd_state, dist::powerSGD_hook);
  template <typename State>
  void register_comm_hook(State& state, CommFuture (*hook)(State&, GradBucket&)) {
    register_comm_hook([&state, hook](GradBucket& bucket) { return hook(state, bucket); });
  }
  // The same with the state bound already (a lambda of your own, say).
  void register_comm_hook(CommHook hook);

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
  bool overlapping() const { return overlap_; }
  // Payload bytes this rank has sent for the gradients' all_reduces (ProcessGroup::bytes_sent):
  // per step, 2 * 4 * n(W - 1)/W for a ring bucket of n float32 values, give or take a value per
  // half (the ring's segments are n/W rounded down or up; on Gloo, buckets of at most 128 KiB
  // take a one-step exchange instead, 4n(W - 1): backends/gloo_mesh.h). Each bucket's count comes
  // from its Work: with overlap, it is added once finish_gradient_sync() has waited for the bucket.
  std::int64_t bytes_sent() const { return bytes_sent_; }
  // How many NoSync guards have been made on this object: with average_gradients()' count of
  // all_reduces, it tells a guard that ended too early (made, yet every call sent) from none.
  std::int64_t no_sync_guards() const { return no_sync_guards_; }

 private:
  // Throws once a gradient all_reduce has failed: the group that carried it is closed, and the
  // step's gradients are only partly averaged, so no later step may build on them.
  void check_usable() const;
  void copy_rank0_buffers();
  void launch_ready_buckets();
  CommFuture start_bucket(std::size_t b, bool async);  // the hook, or DDP's own all_reduce
  std::string span_name(std::size_t b) const;  // bucket b's all_reduce, as the timeline names it

  std::vector<Parameter*> parameters_;
  DdpOptions options_;
  int world_;
  bool overlap_;  // options_.overlap, with more than one rank
  std::vector<Bucket> buckets_;
  std::vector<std::size_t> bucket_of_;   // parameter index -> bucket
  std::vector<std::int64_t> offset_of_;  // parameter index -> offset in its bucket
  std::unordered_map<const Parameter*, std::size_t> index_of_;
  int no_sync_depth_ = 0;
  std::int64_t no_sync_guards_ = 0;
  bool sync_buffers_next_ = true;  // torch's require_forward_param_sync
  bool failed_ = false;            // a gradient all_reduce failed (see check_usable)
  std::int64_t bytes_sent_ = 0;

  // This step's progress.
  std::vector<bool> ready_;
  std::vector<std::size_t> missing_;  // per bucket: parameters not ready yet
  std::size_t launched_ = 0;
  std::vector<CommFuture> in_flight_;  // with overlap: the launched buckets' futures, in order
  CommHook comm_hook_;                 // register_comm_hook's, or none
  bool reduced_once_ = false;          // a bucket has been reduced: too late for a hook
};

}  // namespace dist
