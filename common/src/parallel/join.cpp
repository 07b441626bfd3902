// dist/join.h: Join (chapter 13).
#include "dist/join.h"

#include <cstdint>
#include <string>
#include <vector>

#include "dist/check.h"
#include "dist/init.h"
#include "dist/log.h"

namespace dist {

Join::Join(DistributedDataParallel& ddp) : ddp_(&ddp) {
  if (ddp.options_.broadcast_buffers) {
    for (const Tensor* b : ddp.options_.buffers) {
      if (b->numel() > 0) {
        throw ConfigError(
            "dist::Join: this DistributedDataParallel broadcasts buffers before each forward, "
            "which a joined rank would have to shadow; dist::Join does not: set "
            "DdpOptions::broadcast_buffers = false, or train without dist::Join");
      }
    }
  }
  if (ddp.in_join_) {
    throw ConfigError("dist::Join: this DistributedDataParallel is already in a Join context");
  }
  if (ddp.step_begun_) {
    throw ConfigError(
        "dist::Join: enter the context between steps, not after a step's grads_ready()");
  }
  ddp.in_join_ = true;
}

Join::~Join() {
  if (!joined_) ddp_->in_join_ = false;
}

void Join::join() {
  DistributedDataParallel& ddp = *ddp_;
  if (joined_) throw Error("dist::Join.join: this rank has joined already; call join() once");
  if (ddp.step_begun_) {
    throw Error(
        "dist::Join.join: a step is under way (grads_ready() without finish_gradient_sync()); "
        "join between steps");
  }
  ddp.check_usable();
  joined_ = true;
  ddp.in_join_ = false;
  ProcessGroup& group = default_group();
  const Device device = ddp.device_of_grads();
  try {
    while (true) {
      // The count of ranks still training, and whether their step sends a used map.
      Tensor count = Tensor::zeros(2, kInt64, device);
      group.all_reduce(count, ReduceOp::SUM);
      if (count.item(0) == 0) break;
      last_joiner_ = false;
      ++shadowed_;
      // Each bucket reduced as the training ranks reduce theirs: through the communication hook
      // if there is one (as torch's join hook runs it on zeros), all started before the used
      // map and waited for after it, the training ranks' order.
      std::vector<Tensor> zeros;
      zeros.reserve(ddp.buckets_.size());  // the hooks keep pointers to them
      std::vector<CommFuture> shadows;
      for (std::size_t b = 0; b < ddp.buckets_.size(); ++b) {
        zeros.push_back(Tensor::zeros(ddp.buckets_[b].numel, kFloat32, device));
        shadows.push_back(ddp.start_bucket(b, zeros.back(), false));
      }
      if (count.item(1) > 0) ddp.reduce_used_map(false);
      for (CommFuture& shadow : shadows) shadow.wait();
    }
    // The last rank to join holds the model every rank must end with (ties: the highest rank).
    Tensor source = Tensor::full(1, last_joiner_ ? group.rank() : -1, kInt64, device);
    group.all_reduce(source, ReduceOp::MAX);
    const int src = static_cast<int>(source.item(0));
    for (Parameter* p : ddp.parameters_) group.broadcast(p->data, src);
  } catch (const Error&) {
    ddp.failed_ = true;
    throw;
  }
}

}  // namespace dist
