// dist/ddp.h: DistributedDataParallel (chapter 08).
#include "dist/ddp.h"

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"
#include "group/agreement.h"
#include "util/fnv1a.h"

namespace dist {
namespace {

// Every rank must wrap the same model: the same number of parameters with the same sizes
// (agreement.h): (count, total values, a hash of the sizes) against rank 0's.
void verify_same_model(const std::vector<Parameter*>& parameters, ProcessGroup& group,
                       std::int64_t numel, Device device) {
  util::Fnv1a shape_hash;  // over the sizes, in order
  for (const Parameter* p : parameters) {
    const std::int64_t n = p->data.numel();
    shape_hash.add(&n, sizeof n);
  }
  const auto differs =
      detail::first_disagreement(group,
                                 {static_cast<std::int64_t>(parameters.size()), numel,
                                  static_cast<std::int64_t>(shape_hash.value())},
                                 device);
  if (!differs) return;
  const std::vector<std::int64_t>& other = differs->theirs;
  const std::vector<std::int64_t>& first = differs->rank0s;
  throw ConfigError(
      "DistributedDataParallel: rank " + std::to_string(differs->rank) + " wraps " +
      std::to_string(other[0]) + " parameters with " + std::to_string(other[1]) +
      " values, rank 0 wraps " + std::to_string(first[0]) + " with " + std::to_string(first[1]) +
      (other[0] == first[0] && other[1] == first[1] ? " (the same totals, other sizes)" : "") +
      ": every rank must build the same model");
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::vector<Parameter*> parameters,
                                                 DdpOptions options)
    : parameters_(std::move(parameters)), options_(options) {
  ProcessGroup& group = default_group();
  world_ = group.size();
  overlap_ = options_.overlap && world_ > 1;
  if (parameters_.empty()) {
    throw ConfigError("DistributedDataParallel needs at least one parameter to train");
  }
  if (!(options_.bucket_cap_mb > 0)) {
    throw ConfigError("DistributedDataParallel: bucket_cap_mb must be positive, got " +
                      std::to_string(options_.bucket_cap_mb));
  }
  const Device device = parameters_[0]->data.device();
  std::int64_t numel = 0;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter* p = parameters_[i];
    if (p->data.dtype() != kFloat32 || p->data.device() != device ||
        p->grad.numel() != p->data.numel() || p->grad.dtype() != kFloat32 ||
        p->grad.device() != device) {
      throw ConfigError("DistributedDataParallel: parameter '" + p->name + "' must be float32 on " +
                        device.str() + ", with a float32 grad of its size on the same device");
    }
    if (!index_of_.emplace(p, i).second) {
      throw ConfigError("DistributedDataParallel: parameter '" + p->name + "' is listed twice");
    }
    numel += p->data.numel();
  }
  // --8<-- [start:broadcast]
  verify_same_model(parameters_, group, numel, device);
  // Promise 1: every replica starts from rank 0's parameters.
  for (Parameter* p : parameters_) group.broadcast(p->data, 0);
  // --8<-- [end:broadcast]
  copy_rank0_buffers();  // and from rank 0's buffers, as torch syncs the whole module state

