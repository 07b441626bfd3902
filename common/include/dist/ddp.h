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
// Parameters that get no gradient (chapter 13). A forward that takes a branch on some steps only
// leaves that branch's parameters out of backward; their bucket would never fill. torch 1.13:
//   * Without find_unused_parameters, backward ends with those buckets never reduced, the
//     optimizer steps on this rank's own gradients, and the next forward raises "Expected to
//     have finished reduction in the prior iteration before starting a new one. This error
//     indicates that your module has parameters that were not used in producing loss. ...",
//     naming the parameters' indices (and, with TORCH_DISTRIBUTED_DEBUG=INFO or DETAIL, their
//     names). Here the same: finish_gradient_sync() returns with the grads not averaged, and the
//     next step's first call throws dist::Error in those words, with both lines.
//   * With find_unused_parameters=True, the forward walks the autograd graph from its outputs;
//     a parameter it does not reach is marked ready at once, adding the .grad it holds (zeros
//     for a .grad that is None), and after the buckets one more all_reduce counts, per
//     parameter, the ranks that used it. A parameter some rank used gets the average on every
//     rank; one that no rank used keeps its .grad untouched (None stays None), so the optimizer
//     skips it, or, with 1.13's zero_grad() (set_to_none=False), steps on zeros. Here the
//     program says it with mark_unused() after the forward, or lets finish_gradient_sync() find
//     the parameters not marked ready; the rest is the same, the count included (an int32 per
//     parameter). A grad here is never None: "untouched" is what zero_grad() left, zeros.
//   * static_graph=True: the first step finds the unused parameters as above; later steps mark
//     them ready themselves, without the count (torch also allows reentrant activation
//     checkpointing with it). Here a later step that changes the set is an error naming the
//     parameter; torch's checks are in its Reducer's bookkeeping, with other words.
// tests/parity/ddp_practice_parity.py compares all three with torch 1.13 on gloo; uneven inputs
// (ranks with different numbers of batches) are dist::Join's (dist/join.h).
//
// Communication hooks (chapter 13): register_comm_hook hands each bucket to a hook instead
// (dist/comm_hooks.h: allreduce_hook, the fp16 and bf16 compression hooks, PowerSGD). The hook
// is called where the bucket's all_reduce would start, and its CommFuture waited for where that
// all_reduce would be.
//
// Taught in: chapter 08 (ddp_linear) and chapter 09 (ddp_classifier: buckets, overlap, no_sync,
// broadcast_buffers); chapter 13 (DDP in practice: unused parameters, static_graph, Join,
// register_comm_hook).
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
  // A forward that leaves some parameters out (a branch taken on some steps only): every
  // parameter that finish_gradient_sync() finds not marked ready, or that mark_unused() named,
  // counts as ready with the grad it holds, so its bucket is reduced and the step completes;
  // one that no rank used keeps its grad. See "Parameters that get no gradient" above. torch's
  // default, false, too.
  bool find_unused_parameters = false;
  // The set of parameters the forward uses is the same at every step: the first step finds the
  // unused ones (as find_unused_parameters does); later steps mark them ready themselves and
  // throw dist::Error naming a parameter that leaves or joins the set. torch 1.13's
  // static_graph argument (it calls the private _set_static_graph()).
  bool static_graph = false;
  // Every parameter's grad becomes a slice of its bucket (dist::detail::view_into), from
  // construction until this object is destroyed (then each grad is given its own storage
  // again): backward accumulates straight into the bucket, packing divides the grads by
  // world_size where they are, and the all_reduce leaves the averages in them, so nothing is
  // copied back and the gradients take their memory once (memory_allocated() is 4 bytes per
  // parameter value lower than without). torch 1.13's gradient_as_bucket_view (default False)
  // does the same; a .grad that is None there becomes a view at the first step. A grad the
  // program assigns keeps writing into the bucket if it has the same size (torch would copy
  // such a grad into the bucket at the next step and make it a view again); one of another size
  // is a dist::Error at the next packing, naming the parameter. A grad that no rank used is the
  // bucket's sum too (zeros after zero_grad()), as in torch with this option, not left untouched.
  bool gradient_as_bucket_view = false;
};

class DistributedDataParallel {
 public:
  // Checks that every rank has the same parameters (count and sizes; a mismatch is a
  // dist::ConfigError naming the ranks), then broadcasts rank 0's values to all, over the default
  // group, which then carries the gradients too. A collective: every rank must construct it. The
  // parameters must outlive this object. Destroying it waits for buckets still in flight.
  explicit DistributedDataParallel(std::vector<Parameter*> parameters, DdpOptions options = {});
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  // Backward says which gradients are final for this step. A bucket whose gradients are all
  // ready is packed and its all_reduce started (after every earlier bucket's); without overlap,
  // it returns once that all_reduce has ended.
  void grads_ready(const std::vector<Parameter*>& ready);
  // Waits for every bucket and writes the averages back into the grads. Every parameter must
  // have been marked ready, unless find_unused_parameters or static_graph says otherwise (see
  // above); if one was not, the grads stay this rank's own and the next step throws. Within
  // no_sync() both calls do nothing.
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
  // After the forward, before backward: the parameters this step's forward did not use (torch
  // finds them by walking the autograd graph from the outputs). They count as ready at once,
  // with the grads they hold, so their buckets can leave during backward; finish_gradient_sync()
  // would find them too, at the end. Needs find_unused_parameters or static_graph; throws
  // dist::Error for a parameter already marked ready this step.
  void mark_unused(const std::vector<Parameter*>& unused);

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
  friend class Join;  // dist/join.h: shadows this object's collectives on a rank that has joined
  // The step's first call (grads_ready, mark_unused, finish_gradient_sync) inside a Join
  // context: tells the joined ranks that this rank still trains (Join's count, one all_reduce).
  void begin_step();
  // With find_unused_parameters (or static_graph's first step): how many ranks used each
  // parameter, one all_reduce of an int32 per parameter, after the buckets (torch's
  // local_used_map). `contribute`: this rank's used map, or zeros for a joined rank.
  Tensor reduce_used_map(bool contribute);
  bool needs_used_map() const {
    return options_.find_unused_parameters || (options_.static_graph && !static_known_);
  }
  void mark_unused_index(std::size_t k);
  // gradient_as_bucket_view: whether parameter k's grad is its bucket's slice, and making it so
  // (its values copied in).
  bool grad_is_bucket_view(std::size_t k);
  void point_grad_at_bucket(std::size_t k);
  Device device_of_grads() const { return parameters_.front()->grad.device(); }
  std::string missing_grads_error(const std::vector<std::size_t>& missing) const;
  // Throws once a gradient all_reduce has failed: the group that carried it is closed, and the
  // step's gradients are only partly averaged, so no later step may build on them.
  void check_usable() const;
  void copy_rank0_buffers();
  void launch_ready_buckets();
  // Bucket b's reduction of `buffer` (its own, or Join's zeros): the hook, or DDP's all_reduce.
  CommFuture start_bucket(std::size_t b, Tensor& buffer, bool async);
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

  // Parameters that get no gradient.
  std::vector<bool> unused_;         // this step: marked ready with a zero contribution
  std::string unfinished_;           // a step that ended with gradients missing: the next throws
  bool static_known_ = false;        // static_graph: the first step has run
  std::vector<bool> static_unused_;  // static_graph: unused on this rank at the first step
  std::vector<bool> static_global_unused_;  // ... and on every rank (grads left untouched)
  // Join (dist/join.h).
  bool in_join_ = false;     // inside a Join context, not yet joined
  bool step_begun_ = false;  // this step's begin_step() has run
};

}  // namespace dist
