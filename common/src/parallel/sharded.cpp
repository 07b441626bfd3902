// ShardedDataParallel (dist/sharded.h).
#include "dist/sharded.h"

#include <string>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"
#include "group/agreement.h"
#include "util/fnv1a.h"

namespace dist {
namespace {

// Every rank must shard the same model the same way (agreement.h): (stage, units, values, a hash
// of every parameter's size in order) against rank 0's.
void verify_same_layout(const std::vector<std::vector<Parameter*>>& units, int stage,
                        ProcessGroup& group, Device device) {
  util::Fnv1a sizes;
  std::int64_t numel = 0;
  for (const auto& unit : units) {
    const auto count = static_cast<std::int64_t>(unit.size());
    sizes.add(&count, sizeof count);
    for (const Parameter* p : unit) {
      const std::int64_t n = p->data.numel();
      sizes.add(&n, sizeof n);
      numel += n;
    }
  }
  const auto differs = detail::first_disagreement(group,
                                                  {stage, static_cast<std::int64_t>(units.size()),
                                                   numel, static_cast<std::int64_t>(sizes.value())},
                                                  device);
  if (!differs) return;
  const std::vector<std::int64_t>& other = differs->theirs;
  const std::vector<std::int64_t>& first = differs->rank0s;
  throw ConfigError("ShardedDataParallel: rank " + std::to_string(differs->rank) + " shards " +
                    std::to_string(other[1]) + " units, " + std::to_string(other[2]) +
                    " values, at stage " + std::to_string(other[0]) + "; rank 0 shards " +
                    std::to_string(first[1]) + " units, " + std::to_string(first[2]) +
                    " values, at stage " + std::to_string(first[0]) +
                    ": every rank must build the same model and units, at the same stage");
}

}  // namespace

ShardedDataParallel::ShardedDataParallel(std::vector<std::vector<Parameter*>> units,
                                         ShardOptions options)
    : options_(options) {
  ProcessGroup& group = default_group();
  rank_ = group.rank();
  world_ = group.size();
  if (options_.stage < 1 || options_.stage > 3) {
    throw ConfigError("ShardedDataParallel: stage must be 1, 2 or 3 (0 is DDP), got " +
                      std::to_string(options_.stage));
  }
  if (units.empty()) throw ConfigError("ShardedDataParallel needs at least one unit");
  device_ = units[0].empty() ? Device::cpu() : units[0][0]->data.device();
  for (std::size_t u = 0; u < units.size(); ++u) {
    if (units[u].empty()) {
      throw ConfigError("ShardedDataParallel: unit " + std::to_string(u) + " has no parameters");
    }
    for (const Parameter* p : units[u]) {
      if (p->data.dtype() != kFloat32 || p->data.device() != device_ ||
          p->grad.numel() != p->data.numel() || p->grad.dtype() != kFloat32 ||
          p->grad.device() != device_) {
        throw ConfigError("ShardedDataParallel: parameter '" + p->name + "' must be float32 on " +
                          device_.str() + ", with a float32 grad of its size on the same device");
      }
    }
  }
  verify_same_layout(units, options_.stage, group, device_);

  units_.resize(units.size());
  for (std::size_t u = 0; u < units.size(); ++u) {
    Unit& unit = units_[u];
    unit.params = std::move(units[u]);
    for (const Parameter* p : unit.params) {
      unit.offsets.push_back(unit.numel);
      unit.numel += p->data.numel();
    }
    unit.chunk = (unit.numel + world_ - 1) / world_;
    // Rank 0's values, as DDP starts from them; the padding is zero and stays zero (its
    // gradient is zero, so SGD and Adam leave it there).
    Tensor flat(unit.chunk * world_, kFloat32, device_);
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
      flat.assign_slice(unit.offsets[i], unit.params[i]->data);
    }
    group.broadcast(flat, 0);
    for (std::size_t i = 0; i < unit.params.size(); ++i) {
      Parameter* p = unit.params[i];
      p->data = flat.slice(unit.offsets[i], p->data.numel());
    }
    unit.shard.name = "unit " + std::to_string(u) + " shard";
    unit.shard.data = flat.slice(unit.chunk * rank_, unit.chunk);
    unit.shard.grad = Tensor(unit.chunk, kFloat32, device_);
    unit.whole = true;
  }
  comm_ = new_group();  // a collective: every rank creates it here, in the same order
  if (options_.stage == 3) {
    for (std::size_t u = 0; u < units_.size(); ++u) free_whole(u);
  }
}

ShardedDataParallel::~ShardedDataParallel() {
  // Work's destructor waits; a collective in flight ends by its group's timeout at the latest.
  for (Unit& unit : units_) unit.gather.reset();
  reduce_scatters_.clear();
  comm_.reset();
}

std::vector<Parameter*> ShardedDataParallel::shards() {
  std::vector<Parameter*> out;
  for (Unit& unit : units_) out.push_back(&unit.shard);
  return out;
}

void ShardedDataParallel::check_usable() const {
  if (failed_) {
    throw Error(
        "ShardedDataParallel: an earlier gather or reduce_scatter failed, so the shards may no "
        "longer agree; destroy this object and the process group");
  }
}

void ShardedDataParallel::wait(Work& work) {
  try {
    work.wait();
  } catch (...) {
    failed_ = true;
    throw;
  }
}

void ShardedDataParallel::start_gather(std::size_t u) {
  Unit& unit = units_[u];
  if (unit.whole || unit.gather) return;  // whole already, or on its way
  unit.gathered = Tensor(unit.chunk * world_, kFloat32, device_);
  unit.gather = comm_->all_gather_into_tensor(unit.gathered, unit.shard.data, {.async_op = true});
}

