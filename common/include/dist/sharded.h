// dist/sharded.h — sharded data parallel: ZeRO's three stages, the last one torch's
// FullyShardedDataParallel.
//
//   dist::ShardedDataParallel sharded({layer1.parameters(), layer2.parameters()}, {.stage = 3});
//   dist::SGD optimizer(sharded.shards(), lr);   // the optimizer sees this rank's shards only
//   for (batch : my_shard) {
//     optimizer.zero_grad();
//     sharded.before_forward(0); h = layer1.forward(x); sharded.after_forward(0);
//     sharded.before_forward(1); y = layer2.forward(h); sharded.after_forward(1);
//     sharded.before_backward(1); g = layer2.backward(loss_grad); sharded.after_backward(1);
//     sharded.before_backward(0); layer1.backward(g);             sharded.after_backward(0);
//     sharded.finish_gradient_sync();   // every shard's gradient: the mean over the ranks
//     optimizer.step();                 // each rank steps its shard
//     sharded.after_step();             // stages 1 and 2: every rank gets every updated shard
//   }
//
// DDP (dist/ddp.h) keeps on every rank the whole model, its whole gradient and the whole
// optimizer state, and sends 2Ψ(W − 1)/W values per rank per step (the ring all_reduce of Ψ
// gradient values). A ring all_reduce is a reduce_scatter followed by an all_gather (chapter
// 04), and ZeRO (Rajbhandari et al., 2020) takes it apart there:
//   - each unit (a layer, or any group of parameters) is laid out flat, padded to W equal chunks
//     of c = ⌈n/W⌉ values; rank r owns chunk r, its shard (a Parameter of c values);
//   - a reduce_scatter of the unit's gradient (each rank's divided by W, as DDP divides) leaves
//     rank r the mean gradient of its shard only: half of the ring;
//   - the optimizer steps the shard: its state (Adam's two moments, SGD's momentum) exists for c
//     values, not n;
//   - an all_gather of the updated shards gives every rank the whole unit again: the other half.
// So the traffic is DDP's, 2Ψ(W − 1)/W per step, and the stages differ in what stays whole:
//   stage 1 (optimizer state sharded): the whole gradient is kept through backward and
//            reduce-scattered in finish_gradient_sync();
//   stage 2 (and the gradients): each unit's gradient is reduce-scattered as soon as its backward
//            ends, on a thread of its own, and freed; only the shards' gradients stay;
//   stage 3 (and the parameters, torch's FSDP with FULL_SHARD): a unit's parameters exist whole
//            only from before_forward() to after_forward() and from before_backward() to
//            after_backward(), gathered each time: 3Ψ(W − 1)/W per step. With prefetch, the next
//            unit's gather runs on the communication thread while this unit computes.
// torch's ZeroRedundancyOptimizer (stage 1 in torch) differs in two ways: it runs after DDP's
// whole all_reduce, and broadcasts each updated parameter from its owner (3Ψ(W − 1)/W), and it
// gives each rank whole parameters (largest first, to the least loaded rank), so a rank's share
// of the state is only roughly 1/W. Here every stage reduce-scatters, and shards are exact.
//
// Every collective goes, in the same order on every rank, to a process group of its own
// (new_group()), whose communication thread runs it; so they never interleave with the ones the
// program makes. With NCCL that is safe only while the program issues no NCCL call of its own
// during a step (NCCL does not allow two threads to do so on one GPU, even on two communicators;
// the same rule as DDP's overlap, dist/ddp.h). Equal gradients give equal shards, and an
// elementwise optimizer (SGD, Adam) gives every rank, after the gather, what DDP's replicas hold:
// bit for bit where the reductions are the same (at 1 and 2 ranks, where a sum of two is a sum of
// two in either order), to float32 rounding elsewhere (the ring's reduce_scatter sums each chunk in
// a different order from the small all_reduce).
//
// Taught in: chapter 12 (sharding).
// Built in: common/src/parallel/sharded.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/process_group.h"

namespace dist {

struct ShardOptions {
  int stage = 3;         // 1, 2 or 3 (see above)
  bool prefetch = true;  // stage 3: gather the next unit while this one computes
};

class ShardedDataParallel {
 public:
  // `units`: the model's parameters in forward order, in groups that are gathered together (a
  // layer's weight and bias, say). Broadcasts rank 0's values, as DDP does, keeps this rank's
  // shard of each unit, and at stage 3 frees the whole parameters. A collective over the default
  // group: every rank must construct it alike (the same units, sizes and stage; a mismatch is a
  // dist::ConfigError). The parameters must outlive this object.
  ShardedDataParallel(std::vector<std::vector<Parameter*>> units, ShardOptions options = {});
  ~ShardedDataParallel();
  ShardedDataParallel(const ShardedDataParallel&) = delete;
  ShardedDataParallel& operator=(const ShardedDataParallel&) = delete;