  // Buckets, last parameter first: the order in which backward produces the gradients.
  const auto cap = static_cast<std::int64_t>(options_.bucket_cap_mb * 1024 * 1024 / 4);
  bucket_of_.resize(parameters_.size());
  offset_of_.resize(parameters_.size());
  for (std::size_t k = parameters_.size(); k-- > 0;) {
    const std::int64_t n = parameters_[k]->data.numel();
    if (buckets_.empty() || (buckets_.back().numel > 0 && buckets_.back().numel + n > cap)) {
      buckets_.emplace_back();
    }
    Bucket& b = buckets_.back();
    bucket_of_[k] = buckets_.size() - 1;
    offset_of_[k] = b.numel;
    b.params.push_back(k);
    b.numel += n;
  }
  for (Bucket& b : buckets_) b.buffer = Tensor(b.numel, kFloat32, device);
  ready_.assign(parameters_.size(), false);
  unused_.assign(parameters_.size(), false);
  for (const Bucket& b : buckets_) missing_.push_back(b.params.size());
  if (options_.gradient_as_bucket_view) {
    for (std::size_t k = 0; k < parameters_.size(); ++k) point_grad_at_bucket(k);
  }
}

DistributedDataParallel::~DistributedDataParallel() {
  in_flight_.clear();  // waits for buckets still in flight, before the buckets go
  if (!options_.gradient_as_bucket_view) return;
  for (std::size_t k = 0; k < parameters_.size(); ++k) {
    if (!grad_is_bucket_view(k)) continue;
    Tensor own = parameters_[k]->grad;              // a copy has its own storage
    Tensor view = std::move(parameters_[k]->grad);  // the grad is now empty, not a view
    parameters_[k]->grad = std::move(own);
  }
}

bool DistributedDataParallel::grad_is_bucket_view(std::size_t k) {
  const Tensor& grad = parameters_[k]->grad;
  Tensor& buffer = buckets_[bucket_of_[k]].buffer;
  return grad.is_view() && grad.dtype() == kFloat32 &&
         grad.numel() == parameters_[k]->data.numel() &&
         grad.data() == static_cast<std::byte*>(buffer.data()) + offset_of_[k] * 4;
}

void DistributedDataParallel::point_grad_at_bucket(std::size_t k) {
  Parameter* p = parameters_[k];
  Tensor& buffer = buckets_[bucket_of_[k]].buffer;
  if (p->grad.numel() != p->data.numel()) {
    throw Error("DistributedDataParallel: the grad of '" + p->name + "' has " +
                std::to_string(p->grad.numel()) + " values, its parameter " +
                std::to_string(p->data.numel()) + ": give it a grad of its parameter's size");
  }
  buffer.assign_slice(offset_of_[k], p->grad);
  Tensor view = detail::view_into(buffer, offset_of_[k], p->data.numel());
  Tensor before = std::move(p->grad);  // its storage is freed below (or, if a view, nothing)
  p->grad = std::move(view);
}

// Rank 0's buffers to every rank: one broadcast per dtype (torch coalesces them too).
void DistributedDataParallel::copy_rank0_buffers() {
  std::map<DType, std::vector<Tensor*>> by_dtype;
  for (Tensor* b : options_.buffers) {
    if (b->numel() > 0) by_dtype[b->dtype()].push_back(b);
  }
  for (auto& [dtype, tensors] : by_dtype) {
    std::vector<Tensor> parts;
    for (const Tensor* t : tensors) parts.push_back(*t);
    Tensor flat = cat(parts, tensors.front()->device());
    default_group().broadcast(flat, 0);
    std::int64_t at = 0;
    for (Tensor* t : tensors) {
      t->copy_(flat.slice(at, t->numel()));
      at += t->numel();
    }
  }
}

void DistributedDataParallel::before_forward(bool training) {
  check_usable();
  if (options_.broadcast_buffers && sync_buffers_next_) copy_rank0_buffers();
  sync_buffers_next_ = training && no_sync_depth_ == 0;
}

void DistributedDataParallel::check_usable() const {
  if (!unfinished_.empty()) throw Error(unfinished_);
  if (failed_) {
    throw Error(
        "DistributedDataParallel: an earlier gradient all_reduce failed (see its error); "
        "the gradient group is broken, so destroy this object and the process group");
  }
}

void DistributedDataParallel::grads_ready(const std::vector<Parameter*>& ready) {
  check_usable();
  if (no_sync_depth_ > 0) return;
  begin_step();
  for (const Parameter* p : ready) {
    const auto it = index_of_.find(p);
    if (it == index_of_.end()) {
      throw Error("DistributedDataParallel.grads_ready: parameter '" + p->name +
                  "' is not one of the parameters this DDP was built with");
    }
    if (unused_[it->second]) {
      throw Error("DistributedDataParallel.grads_ready: '" + p->name + "' was " +
                  (static_known_ ? "unused at the first step, and static_graph says that the "
                                   "set of unused parameters never changes"
                                 : "marked unused this step") +
                  ", yet its gradient is ready");
    }
    if (ready_[it->second]) {
      throw Error("DistributedDataParallel.grads_ready: the gradient of '" + p->name +
                  "' was marked ready twice in one step; call finish_gradient_sync() after "
                  "each backward");
    }
    ready_[it->second] = true;
    --missing_[bucket_of_[it->second]];
  }
  launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  // In bucket order only: every rank must start the same all_reduce calls in the same order.
  while (launched_ < buckets_.size() && missing_[launched_] == 0) {
    Bucket& b = buckets_[launched_];
    // gradient_as_bucket_view: the grads are slices of b.buffer, so the packing below divides
    // them where they are (a grad the program replaced is first made a slice again).
    for (std::size_t k : b.params) {
      if (options_.gradient_as_bucket_view && !grad_is_bucket_view(k)) point_grad_at_bucket(k);
    }
    // An unused parameter (find_unused_parameters) adds the grad it holds, as any other: zeros
    // after zero_grad(), or what no_sync() steps accumulated. torch 1.13 does the same with a
    // defined .grad, and adds zeros for a .grad that is None.
    if (comm_hook_) {  // a hook gets the gradients as they are, and divides them itself
      for (std::size_t k : b.params) {
        if (options_.gradient_as_bucket_view) continue;  // already there
        b.buffer.assign_slice(offset_of_[k], parameters_[k]->grad);
      }
    } else {
      // --8<-- [start:pack_divided]
      // Pack, already divided by world_size (as torch does): the SUM is then the average.
      for (std::size_t k : b.params) {
        b.buffer.assign_slice(offset_of_[k], parameters_[k]->grad / world_);
      }
      // --8<-- [end:pack_divided]
    }
    reduced_once_ = true;
    try {
      if (overlap_) {  // queued behind the group's earlier calls; waited for at the end
        in_flight_.push_back(start_bucket(launched_, b.buffer, true));
      } else {
        const Timeline::Span span(options_.timeline, span_name(launched_));
        CommFuture reduced = start_bucket(launched_, b.buffer, false);
        reduced.wait();
        bytes_sent_ += reduced.bytes_sent();
      }
    } catch (const Error&) {
      failed_ = true;
      throw;
    }
    ++launched_;
  }
}

CommFuture DistributedDataParallel::start_bucket(std::size_t b, Tensor& buffer, bool async) {
  const Bucket& bucket = buckets_[b];
  if (!comm_hook_) {
    return CommFuture(default_group().all_reduce(buffer, ReduceOp::SUM, {.async_op = async}));
  }
  std::vector<Parameter*> params;
  std::vector<std::int64_t> offsets;
  for (std::size_t k : bucket.params) {
    params.push_back(parameters_[k]);
    offsets.push_back(offset_of_[k]);
  }
  GradBucket view(b, b + 1 == buckets_.size(), buffer, std::move(params), std::move(offsets));
  return comm_hook_(view);
}

void DistributedDataParallel::register_comm_hook(CommHook hook) {
  if (!hook) throw ConfigError("DistributedDataParallel.register_comm_hook: the hook is empty");
  if (comm_hook_) {
    throw ConfigError(
        "DistributedDataParallel.register_comm_hook: a hook is already registered, and a DDP "
        "takes one (torch 1.13: \"register_comm_hook or register_builtin_comm_hook can only be "
        "called once.\")");
  }
  if (reduced_once_) {
    throw ConfigError(
        "DistributedDataParallel.register_comm_hook: gradients were already reduced without the "
        "hook; register it before the first backward, so that every step is reduced alike "
        "(torch documents the rule and does not check it)");
  }
  comm_hook_ = std::move(hook);
}

std::string DistributedDataParallel::span_name(std::size_t b) const {
  return "all_reduce bucket " + std::to_string(b) + " (" + std::to_string(buckets_[b].numel) +
         " values)";
}

void DistributedDataParallel::finish_gradient_sync() {
  check_usable();
  if (no_sync_depth_ > 0) return;
  begin_step();
  std::vector<std::size_t> missing;  // no gradient, and nothing allows that
  for (std::size_t k = 0; k < parameters_.size(); ++k) {
    if (ready_[k]) continue;
    if (options_.find_unused_parameters || (options_.static_graph && !static_known_)) {
      mark_unused_index(k);
    } else if (options_.static_graph) {
      throw Error("DistributedDataParallel: the gradient of '" + parameters_[k]->name +
                  "' was not marked ready, but it was used at the first step, and static_graph "
                  "says that the set of used parameters never changes");
    } else {
      missing.push_back(k);
    }
  }
  launch_ready_buckets();
  Tensor used;  // how many ranks used each parameter
  if (missing.empty() && needs_used_map()) used = reduce_used_map(true);
  if (overlap_) {
    // Every bucket's Work, in order; each call ends by the group's timeout at the latest. After
    // a failure the group is closed and the later buckets fail at once: the first error is the
    // one to report.
    const Timeline::Span span(options_.timeline, "wait for gradient buckets");
    std::exception_ptr first_error;
    for (std::size_t b = 0; b < in_flight_.size(); ++b) {
      try {
        in_flight_[b].wait();
      } catch (...) {
        if (first_error == nullptr) first_error = std::current_exception();
      }
      bytes_sent_ += in_flight_[b].bytes_sent();
      if (options_.timeline != nullptr) {
        options_.timeline->add(span_name(b), in_flight_[b].start_time(), in_flight_[b].end_time(),
                               "gradient all_reduce");
      }
    }
    in_flight_.clear();
    if (first_error != nullptr) {
      failed_ = true;
      std::rethrow_exception(first_error);
    }
  }
  if (!missing.empty()) {
    // As torch's Reducer, which finds out at the next forward: the buckets that hold these
    // parameters never left, so this step's grads stay this rank's own, and the next step throws.
    unfinished_ = missing_grads_error(missing);
    return;
  }
  if (options_.static_graph && !static_known_) {
    static_known_ = true;
    static_unused_ = unused_;
    static_global_unused_.assign(parameters_.size(), false);
    for (std::size_t k = 0; k < parameters_.size(); ++k) {
      static_global_unused_[k] = used.item(static_cast<std::int64_t>(k)) == 0;
    }
  }
  for (Bucket& b : buckets_) {
    for (std::size_t k : b.params) {
      // A parameter that no rank used keeps its grad untouched, as in torch (whose grad is then
      // None, or what zero_grad() left).
      const bool nobody_used = used.numel() > 0 ? used.item(static_cast<std::int64_t>(k)) == 0
                                                : (static_known_ && static_global_unused_[k]);
      if (nobody_used) continue;
      if (options_.gradient_as_bucket_view && grad_is_bucket_view(k)) continue;  // holds it
      parameters_[k]->grad.copy_(b.buffer.slice(offset_of_[k], parameters_[k]->grad.numel()));
    }
  }
  ready_.assign(parameters_.size(), false);
  unused_.assign(parameters_.size(), false);
  step_begun_ = false;
  for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].params.size();
  launched_ = 0;
}