void ShardedDataParallel::finish_gather(std::size_t u) {
  Unit& unit = units_[u];
  if (unit.whole) return;
  start_gather(u);  // not prefetched: gather it now
  wait(*unit.gather);
  unit.gather.reset();
  // The W chunks, one after the other, are the flat layout; each parameter is a slice of it.
  for (std::size_t i = 0; i < unit.params.size(); ++i) {
    Parameter* p = unit.params[i];
    const std::int64_t end = i + 1 < unit.params.size() ? unit.offsets[i + 1] : unit.numel;
    p->data = unit.gathered.slice(unit.offsets[i], end - unit.offsets[i]);
  }
  unit.gathered = Tensor();
  unit.whole = true;
}

void ShardedDataParallel::free_whole(std::size_t u) {
  Unit& unit = units_[u];
  for (Parameter* p : unit.params) {
    p->data = Tensor();
    p->grad = Tensor();
  }
  unit.whole = false;
}

void ShardedDataParallel::zero_grads(std::size_t u) {
  for (Parameter* p : units_[u].params) p->grad = Tensor(p->data.numel(), kFloat32, device_);
}

void ShardedDataParallel::before_forward(std::size_t u) {
  check_usable();
  if (options_.stage != 3) return;
  finish_gather(u);
  if (options_.prefetch && u + 1 < units_.size()) start_gather(u + 1);
}

void ShardedDataParallel::after_forward(std::size_t u) {
  if (options_.stage == 3) free_whole(u);
}

void ShardedDataParallel::before_backward(std::size_t u) {
  check_usable();
  if (options_.stage == 1) return;
  if (options_.stage == 3) {
    finish_gather(u);
    if (options_.prefetch && u > 0) start_gather(u - 1);
  }
  zero_grads(u);
}

Tensor ShardedDataParallel::flat_gradient(const Unit& unit) const {
  // Divided by W before the sum, as DDP divides (and torch's DDP and FSDP do by default).
  Tensor flat(unit.chunk * world_, kFloat32, device_);
  for (std::size_t i = 0; i < unit.params.size(); ++i) {
    flat.assign_slice(unit.offsets[i], unit.params[i]->grad / world_);
  }
  return flat;
}

void ShardedDataParallel::start_reduce_scatter(std::size_t u) {
  Unit& unit = units_[u];
  // The ones already done give their inputs back now: at stages 2 and 3 no more of the whole
  // gradient is kept than the units whose reduce_scatter is still on its way.
  while (!reduce_scatters_.empty() && reduce_scatters_.front().is_completed()) {
    wait(reduce_scatters_.front());  // done: returns at once, or throws the collective's error
    reduce_scatters_.pop_front();
    scatter_inputs_.pop_front();
  }
  scatter_inputs_.push_back(flat_gradient(unit));
  reduce_scatters_.push_back(comm_->reduce_scatter_tensor(unit.shard.grad, scatter_inputs_.back(),
                                                          ReduceOp::SUM, {.async_op = true}));
}

void ShardedDataParallel::after_backward(std::size_t u) {
  check_usable();
  if (options_.stage == 1) return;
  start_reduce_scatter(u);
  if (options_.stage == 3) {
    free_whole(u);
  } else {
    for (Parameter* p : units_[u].params) p->grad = Tensor();
  }
}

void ShardedDataParallel::finish_gradient_sync() {
  check_usable();
  if (options_.stage == 1) {
    for (std::size_t u = units_.size(); u-- > 0;) start_reduce_scatter(u);
  }
  for (Work& work : reduce_scatters_) wait(work);
  reduce_scatters_.clear();
  scatter_inputs_.clear();
  if (options_.stage == 1) {
    for (Unit& unit : units_) {
      for (Parameter* p : unit.params) p->grad.fill_(0);
    }
  }
}

void ShardedDataParallel::after_step() {
  check_usable();
  if (options_.stage == 3) return;
  for (std::size_t u = 0; u < units_.size(); ++u) {
    units_[u].whole = false;
    start_gather(u);
  }
  for (std::size_t u = 0; u < units_.size(); ++u) finish_gather(u);
}

ShardedDataParallel::Memory ShardedDataParallel::memory() const {
  Memory m;
  const auto bytes = [](const Tensor& t) { return static_cast<std::int64_t>(t.nbytes()); };
  for (const Unit& unit : units_) {
    for (const Parameter* p : unit.params) {
      m.parameters += bytes(p->data);
      m.gradients += bytes(p->grad);
    }
    m.shards += bytes(unit.shard.data);
    m.shard_gradients += bytes(unit.shard.grad);
    m.in_flight += bytes(unit.gathered);
  }
  for (const Tensor& t : scatter_inputs_) m.in_flight += bytes(t);
  return m;
}

ShardedDataParallel::Memory ShardedDataParallel::expected_memory(
    int stage, const std::vector<std::int64_t>& unit_numels, int world) {
  std::int64_t psi = 0, chunks = 0;
  for (std::int64_t n : unit_numels) {
    psi += n;
    chunks += (n + world - 1) / world;
  }
  Memory m;
  m.parameters = stage == 3 ? 0 : 4 * psi;
  m.gradients = stage == 1 ? 4 * psi : 0;
  m.shards = 4 * chunks;
  m.shard_gradients = 4 * chunks;
  return m;
}

std::int64_t ShardedDataParallel::expected_bytes_sent(int stage,
                                                      const std::vector<std::int64_t>& unit_numels,
                                                      int world) {
  std::int64_t chunks = 0;
  for (std::int64_t n : unit_numels) chunks += (n + world - 1) / world;
  const std::int64_t passes = stage == 3 ? 3 : 2;  // reduce_scatter, then 1 or 2 gathers
  return passes * 4 * chunks * (world - 1);
}

}  // namespace dist
