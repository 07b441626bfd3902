// dist/tensor_parallel.h — tensor parallelism (Megatron-LM) and sequence parallelism: one layer's
// weight split across the ranks of a group, each rank computing its part of every sample.
//
//   dist::Linear fc1(8, 16, init1), fc2(16, 8, init2);          // the one-process model
//   dist::ParallelMLP mlp(fc1, fc2, tp_group);                  // each rank slices its part
//   dist::SGD optimizer(mlp.parameters(), lr);                  // this rank's slices
//   optimizer.zero_grad();
//   dist::Tensor out = mlp.forward(x);          // x and out whole on every rank of tp_group
//   dist::MseLoss loss = dist::mse_loss(out, y);
//   mlp.backward(loss.grad);                    // one all_reduce in forward, one in backward
//   optimizer.step();
//
// DDP and ZeRO (dist/ddp.h, dist/sharded.h) split the batch; tensor parallelism (Shoeybi et al.,
// 2019, "Megatron-LM") splits the layers, so that a model too wide for one device runs on T.
// A Linear's out = x W^T + b can be cut two ways across the T ranks of a group:
//   - ColumnParallelLinear: rank r holds out/T rows of W and of b (its output features), takes
//     the whole input and gives its out/T columns of the output. Each output value is the same
//     dot product as one process computes: equal bit for bit.
//   - RowParallelLinear: rank r holds in/T columns of W, takes its in/T columns of the input (the
//     column layer's output, as it is: input_is_parallel), and gives a partial product over its
//     in/T terms; an all_reduce adds the T partials. The bias is held whole on every rank and
//     added once: rank 0 of the group starts its partial sums with it, so at T = 1 this is
//     dist::Linear's one sum, bit for bit. Megatron adds it after the all_reduce (or the
//     reduce_scatter), on every rank: the same sum in another order, which rounds once more.
// Column then row (fc1, ReLU, fc2) needs no communication between the two layers: ReLU acts value
// by value on the column layer's slice. Around the pair sit two conjugate operators, each an
// explicit forward/backward pair (there is no autograd):
//   f, CopyToTensorParallelRegion (Megatron's copy_to_tensor_model_parallel_region): forward is
//     the identity (every rank already has x), backward all_reduces (SUM) d loss / d x, whose T
//     parts each rank computed from its slice of W;
//   g, ReduceFromTensorParallelRegion (reduce_from_tensor_model_parallel_region): forward
//     all_reduces the partial outputs, backward is the identity.
// So a block makes one all_reduce of rows x out values in forward and one of rows x in values in
// backward (the library's Gloo backend sends e·n·(T − 1) bytes for each while it takes the one
// exchange, common/src/backends/gloo_mesh.h), and nothing else: no weight or gradient ever moves.
//
// Sequence parallelism (Korthikanti et al., 2022; Megatron's sequence_parallel=True): outside the
// block the rows (the batch or sequence dimension) are split too, rank r holding rows
// [r·n/T, (r+1)·n/T). f becomes GatherFromSequenceParallelRegion (all_gather forward,
// reduce_scatter backward) and g ReduceScatterToSequenceParallelRegion (reduce_scatter forward,
// all_gather backward), the flat all_gather_into_tensor / reduce_scatter_tensor. A ring
// all_reduce is a reduce_scatter then an all_gather, so where the block's in and out are equal (a
// transformer's MLP) a ring moves the same bytes either way. (This library's Gloo backend
// all_reduces a small tensor in one exchange, 4n(T − 1) bytes for n float32 values, where a ring
// sends about 8n(T − 1)/T; each flat call sends 4(n/T)(T − 1).) What it saves is memory: the
// block's input and output are n/T rows per rank instead of n, 4(n − n/T)(in + out) bytes for
// float32. Two choices differ from Megatron's: the column layer keeps the gathered input for its
// backward (Megatron keeps its n/T rows and gathers them again in backward, saving 4(n − n/T)·in
// bytes more for one more all_gather), and the row layer's bias gradient is summed over the
// gathered rows of d loss / d out, which makes it whole on every rank (Megatron sums its own rows
// and all_reduces the bias gradients of its sequence-parallel parameters later).
//
// Rounding. A value one rank computes alone (the column layer's output, d loss / d W and d b; the
// row layer's d loss / d W, d b and d loss / d x) is computed as one process computes it: the same
// terms in the same order, in double, rounded once to float32, so it is equal bit for bit given
// equal inputs. A value summed across ranks (the row layer's output; the column layer's d loss /
// d x) is T partial sums, each rounded to float32, then added in float32 by the all_reduce: T
// roundings of partial sums and T − 1 of additions, where one process rounds once. With u = 2^-24
// (float32's unit roundoff) and S = Σ|terms| (the bias included), one process is within u·S of the
// exact sum and T ranks within T·u·S (to first order), so the two differ by at most (T + 1)·u·S,
// plus the doubles' own error (under 2^-50·S for these sizes). Downstream values inherit these
// differences; tests/multiprocess/tensor_parallel_test.cpp carries the bound through a block's
// forward, backward and SGD steps value by value, and checks TP = 1 bit for bit.
//
// Bad input is a dist::ConfigError naming the sizes, thrown before any rank communicates: a group
// size that does not divide out_features (column) or in_features (row), full weights of the
// wrong shape, and (sequence parallel) rows that the group size does not divide.
//
// Data parallel on top (2-D, DP x TP): parameters() lists this rank's slices; average their
// gradients over the data-parallel group (the mesh's "dp" group) as DDP does, while the layers
// run on the "tp" group.
//
// PyTorch: torch 1.13 has no tensor parallelism; a 1.13 program builds the layers by hand with
// torch.distributed calls (the chapter's twin). torch 2.x has
// torch.distributed.tensor.parallel.parallelize_module(module, mesh["tp"], plan) (from 2.0) with
// the styles ColwiseParallel and RowwiseParallel (2.2's documentation lists only these; 2.1's
// also listed PairwiseParallel and an older SequenceParallel), and by 2.4's documentation a new
// SequenceParallel for the layers around the block: they shard a whole module's parameters as
// DTensors (distribute_tensor), as the constructors here slice a whole dist::Linear, and insert
// the same collectives.
//
// Taught in: chapter 15 (tensor parallel; DP x TP on a 2-D mesh).
// Built in: common/src/parallel/tensor_parallel.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/nn.h"
#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

