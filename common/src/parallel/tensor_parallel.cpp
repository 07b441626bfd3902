// Tensor and sequence parallelism (dist/tensor_parallel.h).
#include "dist/tensor_parallel.h"

#include <cstddef>
#include <string>
#include <utility>

#include "dist/check.h"

namespace dist {
namespace {

std::string str(std::int64_t v) {
  return std::to_string(v);
}

// The shape checks every layer makes first, before it slices anything.
void check_full_layer(const char* layer, std::int64_t in, std::int64_t out, const LinearInit& full,
                      const ProcessGroup& group, bool split_out) {
  const std::string name =
      std::string(layer) + "(in_features " + str(in) + ", out_features " + str(out) + ")";
  if (in < 1 || out < 1) throw ConfigError(name + ": both sizes must be at least 1");
  if (static_cast<std::int64_t>(full.weight.size()) != in * out ||
      static_cast<std::int64_t>(full.bias.size()) != out) {
    throw ConfigError(name + " is sliced from the whole layer's " + str(in * out) +
                      " weights (out x in) and " + str(out) + " biases, got " +
                      str(static_cast<std::int64_t>(full.weight.size())) + " and " +
                      str(static_cast<std::int64_t>(full.bias.size())));
  }
  const std::int64_t t = group.size();
  const std::int64_t split = split_out ? out : in;
  if (split % t != 0) {
    throw ConfigError(name + ": the tensor-parallel group's " + str(t) + " ranks do not divide " +
                      (split_out ? "out_features " : "in_features ") + str(split) +
                      "; choose a group size that divides it, or a layer size that it divides");
  }
}

// Rank r's rows [r·out/T, (r+1)·out/T) of W and of b.
LinearInit column_slice(std::int64_t in, std::int64_t out, const LinearInit& full,
                        const ProcessGroup& group) {
  group.require_member("ColumnParallelLinear");
  check_full_layer("ColumnParallelLinear", in, out, full, group, /*split_out=*/true);
  const std::int64_t part = out / group.size(), first = group.rank() * part;
  LinearInit local;
  local.weight.assign(full.weight.begin() + first * in, full.weight.begin() + (first + part) * in);
  local.bias.assign(full.bias.begin() + first, full.bias.begin() + first + part);
  return local;
}

// Rank r's columns [r·in/T, (r+1)·in/T) of W; the bias whole on the group's rank 0 (it starts that
// rank's partial sums), zeros on the others (the all_reduce then adds it once).
LinearInit row_slice(std::int64_t in, std::int64_t out, const LinearInit& full,
                     const ProcessGroup& group) {
  group.require_member("RowParallelLinear");
  check_full_layer("RowParallelLinear", in, out, full, group, /*split_out=*/false);
  const std::int64_t part = in / group.size(), first = group.rank() * part;
  LinearInit local;
  for (std::int64_t j = 0; j < out; ++j) {
    const auto row = full.weight.begin() + j * in + first;
    local.weight.insert(local.weight.end(), row, row + part);
  }
  local.bias = group.rank() == 0 ? full.bias : std::vector<float>(full.bias.size(), 0.0f);
  return local;
}

LinearInit whole(const Linear& layer) {
  return {layer.weight().data.to_vector<float>(), layer.bias().data.to_vector<float>()};
}

// n rows of `features` values that T splits evenly; `what` names the tensor in the error.
std::int64_t rows_of(const Tensor& t, std::int64_t features, const ProcessGroup& group,
                     const char* what, bool split) {
  if (features < 1 || t.numel() % features != 0) {
    throw ConfigError(std::string(what) + ": " + str(t.numel()) + " values are not whole rows of " +
                      str(features) + " features");
  }
  const std::int64_t rows = t.numel() / features;
  if (split && rows % group.size() != 0) {
    throw ConfigError(std::string(what) + ": sequence parallelism splits the " + str(rows) +
                      " rows across the tensor-parallel group's " + str(group.size()) +
                      " ranks, which do not divide them; use a multiple of " + str(group.size()) +
                      " rows");
  }
  return rows;
}

}  // namespace

Tensor CopyToTensorParallelRegion::backward(Tensor grad) const {
  group_->all_reduce(grad, ReduceOp::SUM);
  return grad;
}

Tensor ReduceFromTensorParallelRegion::forward(Tensor partial) const {
  group_->all_reduce(partial, ReduceOp::SUM);
  return partial;
}

GatherFromSequenceParallelRegion::GatherFromSequenceParallelRegion(ProcessGroup& group,
                                                                   std::int64_t features)
    : group_(&group), features_(features) {}

Tensor GatherFromSequenceParallelRegion::forward(const Tensor& local) const {
  rows_of(local, features_, *group_, "GatherFromSequenceParallelRegion.forward's input", false);
  Tensor all(local.numel() * group_->size(), local.dtype(), local.device());
  group_->all_gather_into_tensor(all, local);
  return all;
}

Tensor GatherFromSequenceParallelRegion::backward(const Tensor& grad) const {
  rows_of(grad, features_, *group_, "GatherFromSequenceParallelRegion.backward's gradient", true);
  Tensor mine(grad.numel() / group_->size(), grad.dtype(), grad.device());
  group_->reduce_scatter_tensor(mine, grad, ReduceOp::SUM);
  return mine;
}

ReduceScatterToSequenceParallelRegion::ReduceScatterToSequenceParallelRegion(ProcessGroup& group,
                                                                             std::int64_t features)
    : group_(&group), features_(features) {}

Tensor ReduceScatterToSequenceParallelRegion::forward(const Tensor& partial) const {
  rows_of(partial, features_, *group_, "ReduceScatterToSequenceParallelRegion.forward's input",
          true);
  Tensor mine(partial.numel() / group_->size(), partial.dtype(), partial.device());
  group_->reduce_scatter_tensor(mine, partial, ReduceOp::SUM);
  return mine;
}

Tensor ReduceScatterToSequenceParallelRegion::backward(const Tensor& grad) const {
  rows_of(grad, features_, *group_, "ReduceScatterToSequenceParallelRegion.backward's gradient",
          false);
  Tensor all(grad.numel() * group_->size(), grad.dtype(), grad.device());
  group_->all_gather_into_tensor(all, grad);
  return all;
}

Tensor scatter_to_sequence_parallel_region(const Tensor& full, std::int64_t features,
                                           const ProcessGroup& group) {
  group.require_member("scatter_to_sequence_parallel_region");
  const std::int64_t rows =
      rows_of(full, features, group, "scatter_to_sequence_parallel_region", true);
  const std::int64_t n = rows / group.size() * features;
  Tensor mine(n, full.dtype(), full.device());
  const std::size_t bytes = static_cast<std::size_t>(n) * full.element_size();
  detail::copy_bytes(mine.data(), mine.device(),
                     static_cast<const std::byte*>(full.data()) + group.rank() * bytes,
                     full.device(), bytes);
  return mine;
}

ColumnParallelLinear::ColumnParallelLinear(std::int64_t in_features, std::int64_t out_features,
                                           const LinearInit& full, ProcessGroup& group,
                                           TensorParallelOptions options, Device device)
    : in_(in_features),
      out_(out_features),
      first_(group.rank() * (out_features / group.size())),
      group_(&group),
      options_(options),
      local_(in_features, out_features / group.size(),
             column_slice(in_features, out_features, full, group), device) {}

ColumnParallelLinear::ColumnParallelLinear(const Linear& full, ProcessGroup& group,
                                           TensorParallelOptions options)
    : ColumnParallelLinear(full.in_features(), full.out_features(), whole(full), group, options,
                           full.weight().data.device()) {}

Tensor ColumnParallelLinear::forward(const Tensor& x) {
  if (!options_.sequence_parallel) {
    return local_.forward(CopyToTensorParallelRegion(*group_).forward(x));
  }
  // Kept whole for backward (its d loss / d W needs every row); see the header.
  return local_.forward(GatherFromSequenceParallelRegion(*group_, in_).forward(x));
}

Tensor ColumnParallelLinear::backward(const Tensor& grad_out) {
  Tensor partial = local_.backward(grad_out);  // d loss / d x over this rank's output features
  if (!options_.sequence_parallel) {
    return CopyToTensorParallelRegion(*group_).backward(std::move(partial));
  }
  return GatherFromSequenceParallelRegion(*group_, in_).backward(partial);
}

RowParallelLinear::RowParallelLinear(std::int64_t in_features, std::int64_t out_features,
                                     const LinearInit& full, ProcessGroup& group,
                                     TensorParallelOptions options, Device device)
    : in_(in_features),
      out_(out_features),
      first_(group.rank() * (in_features / group.size())),
      group_(&group),
      options_(options),
      local_(in_features / group.size(), out_features,
             row_slice(in_features, out_features, full, group), device) {
  bias_ = {"bias", Tensor::from(full.bias, device), Tensor::zeros(out_, kFloat32, device)};
}

RowParallelLinear::RowParallelLinear(const Linear& full, ProcessGroup& group,
                                     TensorParallelOptions options)
    : RowParallelLinear(full.in_features(), full.out_features(), whole(full), group, options,
                        full.weight().data.device()) {}

Tensor RowParallelLinear::forward(const Tensor& x) {
  // The optimizer steps bias_; rank 0's partial sums start from its current values.
  if (group_->rank() == 0) local_.parameters()[1]->data = bias_.data;
  Tensor partial = local_.forward(x);
  if (!options_.sequence_parallel) {
    return ReduceFromTensorParallelRegion(*group_).forward(std::move(partial));
  }
  return ReduceScatterToSequenceParallelRegion(*group_, out_).forward(partial);
}

Tensor RowParallelLinear::backward(const Tensor& grad_out) {
  Tensor gathered;
  if (options_.sequence_parallel) {
    gathered = ReduceScatterToSequenceParallelRegion(*group_, out_).backward(grad_out);
  }
  const Tensor& g = options_.sequence_parallel ? gathered : grad_out;
  // d loss / d b over every row, added to bias_.grad as dist::Linear adds it (the same sum in
  // double, rounded once): the local layer accumulates into a copy of it, which comes back.
  Parameter& local_bias = *local_.parameters()[1];
  local_bias.grad = bias_.grad;
  Tensor grad_x = local_.backward(g);
  bias_.grad = local_bias.grad;
  return grad_x;
}

ParallelMLP::ParallelMLP(const Linear& fc1, const Linear& fc2, ProcessGroup& group,
                         TensorParallelOptions options)
    : fc1_((fc1.out_features() == fc2.in_features()
                ? fc1
                : throw ConfigError("ParallelMLP: fc1 gives " + str(fc1.out_features()) +
                                    " features but fc2 takes " + str(fc2.in_features()))),
           group, options),
      fc2_(fc2, group, options) {}

Tensor ParallelMLP::forward(const Tensor& x) {
  return fc2_.forward(relu_.forward(fc1_.forward(x)));
}

Tensor ParallelMLP::backward(const Tensor& grad_out) {
  return fc1_.backward(relu_.backward(fc2_.backward(grad_out)));
}

std::vector<Parameter*> ParallelMLP::parameters() {
  std::vector<Parameter*> all = fc1_.parameters();
  for (Parameter* p : fc2_.parameters()) all.push_back(p);
  return all;
}

}  // namespace dist