  // Stage 3: unit u's parameters are made whole (gathered, or taken from the prefetch) before
  // its forward, and freed after it; the same before and after its backward, which also gets
  // zeroed gradients. At stages 1 and 2 the forward calls do nothing; at stage 2 before_backward
  // gives the unit zeroed gradients. Call them in program order: every u forward, then every u
  // backward in reverse (a rank that calls them otherwise makes other collectives, and the
  // group stops with an error naming the calls).
  void before_forward(std::size_t u);
  void after_forward(std::size_t u);
  void before_backward(std::size_t u);
  // Stages 2 and 3: the unit's gradient, divided by W, is reduce-scattered into its shard on the
  // communication thread, and the whole gradient is freed (stage 3: the parameters too).
  void after_backward(std::size_t u);
  // Waits for every reduce_scatter (stage 1: makes them, and zeroes the whole gradients for the
  // next step): afterwards each shard's grad is the mean over the ranks. Once a collective has
  // failed, this and every later call throw dist::Error: the shards may no longer agree.
  void finish_gradient_sync();
  // Stages 1 and 2: gathers every updated shard, so that every rank holds the whole model again.
  // Stage 3: nothing (the next forward gathers).
  void after_step();

  // This rank's shard of each unit: what the optimizer steps. Stable for this object's life.
  std::vector<Parameter*> shards();
  int stage() const { return options_.stage; }
  // Payload bytes this rank has sent on the communication group (ProcessGroup::bytes_sent).
  std::int64_t bytes_sent() const { return comm_->bytes_sent(); }
  std::size_t units() const { return units_.size(); }
  // Unit u's values (n) and chunk (c = ⌈n/W⌉; the shard's size, padding included).
  std::int64_t unit_numel(std::size_t u) const { return units_[u].numel; }
  std::int64_t unit_chunk(std::size_t u) const { return units_[u].chunk; }

  // Bytes this rank holds now, by kind: the model's parameters (whole, or gathered), their
  // gradients, the shards (data and grad), and what gathers and reduce_scatters hold in flight.
  struct Memory {
    std::int64_t parameters = 0, gradients = 0, shards = 0, shard_gradients = 0, in_flight = 0;
  };
  Memory memory() const;

  // The closed forms, for units of `unit_numels` values at `world` ranks (c_u = ⌈n_u/W⌉):
  // what memory() says between two steps (after after_step()): stages 1 and 2 keep the whole
  // parameters (4Ψ bytes), stage 1 the whole gradients too; every stage keeps each shard and its
  // gradient (4Σc_u each; the shard is a copy beside the whole parameters at stages 1 and 2,
  // since dist::Tensor has no views, where torch's flat parameter is one).
  static Memory expected_memory(int stage, const std::vector<std::int64_t>& unit_numels, int world);
  // Payload bytes this rank sends per step: every unit reduce-scattered and gathered once (stage
  // 3: gathered twice, for its forward and its backward), 4c_u(W − 1) bytes each time: 2Ψ(W − 1)/W
  // values at stages 1 and 2, 3Ψ(W − 1)/W at stage 3, when W divides every n_u.
  static std::int64_t expected_bytes_sent(int stage, const std::vector<std::int64_t>& unit_numels,
                                          int world);

 private:
  struct Unit {
    std::vector<Parameter*> params;
    std::vector<std::int64_t> offsets;  // params[i] starts at offsets[i] in the flat layout
    std::int64_t numel = 0, chunk = 0;
    Parameter shard;
    // A gather in flight: its Work and the W chunks it fills, one after the other.
    std::optional<Work> gather;
    Tensor gathered;
    bool whole = false;  // stage 3: the params hold data now
  };

  void check_usable() const;
  void start_gather(std::size_t u);
  void finish_gather(std::size_t u);
  void free_whole(std::size_t u);
  void zero_grads(std::size_t u);
  Tensor flat_gradient(const Unit& unit) const;  // padded, divided by W
  void start_reduce_scatter(std::size_t u);
  void wait(Work& work);

  std::vector<Unit> units_;
  ShardOptions options_;
  int rank_, world_;
  Device device_;
  std::unique_ptr<ProcessGroup> comm_;  // the communication thread's group (null at W = 1)
  // The reduce_scatters in flight, oldest first, and their inputs, alive (and in place: a deque
  // does not move its elements) until they end.
  std::deque<Work> reduce_scatters_;
  std::deque<Tensor> scatter_inputs_;
  bool failed_ = false;
};

}  // namespace dist