struct TensorParallelOptions {
  // Megatron's sequence_parallel=True: the layers take and give n/T rows where they would take
  // or give whole rows (ColumnParallelLinear's input, RowParallelLinear's output).
  bool sequence_parallel = false;
};

// f: identity forward; backward all_reduces (SUM) the gradient over the group.
class CopyToTensorParallelRegion {
 public:
  explicit CopyToTensorParallelRegion(ProcessGroup& group) : group_(&group) {}
  Tensor forward(const Tensor& x) const { return x; }
  Tensor backward(Tensor grad) const;

 private:
  ProcessGroup* group_;
};

// g: forward all_reduces (SUM) the partial results over the group; identity backward.
class ReduceFromTensorParallelRegion {
 public:
  explicit ReduceFromTensorParallelRegion(ProcessGroup& group) : group_(&group) {}
  Tensor forward(Tensor partial) const;
  Tensor backward(const Tensor& grad) const { return grad; }

 private:
  ProcessGroup* group_;
};

// f under sequence parallelism: forward all_gathers every rank's rows (n/T rows of `features`
// values in, n rows out, rank order); backward reduce_scatters (SUM) the n rows of the gradient,
// leaving each rank its own n/T.
class GatherFromSequenceParallelRegion {
 public:
  GatherFromSequenceParallelRegion(ProcessGroup& group, std::int64_t features);
  Tensor forward(const Tensor& local) const;
  Tensor backward(const Tensor& grad) const;

 private:
  ProcessGroup* group_;
  std::int64_t features_;
};

// g under sequence parallelism: forward reduce_scatters (SUM) the partial results of n rows,
// leaving rank r the sum of rows [r·n/T, (r+1)·n/T); backward all_gathers the gradient's rows.
// A ConfigError, before any communication, if T does not divide n.
class ReduceScatterToSequenceParallelRegion {
 public:
  ReduceScatterToSequenceParallelRegion(ProcessGroup& group, std::int64_t features);
  Tensor forward(const Tensor& partial) const;
  Tensor backward(const Tensor& grad) const;

 private:
  ProcessGroup* group_;
  std::int64_t features_;
};

// This rank's rows of `full` (n rows of `features` values): rows [r·n/T, (r+1)·n/T), how a
// sequence-parallel block's input is split (Megatron's scatter_to_sequence_parallel_region,
// forward). No communication; a ConfigError if T does not divide n.
Tensor scatter_to_sequence_parallel_region(const Tensor& full, std::int64_t features,
                                           const ProcessGroup& group);

