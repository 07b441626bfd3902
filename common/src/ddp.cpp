// dist/ddp.h: DistributedDataParallel (chapter 08).
#include "dist/ddp.h"

#include <string>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"

namespace dist {
namespace {

// Every rank must wrap the same model: the same number of parameters with the same sizes. Each
// rank all_gathers (count, total values, a hash of the sizes) and compares with rank 0's, as
// torch's _verify_param_shape_across_processes does, so a mismatch is an error on every rank
// instead of an all_reduce that hangs or mixes unrelated values.
void verify_same_model(const std::vector<Parameter*>& parameters, ProcessGroup& group,
                       std::int64_t numel) {
  std::int64_t shape_hash = 1469598103934665603LL;  // FNV-1a over the sizes, in order
  for (const Parameter* p : parameters) {
    shape_hash = (shape_hash ^ p->data.numel()) * 1099511628211LL;
  }
  const Tensor mine = Tensor::from<std::int64_t>(
      {static_cast<std::int64_t>(parameters.size()), numel, shape_hash}, get_device());
  std::vector<Tensor> everyone;
  group.all_gather(everyone, mine);
  const std::vector<std::int64_t> first = everyone[0].to_vector<std::int64_t>();
  for (std::size_t r = 1; r < everyone.size(); ++r) {
    const std::vector<std::int64_t> other = everyone[r].to_vector<std::int64_t>();
    if (other != first) {
      throw ConfigError(
          "DistributedDataParallel: rank " + std::to_string(r) + " wraps " +
          std::to_string(other[0]) + " parameters with " + std::to_string(other[1]) +
          " values, rank 0 wraps " + std::to_string(first[0]) + " with " +
          std::to_string(first[1]) +
          (other[0] == first[0] && other[1] == first[1] ? " (sizes in another order)" : "") +
          ": every rank must build the same model");
    }
  }
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::vector<Parameter*> parameters)
    : DistributedDataParallel(std::move(parameters), default_group()) {}

DistributedDataParallel::DistributedDataParallel(std::vector<Parameter*> parameters,
                                                 ProcessGroup& group)
    : parameters_(std::move(parameters)), group_(group) {
  if (parameters_.empty()) {
    throw ConfigError("DistributedDataParallel needs at least one parameter to train");
  }
  const Device device = parameters_[0]->data.device();
  for (const Parameter* p : parameters_) {
    if (p->data.dtype() != kFloat32 || p->data.device() != device ||
        p->grad.numel() != p->data.numel()) {
      throw ConfigError("DistributedDataParallel: parameter '" + p->name + "' must be float32 on " +
                        device.str() + " with a grad of its size");
    }
    numel_ += p->data.numel();
  }
  verify_same_model(parameters_, group_, numel_);
  // Promise 1: every replica starts from rank 0's parameters.
  for (Parameter* p : parameters_) group_.broadcast(p->data, 0);
  bucket_ = Tensor(numel_, kFloat32, device);
}

void DistributedDataParallel::average_gradients() {
  // Promise 2: grad = (1/W) * sum over ranks. Pack every gradient, already divided by W as torch
  // does, into one bucket, so that one all_reduce moves them all; then unpack.
  const int world = group_.size();
  std::int64_t offset = 0;
  for (const Parameter* p : parameters_) {
    bucket_.assign_slice(offset, p->grad / world);
    offset += p->grad.numel();
  }
  group_.all_reduce(bucket_, ReduceOp::SUM);
  offset = 0;
  for (Parameter* p : parameters_) {
    p->grad.copy_(bucket_.slice(offset, p->grad.numel()));
    offset += p->grad.numel();
  }
}

}  // namespace dist
