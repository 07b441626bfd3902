// Chapter 12's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags; the model's sizes; printing. The data set, the initial
// weights and the batches are chapter 09's (../09_ddp_classifier/fashion_data.h).
#pragma once

#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sharded.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../09_ddp_classifier/fashion_data.h"

namespace ch12 {

// The classifier: 196 pixels, three hidden layers of 512, 10 classes. Wider than chapter 09's,
// so that its 631,306 values and Adam's state (10 MB at 16 bytes a value) are worth sharding, yet
// one epoch trains in seconds on two CPU cores.
constexpr std::int64_t kWidths[] = {196, 512, 512, 512, 10};
constexpr std::size_t kLayers = 4;

// 196 pixels -> Linear -> ReLU -> Linear -> ReLU -> Linear -> ReLU -> Linear -> 10 logits, each
// rank drawing its own initial weights (as chapter 09 draws them, from seed + rank).
struct Mlp {
  std::vector<dist::Linear> layers;
  dist::ReLU relus[kLayers - 1];

  Mlp(dist::Generator& g, dist::Device device);
  // The units of sharding: one per layer, its weight and bias gathered together (torch's FSDP
  // wraps modules the same way: each wrapped module is one flat parameter).
  std::vector<std::vector<dist::Parameter*>> units();
  std::vector<dist::Parameter*> parameters();
};

// Every flag, with its default. --help lists them.
struct Flags {
  int train_samples = 4000, test_samples = 1000, batch_size = 32, epochs = 2, seed = 0, stage = 3;
  double lr = 1e-3, bucket_mb = 1;
  bool prefetch = true, check = true, throughput = false, mixed_precision = false;
  std::string data_dir = "data";
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help. --data-dir is created and must be writable (exit
// 2 with a message naming the flag otherwise).
std::optional<Flags> parse_flags(int argc, char** argv);

// The run the stages are checked against (--check): DDP's step, every rank stepping the whole
// model with the mean gradient, where each layer's mean is chapter 04's ring all_reduce as its
// two halves, reduce_scatter_tensor and then all_gather_into_tensor, of the layer's gradient
// divided by W and padded to W chunks, as ShardedDataParallel lays it out. A stage adds each
// value's W gradients with the same call on the same chunk, so in the same order, and an
// elementwise optimizer then makes the same bits: the weights must be equal whatever W, --lr or
// the data. DDP's buckets (stage 0) add in other orders from 3 ranks on; the last bit then
// differs, and Adam magnifies that more at a larger --lr, so no fixed tolerance would hold.
class SameOrderDdp {
 public:
  explicit SameOrderDdp(Mlp& model);  // a collective: every rank takes rank 0's weights
  void average_gradients();           // every gradient becomes the mean over the ranks

 private:
  Mlp* model_;
};
constexpr int kReference = -1;  // the "stage" that trains SameOrderDdp

// A step's calls, the same for every stage. Stage 0 is chapter 09's DDP: a layer's gradients
// are ready after its backward, finish_gradient_sync averages them, and the other calls have
// nothing to do. Stages 1-3 are dist::ShardedDataParallel (dist/sharded.h). kReference is
// SameOrderDdp, which averages in finish_gradient_sync.
class Parallel {
 public:
  Parallel(Mlp& model, const Flags& f, int stage) : model_(&model) {
    if (stage == kReference) {
      reference = std::make_unique<SameOrderDdp>(model);
    } else if (stage == 0) {
      ddp = std::make_unique<dist::DistributedDataParallel>(
          model.parameters(), dist::DdpOptions{.bucket_cap_mb = f.bucket_mb});
    } else {
      sharded = std::make_unique<dist::ShardedDataParallel>(
          model.units(), dist::ShardOptions{.stage = stage, .prefetch = f.prefetch});
    }
  }
  // What the optimizer steps: the whole model (DDP), or this rank's shard of each layer.
  std::vector<dist::Parameter*> optimized() {
    return sharded ? sharded->shards() : model_->parameters();
  }
  void before_forward(std::size_t u) {
    if (sharded) sharded->before_forward(u);  // stage 3: gather layer u (prefetch: and u+1)
  }
  void after_forward(std::size_t u) {
    if (sharded) sharded->after_forward(u);  // stage 3: free it
  }
  void before_backward(std::size_t u) {
    if (sharded) sharded->before_backward(u);  // stage 3: gather it again (prefetch: and u-1)
  }
  void after_backward(std::size_t u) {
    if (ddp) ddp->grads_ready(model_->layers[u].parameters());  // may start a bucket's all_reduce
    if (sharded) sharded->after_backward(u);  // stages 2, 3: reduce_scatter its gradient now
  }
  void finish_gradient_sync() {
    if (ddp) ddp->finish_gradient_sync();
    if (sharded) sharded->finish_gradient_sync();  // stage 1: reduce_scatter every gradient now
    if (reference) reference->average_gradients();
  }
  void after_step() {
    if (sharded) sharded->after_step();  // stages 1, 2: all_gather the updated shards
  }
  std::int64_t bytes_sent() const {
    return ddp ? ddp->bytes_sent() : sharded ? sharded->bytes_sent() : 0;
  }

  std::unique_ptr<dist::DistributedDataParallel> ddp;
  std::unique_ptr<dist::ShardedDataParallel> sharded;
  std::unique_ptr<SameOrderDdp> reference;

 private:
  Mlp* model_;
};

// ---- What a rank holds and sends

// What one rank holds of the model state, in bytes: parameters, gradients, the optimizer's state
// (ZeRO's "model states"). Not the process's memory: activations, messages in flight and
// temporary buffers such as DDP's buckets are outside it (ZeRO counts them as residual states).
struct Held {
  std::int64_t parameters = 0, gradients = 0, state = 0;
  std::int64_t total() const { return parameters + gradients + state; }
};
std::vector<std::int64_t> unit_numels();  // the layers' values: n_u
// ZeRO's closed forms, fp32 Adam (4 bytes a value; Adam keeps two moments), Ψ values in all,
// layer u of n_u values cut into W chunks of c_u = ⌈n_u/W⌉ (so c = Σc_u is Ψ/W and a little
// padding): the paper's accounting, and torch's, whose flat parameters are views of the model.
Held ideal(int stage, int world);
// What this rank holds now (DDP: `ddp`; stages 1-3: `sharded`; the other is null).
Held measured(Mlp& model, const dist::ShardedDataParallel* sharded, const dist::Adam& adam);
// What it should hold between steps: ZeRO's form, plus what this library keeps by design: at
// stages 1 and 2 the shard (and at stage 1 its gradient) is a copy beside the whole model, since
// dist::Tensor has no views (ShardedDataParallel::expected_memory counts them). So here stage 1
// holds 8Ψ + 16c, no less than DDP's 16Ψ until c < Ψ/2, that is from 3 ranks on.
Held expected(int stage, int world);
// DDP's buckets, in bytes: a packed copy of the gradients for the all_reduce, a temporary buffer
// beside the model state (torch's DDP keeps one too, unless gradient_as_bucket_view=True).
std::int64_t bucket_bytes(const dist::DistributedDataParallel& ddp);
// The bytes DDP's all_reduces send per rank per step, and how far the count may be from it: a
// ring all_reduce of a bucket of n values sends 2n(W-1)/W of them (a value more or less per half,
// as the ring's segments are n/W rounded); Gloo's backend sends a bucket of at most 128 KiB to
// every rank in one step instead, n(W-1) values: fewer steps for more bytes (gloo_mesh.h).
struct Traffic {
  std::int64_t bytes = 0, slack = 0;
};
Traffic ddp_traffic(const dist::DistributedDataParallel& ddp, int world);
// The table of ideal() for stages 0-3 at W = 1, 2, 4, printed by rank 0. With --mixed-precision,
// then mixed_precision()'s table and, for this run's stage and W, the model state and the traffic
// in half precision: its closed form, and one step's collectives sent in bfloat16 and measured
// (half_step_bytes: a collective, so every rank calls this). Returns whether the measured bytes
// are their closed form (true without --mixed-precision).
bool print_tables(int stage, int world, bool mixed_precision);
// The bytes this rank sends for one step's collectives with bfloat16 payloads, on the run's layout:
// each layer's gradient reduce-scattered and its parameters gathered (twice at stage 3; stage 0 as
// the ring's two halves, as a half-precision DDP all_reduce would send them). Zeros: what is sent
// does not depend on the values.
std::int64_t half_step_bytes(int stage, int world);
// ZeRO's mixed-precision accounting (section 3.1, "Model States"): fp16 or bf16 parameters and
// gradients, 2 + 2 bytes a value, and the optimizer's fp32 copy of the parameters (the master
// weights) with Adam's two fp32 moments, 4 + 4 + 4 = 12: 16 bytes a value, as fp32 Adam's 4 + 4 +
// 8. Which part is sharded is what changes: stage 1 the 12, stage 2 the gradients' 2 too, stage 3
// the parameters' 2 too. Returned as (parameters, gradients, state): 2Ψ or 2c, 2Ψ or 2c, 12Ψ or
// 12c.
Held mixed_precision(int stage, int world);

// Each rank evaluates its part of the test set (DistributedSampler's, padded so that every rank
// runs as many forwards: at stage 3 each is a gather, a collective) and counts a picture only
// where it is not padding, so that each is counted once; one all_reduce adds up. Returns
// (correct, counted) over all ranks.
std::pair<std::int64_t, std::int64_t> evaluate(
    const ch09::Images& test, dist::Device device,
    const std::function<dist::Tensor(const dist::Tensor&)>& forward);

// ---- Printing

// What each stage keeps sharded, in ZeRO's words: "stage 2: optimizer state and gradients
// sharded (ZeRO-2)".
std::string stage_name(int stage);

// Bytes as people read them: "10,101,024" and "9.63 MiB".
using dist::grouped;  // 1,234,567 (dist/log.h)
std::string mib(std::int64_t bytes);
std::string scientific(double value);  // "3.1e-07"

// Two runs' weights, value by value: how many differ in any bit, and the largest difference.
struct Compared {
  std::int64_t differing = 0;
  double largest = 0;
  bool same() const { return differing == 0; }
};
Compared compare(const std::vector<float>& a, const std::vector<float>& b);
std::string describe(const Compared& c, std::size_t values);  // "12 of 631306 values differ, ...".
// The weights' fingerprint (dist::fingerprint: 16 hex digits, equal exactly when the bits are).
std::string fingerprint(const std::vector<float>& weights);

}  // namespace ch12