// Linear(in, out) with W and b split by output feature: rank r holds rows
// [r·out/T, (r+1)·out/T) of W and those values of b (gather_output = false: the output stays
// split). `full` holds the whole layer's values (out x in, row-major, and out), as a one-process
// dist::Linear would; each rank keeps its slice.
class ColumnParallelLinear {
 public:
  ColumnParallelLinear(std::int64_t in_features, std::int64_t out_features, const LinearInit& full,
                       ProcessGroup& group, TensorParallelOptions options = {},
                       Device device = Device::cpu());
  // Slices a whole dist::Linear (on its device): starts from exactly its values.
  ColumnParallelLinear(const Linear& full, ProcessGroup& group, TensorParallelOptions options = {});

  // x: n rows of in_features, the same on every rank (sequence parallel: this rank's n/T rows,
  // all_gathered first). Returns n rows of out_features / T: this rank's output features.
  Tensor forward(const Tensor& x);
  // grad_out: n rows of out_features / T. Adds d loss / d W and d b to this rank's slices and
  // returns d loss / d x, all_reduced over the group (sequence parallel: reduce_scattered, n/T
  // rows).
  Tensor backward(const Tensor& grad_out);

  std::vector<Parameter*> parameters() { return local_.parameters(); }  // weight, bias slices
  const Parameter& weight() const { return local_.weight(); }           // shape {out/T, in}
  const Parameter& bias() const { return local_.bias(); }               // out/T values
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }  // the whole layer's
  // This rank's output features: [first_output(), first_output() + out_features() / T).
  std::int64_t first_output() const { return first_; }

 private:
  std::int64_t in_, out_, first_;
  ProcessGroup* group_;
  TensorParallelOptions options_;
  Linear local_;
};

// Linear(in, out) with W split by input feature: rank r holds columns [r·in/T, (r+1)·in/T) of W
// and the whole bias (input_is_parallel: it takes this rank's in/T input features). The T
// partial products are all_reduced (g); the bias goes in once, on the group's rank 0.
class RowParallelLinear {
 public:
  RowParallelLinear(std::int64_t in_features, std::int64_t out_features, const LinearInit& full,
                    ProcessGroup& group, TensorParallelOptions options = {},
                    Device device = Device::cpu());
  RowParallelLinear(const Linear& full, ProcessGroup& group, TensorParallelOptions options = {});

  // x: n rows of in_features / T (this rank's input features). Returns n rows of out_features,
  // the same on every rank (sequence parallel: reduce_scattered, this rank's n/T rows).
  Tensor forward(const Tensor& x);
  // grad_out: n rows of out_features, the same on every rank (sequence parallel: this rank's n/T
  // rows, all_gathered first). Adds d loss / d W to this rank's columns and d loss / d b to the
  // whole bias (the same on every rank), and returns d loss / d x for this rank's in/T features.
  Tensor backward(const Tensor& grad_out);

  std::vector<Parameter*> parameters() { return {local_.parameters()[0], &bias_}; }
  const Parameter& weight() const { return local_.weight(); }  // shape {out, in/T}
  const Parameter& bias() const { return bias_; }              // whole: out values
  std::int64_t in_features() const { return in_; }             // the whole layer's
  std::int64_t out_features() const { return out_; }
  // This rank's input features: [first_input(), first_input() + in_features() / T).
  std::int64_t first_input() const { return first_; }

 private:
  std::int64_t in_, out_, first_;
  ProcessGroup* group_;
  TensorParallelOptions options_;
  Linear local_;  // this rank's columns; its bias is `bias_` on the group's rank 0, zeros elsewhere
  Parameter bias_;
};

// Megatron's ParallelMLP: ColumnParallelLinear, ReLU, RowParallelLinear, built from a one-process
// model's two layers (fc1.out_features == fc2.in_features, which T must divide). One all_reduce in
// forward (g, rows x fc2.out) and one in backward (f, rows x fc1.in); sequence parallel: an
// all_gather and a reduce_scatter in each, on rows / T.
class ParallelMLP {
 public:
  ParallelMLP(const Linear& fc1, const Linear& fc2, ProcessGroup& group,
              TensorParallelOptions options = {});

  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& grad_out);

  // fc1's weight and bias slices, then fc2's weight slice and whole bias.
  std::vector<Parameter*> parameters();
  ColumnParallelLinear& fc1() { return fc1_; }
  RowParallelLinear& fc2() { return fc2_; }

 private:
  ColumnParallelLinear fc1_;
  ReLU relu_;
  RowParallelLinear fc2_;
};

}  // namespace dist
