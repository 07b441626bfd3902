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
//      gradients by world_size, then one all_reduce(SUM) of all of them, packed into one flat
//      bucket, adds them up. Equal gradients and equal parameters give an equal optimizer step,
//      so the replicas stay equal, bit for bit, without ever sending a parameter again.
// Because every rank's batch has the same size (DistributedSampler pads so that they do), the
// average of the ranks' mean gradients is the mean gradient of the global batch: W ranks with
// batch B take exactly the steps one process would take with batch W * B (chapter 08 tests it).
//
// Where this differs from torch: torch hooks into autograd and starts the all_reduce during
// backward, bucket by bucket; here backward is written by hand, so the program calls
// average_gradients() itself, once, after backward. Chapter 09 adds buckets that overlap with
// backward, and no_sync() for gradient accumulation.
//
// Taught in: chapter 08 (ddp_linear).
#pragma once

#include <cstdint>
#include <vector>

#include "dist/nn.h"
#include "dist/process_group.h"

namespace dist {

class DistributedDataParallel {
 public:
  // Checks that every rank has the same parameters (count and sizes; a mismatch is a
  // dist::ConfigError naming the ranks), then broadcasts rank 0's values to all. A collective:
  // every rank of `group` must construct it. The parameters must outlive this object.
  explicit DistributedDataParallel(std::vector<Parameter*> parameters);
  DistributedDataParallel(std::vector<Parameter*> parameters, ProcessGroup& group);

  // Replaces every parameter's grad with its average over the ranks. A collective: call it on
  // every rank after each backward, before the optimizer step.
  void average_gradients();

  const std::vector<Parameter*>& parameters() const { return parameters_; }
  std::int64_t bucket_size() const { return numel_; }  // values in the one gradient bucket

 private:
  std::vector<Parameter*> parameters_;
  ProcessGroup& group_;
  std::int64_t numel_ = 0;
  Tensor bucket_;  // every gradient, one after the other: one all_reduce per step
};

}  // namespace dist