void DistributedDataParallel::begin_step() {
  if (step_begun_) return;
  step_begun_ = true;
  if (in_join_) {  // Join's count: 1 (still training), and whether a used map follows the buckets
    Tensor notice = Tensor::from<std::int64_t>({1, needs_used_map() ? 1 : 0}, device_of_grads());
    try {
      default_group().all_reduce(notice, ReduceOp::SUM);
    } catch (const Error&) {
      failed_ = true;
      throw;
    }
  }
  if (static_known_) {  // static_graph: the first step's unused parameters, unused again
    for (std::size_t k = 0; k < parameters_.size(); ++k) {
      if (static_unused_[k]) mark_unused_index(k);
    }
  }
}

void DistributedDataParallel::mark_unused_index(std::size_t k) {
  ready_[k] = true;
  unused_[k] = true;
  --missing_[bucket_of_[k]];
}

void DistributedDataParallel::mark_unused(const std::vector<Parameter*>& unused) {
  check_usable();
  if (!options_.find_unused_parameters && !options_.static_graph) {
    throw Error(
        "DistributedDataParallel.mark_unused: set DdpOptions::find_unused_parameters = true "
        "(torch: find_unused_parameters=True) to train with parameters that get no gradient");
  }
  if (no_sync_depth_ > 0) return;
  begin_step();
  for (const Parameter* p : unused) {
    const auto it = index_of_.find(p);
    if (it == index_of_.end()) {
      throw Error("DistributedDataParallel.mark_unused: parameter '" + p->name +
                  "' is not one of the parameters this DDP was built with");
    }
    const std::size_t k = it->second;
    if (unused_[k]) continue;
    if (ready_[k]) {
      throw Error("DistributedDataParallel.mark_unused: the gradient of '" + p->name +
                  "' was marked ready this step, so it was used");
    }
    if (static_known_) {
      throw Error("DistributedDataParallel.mark_unused: '" + p->name +
                  "' was used at the first step, and static_graph says that the set of used "
                  "parameters never changes");
    }
    mark_unused_index(k);
  }
  launch_ready_buckets();
}

Tensor DistributedDataParallel::reduce_used_map(bool contribute) {
  Tensor used(static_cast<std::int64_t>(parameters_.size()), kInt32);
  for (std::size_t k = 0; contribute && k < parameters_.size(); ++k) {
    used.set(static_cast<std::int64_t>(k), unused_[k] ? 0 : 1);
  }
  used = used.to(device_of_grads());
  try {
    default_group().all_reduce(used, ReduceOp::SUM);
  } catch (const Error&) {
    failed_ = true;
    throw;
  }
  return used.cpu();
}

// torch 1.13's words (Reducer::ensure_prior_reduction_finished), where they apply here, with the
// names and indices that torch gives with TORCH_DISTRIBUTED_DEBUG=INFO (names in bucket order).
std::string DistributedDataParallel::missing_grads_error(
    const std::vector<std::size_t>& missing) const {
  const std::string rank = std::to_string(default_group().rank());
  std::string names, indices;
  for (const Bucket& b : buckets_) {
    for (std::size_t k : b.params) {
      if (std::find(missing.begin(), missing.end(), k) == missing.end()) continue;
      names += (names.empty() ? "" : ", ") + parameters_[k]->name;
    }
  }
  for (std::size_t k : missing) indices += (indices.empty() ? "" : " ") + std::to_string(k);
  return "DistributedDataParallel: Expected to have finished reduction in the prior iteration "
         "before starting a new one. This error indicates that your module has parameters that "
         "were not used in producing loss. Set DdpOptions::find_unused_parameters = true (torch: "
         "find_unused_parameters=True), or mark every parameter ready in backward.\n"
         "Parameters which did not receive grad for rank " +
         rank + ": " + names + "\nParameter indices which did not receive grad for rank " + rank +
         ": " + indices +
         "\n(The prior step ended without averaging: its gradients were this rank's own.)";
}

// --8<-- [start:average_gradients]
void DistributedDataParallel::average_gradients() {
  grads_ready(parameters_);
  finish_gradient_sync();
}
// --8<-- [end:average_gradients]

}  // namespace dist
