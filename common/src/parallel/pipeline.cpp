// dist/pipeline.h: stages, the GPipe and 1F1B schedules, their trace (chapter 16).
#include "dist/pipeline.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "dist/check.h"
#include "dist/files.h"
#include "dist/seed.h"
#include "dist/trace.h"

namespace dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string str(std::int64_t v) {
  return std::to_string(v);
}

int count_linear(const SequentialSpec& model) {
  int n = 0;
  for (const LayerSpec& layer : model.layers) n += layer.kind == LayerSpec::Kind::kLinear ? 1 : 0;
  return n;
}

// The width of the rows each layer takes in: a Linear's in_features, a ReLU's the width before.
std::vector<std::int64_t> input_widths(const SequentialSpec& model) {
  std::vector<std::int64_t> widths;
  std::int64_t width = 0;
  for (const LayerSpec& layer : model.layers) {
    widths.push_back(layer.kind == LayerSpec::Kind::kLinear ? layer.in_features : width);
    if (layer.kind == LayerSpec::Kind::kLinear) width = layer.out_features;
  }
  widths.push_back(width);  // the model's output
  return widths;
}

// 2^-k with k = floor(log2(in)) / 2 (integer division): 1/sqrt(in) when in is a power of 4,
// within a factor sqrt(2) of it otherwise, and exact in float32.
float weight_scale(std::int64_t in) {
  const int k = (std::bit_width(static_cast<std::uint64_t>(in)) - 1) / 2;
  return std::ldexp(1.0f, -k);
}

std::vector<float> scaled_randn(std::int64_t n, float scale, Generator& g) {
  std::vector<float> values = randn(n, g).to_vector<float>();
  for (float& v : values) v *= scale;
  return values;
}

}  // namespace

SequentialSpec mlp_spec(const std::vector<std::int64_t>& widths, std::uint64_t seed) {
  if (widths.size() < 2) {
    throw ConfigError("mlp_spec needs at least two widths (in and out features), got " +
                      str(static_cast<std::int64_t>(widths.size())));
  }
  SequentialSpec spec{{}, seed};
  for (std::size_t i = 0; i + 1 < widths.size(); ++i) {
    if (i > 0) spec.layers.push_back(LayerSpec::relu());
    spec.layers.push_back(LayerSpec::linear(widths[i], widths[i + 1]));
  }
  return spec;
}

std::vector<LinearInit> initial_weights(const SequentialSpec& model) {
  if (model.layers.empty() || model.layers.front().kind != LayerSpec::Kind::kLinear) {
    throw ConfigError("a pipelined model must start with a Linear layer (got " +
                      std::string(model.layers.empty() ? "no layers" : "a ReLU first") + ")");
  }
  std::vector<LinearInit> inits;
  Generator g(model.seed);
  std::int64_t width = model.layers.front().in_features;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    const LayerSpec& layer = model.layers[i];
    if (layer.kind != LayerSpec::Kind::kLinear) continue;
    if (layer.in_features < 1 || layer.out_features < 1 || layer.in_features != width) {
      throw ConfigError("layer " + str(static_cast<std::int64_t>(i)) + ": Linear(" +
                        str(layer.in_features) + ", " + str(layer.out_features) +
                        ") does not follow a width of " + str(width) +
                        ": in_features must equal the previous Linear's out_features (>= 1)");
    }
    const float scale = weight_scale(layer.in_features);
    LinearInit init;
    init.weight = scaled_randn(layer.out_features * layer.in_features, scale, g);
    init.bias = scaled_randn(layer.out_features, scale, g);
    inits.push_back(std::move(init));
    width = layer.out_features;
  }
  return inits;
}

Sequential::Sequential(const SequentialSpec& model, Device device) {
  const std::vector<LinearInit> inits = initial_weights(model);
  std::size_t l = 0;
  for (const LayerSpec& layer : model.layers) {
    if (layer.kind == LayerSpec::Kind::kLinear) {
      layers_.emplace_back(std::in_place_type<Linear>, layer.in_features, layer.out_features,
                           inits[l++], device);
    } else {
      layers_.emplace_back(std::in_place_type<ReLU>);
    }
  }
}

Tensor Sequential::forward(Tensor x) {
  for (auto& layer : layers_) x = std::visit([&](auto& l) { return l.forward(x); }, layer);
  return x;
}

Tensor Sequential::backward(Tensor grad) {
  for (auto it = layers_.rbegin(); it != layers_.rend(); ++it)
    grad = std::visit([&](auto& l) { return l.backward(grad); }, *it);
  return grad;
}

std::vector<Parameter*> Sequential::parameters() {
  return parameters({0, static_cast<int>(layers_.size())});
}

std::vector<Parameter*> Sequential::parameters(LayerRange range) {
  if (range.begin < 0 || range.end > static_cast<int>(layers_.size()) || range.begin > range.end) {
    throw ConfigError("Sequential::parameters: layers [" + std::to_string(range.begin) + ", " +
                      std::to_string(range.end) + ") are not within the model's " +
                      std::to_string(layers_.size()) + " layers");
  }
  std::vector<Parameter*> out;
  for (int i = range.begin; i < range.end; ++i) {
    if (auto* l = std::get_if<Linear>(&layers_[static_cast<std::size_t>(i)]))
      for (Parameter* p : l->parameters()) out.push_back(p);
  }
  return out;
}

std::vector<LayerRange> split_stages(const SequentialSpec& model, int num_stages) {
  initial_weights(SequentialSpec{model.layers, 0});  // only its checks: throws for a bad spec
  const int units = count_linear(model);
  if (num_stages < 1 || num_stages > units) {
    throw ConfigError("pipeline: " + str(num_stages) + " stages for a model of " + str(units) +
                      " Linear layers: each stage needs at least one Linear layer, so use 1 to " +
                      str(units) + " stages (the PP group's size)");
  }
  // Where each unit (a Linear and the layers after it up to the next) starts.
  std::vector<int> unit_start;
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].kind == LayerSpec::Kind::kLinear) unit_start.push_back(static_cast<int>(i));
  }
  unit_start.push_back(static_cast<int>(model.layers.size()));
  std::vector<LayerRange> ranges;
  int unit = 0;
  for (int s = 0; s < num_stages; ++s) {
    const int n = units / num_stages + (s < units % num_stages ? 1 : 0);
    ranges.push_back({unit_start[static_cast<std::size_t>(unit)],
                      unit_start[static_cast<std::size_t>(unit + n)]});
    unit += n;
  }
  return ranges;
}

std::string PipelineAction::str() const {
  return (type == Type::kForward ? "F" : "B") + std::to_string(microbatch);
}

namespace {

void check_shape(int num_stages, int stage, int n_microbatches) {
  if (num_stages < 1 || stage < 0 || stage >= num_stages || n_microbatches < 1) {
    throw ConfigError("pipeline: stage " + str(stage) + " of " + str(num_stages) + " with " +
                      str(n_microbatches) +
                      " micro-batches: needs at least 1 stage, 0 <= stage < stages, and at least "
                      "1 micro-batch");
  }
}

}  // namespace

std::vector<PipelineAction> pipeline_order(ScheduleKind kind, int num_stages, int stage,
                                           int n_microbatches) {
  check_shape(num_stages, stage, n_microbatches);
  using T = PipelineAction::Type;
  const int m = n_microbatches;
  std::vector<PipelineAction> order;
  if (kind == ScheduleKind::kGPipe) {
    for (int i = 0; i < m; ++i) order.push_back({T::kForward, i});
    for (int i = 0; i < m; ++i) order.push_back({T::kBackward, i});
    return order;
  }
  const int warmup = std::min(num_stages - stage - 1, m);
  int f = 0, b = 0;
  while (f < warmup) order.push_back({T::kForward, f++});
  while (f < m) {
    order.push_back({T::kForward, f++});
    order.push_back({T::kBackward, b++});
  }
  while (b < m) order.push_back({T::kBackward, b++});
  return order;
}

double bubble_fraction_closed_form(int num_stages, int n_microbatches) {
  check_shape(num_stages, 0, n_microbatches);
  return static_cast<double>(num_stages - 1) / (n_microbatches + num_stages - 1);
}

int peak_stash_closed_form(ScheduleKind kind, int num_stages, int stage, int n_microbatches) {
  check_shape(num_stages, stage, n_microbatches);
  if (kind == ScheduleKind::kGPipe) return n_microbatches;
  return std::min(num_stages - stage, n_microbatches);
}

namespace detail {

std::vector<PipelineOp> stage_program(ScheduleKind kind, int num_stages, int stage,
                                      int n_microbatches) {
  using Op = PipelineOp::Type;
  const bool first = stage == 0, last = stage == num_stages - 1;
  std::vector<PipelineOp> program;
  std::vector<PipelineOp> pending;  // the send after the last action, not issued yet
  for (const PipelineAction& a : pipeline_order(kind, num_stages, stage, n_microbatches)) {
    const bool forward = a.type == PipelineAction::Type::kForward;
    std::vector<PipelineOp> recv;
    if (forward && !first) recv.push_back({Op::kRecvForward, a.microbatch});
    if (!forward && !last) recv.push_back({Op::kRecvBackward, a.microbatch});
    // A gradient to send down and an activation to receive from below travel on the same link:
    // the activation first (the stage below sends it before it receives the gradient).
    const bool activation_first = !pending.empty() && !recv.empty() &&
                                  pending[0].type == Op::kSendBackward &&
                                  recv[0].type == Op::kRecvForward;
    if (activation_first) program.insert(program.end(), recv.begin(), recv.end());
    program.insert(program.end(), pending.begin(), pending.end());
    if (!activation_first) program.insert(program.end(), recv.begin(), recv.end());
    pending.clear();
    program.push_back({forward ? Op::kForward : Op::kBackward, a.microbatch});
    if (forward && !last) pending.push_back({Op::kSendForward, a.microbatch});
    if (!forward && !first) pending.push_back({Op::kSendBackward, a.microbatch});
  }
  program.insert(program.end(), pending.begin(), pending.end());
  return program;
}

}  // namespace detail

// ---- PipelineStage

struct PipelineStage::Impl {
  using Layer = std::variant<Linear, ReLU>;
  using Saved = std::variant<Linear::Saved, Tensor>;
  struct Entry {
    std::vector<Saved> saved;  // one per layer, in forward order
    Tensor loss_grad;          // the last stage's d loss / d output, until its backward
  };
  std::vector<Layer> layers;
  std::vector<std::int64_t> widths;  // each layer's input width
  std::map<int, Entry> stash;

  static std::int64_t bytes(const Entry& e) {
    std::int64_t n = static_cast<std::int64_t>(e.loss_grad.nbytes());
    for (const Saved& s : e.saved) {
      if (const auto* l = std::get_if<Linear::Saved>(&s)) {
        n += static_cast<std::int64_t>(l->input.nbytes() + l->half_weight.nbytes());
      } else {
        n += static_cast<std::int64_t>(std::get<Tensor>(s).nbytes());
      }
    }
    return n;
  }
};

PipelineStage::PipelineStage(const SequentialSpec& model, ProcessGroup& group, Device device)
    : group_(&group), device_(device), impl_(std::make_unique<Impl>()) {
  group.require_member("PipelineStage");
  const std::vector<LayerRange> ranges = split_stages(model, group.size());
  range_ = ranges[static_cast<std::size_t>(group.rank())];
  const std::vector<LinearInit> inits = initial_weights(model);
  const std::vector<std::int64_t> widths = input_widths(model);
  std::size_t linear = 0;
  for (int i = 0; i < range_.end; ++i) {
    const LayerSpec& layer = model.layers[static_cast<std::size_t>(i)];
    const bool is_linear = layer.kind == LayerSpec::Kind::kLinear;
    if (i >= range_.begin) {
      if (is_linear) {
        impl_->layers.emplace_back(std::in_place_type<Linear>, layer.in_features,
                                   layer.out_features, inits[linear], device);
      } else {
        impl_->layers.emplace_back(std::in_place_type<ReLU>);
      }
      impl_->widths.push_back(widths[static_cast<std::size_t>(i)]);
    }
    if (is_linear) ++linear;
  }
  in_ = widths[static_cast<std::size_t>(range_.begin)];
  out_ = widths[static_cast<std::size_t>(range_.end)];
}

PipelineStage::~PipelineStage() = default;

std::vector<Parameter*> PipelineStage::parameters() {
  std::vector<Parameter*> params;
  for (Impl::Layer& layer : impl_->layers) {
    if (auto* l = std::get_if<Linear>(&layer)) {
      for (Parameter* p : l->parameters()) params.push_back(p);
    }
  }
  return params;
}

Tensor PipelineStage::forward_one_chunk(int microbatch, const Tensor& input) {
  if (impl_->stash.count(microbatch) != 0) {
    throw ConfigError("PipelineStage " + str(stage_index()) + ": micro-batch " + str(microbatch) +
                      " is stashed already: run its backward before forwarding it again");
  }
  Impl::Entry entry;
  Tensor h = input;
  for (Impl::Layer& layer : impl_->layers) {
    std::visit(
        [&](auto& l) {
          h = l.forward(h);
          entry.saved.emplace_back(l.take_saved());
        },
        layer);
  }
  impl_->stash.emplace(microbatch, std::move(entry));
  return h;
}

Tensor PipelineStage::backward_one_chunk(int microbatch, const Tensor& grad_output) {
  auto it = impl_->stash.find(microbatch);
  if (it == impl_->stash.end()) {
    throw ConfigError("PipelineStage " + str(stage_index()) + ": no forward of micro-batch " +
                      str(microbatch) + " to run the backward of");
  }
  Tensor g = grad_output;
  for (std::size_t k = impl_->layers.size(); k-- > 0;) {
    Impl::Saved& saved = it->second.saved[k];
    std::visit(
        [&](auto& l) {
          using SavedType = decltype(l.take_saved());
          l.restore_saved(std::move(std::get<SavedType>(saved)));
          g = l.backward(g);
          l.take_saved();  // dropped: the stash of this layer is freed here
        },
        impl_->layers[k]);
  }
  impl_->stash.erase(it);
  return g;
}

int PipelineStage::stashed() const {
  return static_cast<int>(impl_->stash.size());
}

std::int64_t PipelineStage::stashed_bytes() const {
  std::int64_t n = 0;
  for (const auto& [mb, entry] : impl_->stash) n += Impl::bytes(entry);
  return n;
}

std::int64_t PipelineStage::stash_bytes_closed_form(std::int64_t rows) const {
  std::int64_t width = is_last() ? out_ : 0;
  for (std::int64_t w : impl_->widths) width += w;
  return rows * width * static_cast<std::int64_t>(sizeof(float));
}

// ---- the schedules

PipelineSchedule::PipelineSchedule(ScheduleKind kind, PipelineStage& stage, int n_microbatches,
                                   const ScheduleOptions& options)
    : kind_(kind), stage_(stage), m_(n_microbatches), options_(options) {
  check_shape(stage.num_stages(), stage.stage_index(), n_microbatches);
  if (options.batch_size < 1 || options.batch_size % n_microbatches != 0) {
    throw ConfigError("pipeline: n_microbatches = " + str(n_microbatches) +
                      " does not divide batch_size = " + str(options.batch_size) +
                      ": every micro-batch must have the same number of rows (>= 1)");
  }
}

PipelineSchedule::~PipelineSchedule() = default;

namespace {

// The stage's messages to and from its neighbours: torch's isend and irecv (dist/
// process_group.h). A send is posted and kept, with its tensor, until wait_sends(), which the
// step calls before each compute action and at its end: so, on Gloo, a send and the receive after
// it are in flight together, as in torch's batch_isend_irecv of the two, and at most one send
// waits (on NCCL each message finishes inside its call; the order of stage_program is what keeps
// that from deadlocking).
// A receive is waited for at once. Each wait ends by the group's timeout; a message of the wrong
// size fails with the p2p layer's error, which passes through untouched.
class Messages {
 public:
  explicit Messages(ProcessGroup& group) : group_(group) {}
  Messages(const Messages&) = delete;
  Messages& operator=(const Messages&) = delete;
  ~Messages() = default;  // a Work still pending waits for its call when destroyed

  void send(Tensor tensor, int dst, int tag) {
    Pending& p = pending_.emplace_back();  // a deque: p's tensor stays put while its isend runs
    p.tensor = std::move(tensor);
    p.work = group_.isend(p.tensor, dst, tag);
  }
  Tensor recv(std::int64_t numel, Device device, int src, int tag) {
    Tensor t(numel, kFloat32, device);
    group_.irecv(t, src, tag).wait();
    return t;
  }
  void wait_sends() {
    for (Pending& p : pending_) p.work.wait();
    pending_.clear();
  }

 private:
  struct Pending {
    Tensor tensor;
    Work work;
  };
  ProcessGroup& group_;
  std::deque<Pending> pending_;
};

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

std::vector<double> PipelineSchedule::step(const Tensor& input, const Tensor& target) {
  PipelineStage& st = stage_;
  ProcessGroup& group = st.group();
  const int s = st.stage_index();
  const std::int64_t batch = options_.batch_size, rows = batch / m_;
  const bool ce = options_.loss == PipelineLoss::kCrossEntropy;
  // The arguments first, before this stage waits on any other.
  std::vector<Tensor> inputs, targets;
  if (st.is_first()) {
    if (input.dtype() != kFloat32 || input.numel() != batch * st.in_features()) {
      throw ConfigError("pipeline step: stage 0's input must be " + str(batch) + " rows of " +
                        str(st.in_features()) + " float32 values (" +
                        str(batch * st.in_features()) + "), got " + str(input.numel()) + " " +
                        std::string(dtype_name(input.dtype())) + " values");
    }
    for (int i = 0; i < m_; ++i)
      inputs.push_back(input.slice(i * rows * st.in_features(), rows * st.in_features()));
  }
  if (st.is_last()) {
    const std::int64_t per_row = ce ? 1 : st.out_features();
    const DType dtype = ce ? kInt64 : kFloat32;
    if (target.dtype() != dtype || target.numel() != batch * per_row) {
      throw ConfigError("pipeline step: the last stage's target must be " + str(batch) +
                        " rows of " + str(per_row) + " " + std::string(dtype_name(dtype)) +
                        " values, got " + str(target.numel()) + " " +
                        std::string(dtype_name(target.dtype())) + " values");
    }
    for (int i = 0; i < m_; ++i)
      targets.push_back(target.slice(i * rows * per_row, rows * per_row));
  }

  group.barrier();  // the stages start their clocks together
  const Device device = st.device();
  const Clock::time_point t0 = Clock::now();
  const std::int64_t base = memory_allocated(device);
  reset_peak_memory_stats(device);
  stats_ = StageStats{};
  std::vector<double> losses(st.is_last() ? static_cast<std::size_t>(m_) : 0);
  std::map<int, Tensor> received, to_send;  // by micro-batch: what came in, what goes out
  Messages messages(group);

  using Op = detail::PipelineOp::Type;
  for (const detail::PipelineOp& op : detail::stage_program(kind_, st.num_stages(), s, m_)) {
    const int i = op.microbatch;
    switch (op.type) {
      case Op::kRecvForward:
        received[i] = messages.recv(rows * st.in_features(), device, s - 1, 2 * i);
        break;
      case Op::kRecvBackward:
        received[i] = messages.recv(rows * st.out_features(), device, s + 1, 2 * i + 1);
        break;
      case Op::kSendForward:
        messages.send(std::move(to_send.at(i)), s + 1, 2 * i);
        to_send.erase(i);
        break;
      case Op::kSendBackward:
        messages.send(std::move(to_send.at(i)), s - 1, 2 * i + 1);
        to_send.erase(i);
        break;
      case Op::kForward: {
        messages.wait_sends();
        const Clock::time_point start = Clock::now();
        // Stage 0's micro-batches stay where they are (part of the batch, made before the
        // step's memory baseline); a received one is freed once forwarded.
        Tensor out = st.forward_one_chunk(
            i, st.is_first() ? inputs[static_cast<std::size_t>(i)] : received.at(i));
        received.erase(i);
        if (st.is_last()) {
          Tensor& grad = st.impl_->stash.at(i).loss_grad;
          const Tensor& y = targets[static_cast<std::size_t>(i)];
          if (ce) {
            CrossEntropy loss = cross_entropy(out, y, st.out_features());
            losses[static_cast<std::size_t>(i)] = loss.loss;
            grad = std::move(loss.grad);
          } else {
            MseLoss loss = mse_loss(out, y);
            losses[static_cast<std::size_t>(i)] = loss.loss;
            grad = std::move(loss.grad);
          }
        } else {
          to_send[i] = std::move(out);
        }
        stats_.peak_stash = std::max(stats_.peak_stash, st.stashed());
        stats_.peak_stash_bytes = std::max(stats_.peak_stash_bytes, st.stashed_bytes());
        stats_.spans.push_back(
            {"F" + std::to_string(i), seconds(t0, start), seconds(t0, Clock::now())});
        break;
      }
      case Op::kBackward: {
        messages.wait_sends();
        const Clock::time_point start = Clock::now();
        Tensor g;
        if (st.is_last()) {
          g = std::move(st.impl_->stash.at(i).loss_grad);
          st.impl_->stash.at(i).loss_grad = Tensor();
        } else {
          g = std::move(received.at(i));
          received.erase(i);
        }
        Tensor gx = st.backward_one_chunk(i, g);
        g = Tensor();
        if (!st.is_first()) to_send[i] = std::move(gx);
        stats_.spans.push_back(
            {"B" + std::to_string(i), seconds(t0, start), seconds(t0, Clock::now())});
        break;
      }
    }
  }
  messages.wait_sends();
  if (options_.scale_grads && m_ > 1) {
    for (Parameter* p : st.parameters()) p->grad /= static_cast<double>(m_);
  }
  for (const PipelineSpan& span : stats_.spans) stats_.busy_s += span.end_s - span.start_s;
  stats_.peak_memory_bytes = max_memory_allocated(device) - base;
  return losses;
}

PipelineReport PipelineSchedule::report() {
  const int p = stage_.num_stages();
  const auto spans = static_cast<std::int64_t>(2 * m_);
  if (static_cast<std::int64_t>(stats_.spans.size()) != spans) {
    throw ConfigError("PipelineSchedule::report: no step has run yet on stage " +
                      str(stage_.stage_index()));
  }
  Tensor mine(2 * spans + 3, kFloat64);
  for (std::int64_t k = 0; k < spans; ++k) {
    mine.set(2 * k, stats_.spans[static_cast<std::size_t>(k)].start_s);
    mine.set(2 * k + 1, stats_.spans[static_cast<std::size_t>(k)].end_s);
  }
  mine.set(2 * spans, stats_.peak_stash);
  mine.set(2 * spans + 1, static_cast<double>(stats_.peak_stash_bytes));
  mine.set(2 * spans + 2, static_cast<double>(stats_.peak_memory_bytes));
  std::vector<Tensor> all;
  stage_.group().all_gather(all, mine);

  PipelineReport report;
  report.kind = kind_;
  report.n_microbatches = m_;
  bool any = false;
  for (int s = 0; s < p; ++s) {
    const Tensor& t = all[static_cast<std::size_t>(s)];
    const std::vector<PipelineAction> order = pipeline_order(kind_, p, s, m_);
    StageStats stats;
    for (std::int64_t k = 0; k < spans; ++k) {
      PipelineSpan span{order[static_cast<std::size_t>(k)].str(), t.item(2 * k), t.item(2 * k + 1)};
      stats.busy_s += span.end_s - span.start_s;
      report.window_start_s = any ? std::min(report.window_start_s, span.start_s) : span.start_s;
      report.window_end_s = any ? std::max(report.window_end_s, span.end_s) : span.end_s;
      any = true;
      stats.spans.push_back(std::move(span));
    }
    stats.peak_stash = static_cast<int>(t.item(2 * spans));
    stats.peak_stash_bytes = static_cast<std::int64_t>(t.item(2 * spans + 1));
    stats.peak_memory_bytes = static_cast<std::int64_t>(t.item(2 * spans + 2));
    report.stages.push_back(std::move(stats));
  }
  return report;
}

double PipelineReport::bubble_fraction() const {
  if (stages.empty() || window_s() <= 0) return 0;
  double busy = 0;
  for (const StageStats& s : stages) busy += s.busy_s;
  return 1.0 - busy / (static_cast<double>(stages.size()) * window_s());
}

double PipelineReport::bubble_closed_form() const {
  return bubble_fraction_closed_form(static_cast<int>(stages.size()), n_microbatches);
}

std::string PipelineReport::trace_json() const {
  Timeline timeline(0);
  const Clock::time_point origin = Clock::now();  // the timeline's origin, to a microsecond
  const auto at = [&](double s) {
    return origin + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(s - window_start_s));
  };
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (const PipelineSpan& span : stages[s].spans) {
      timeline.add(span.name, at(span.start_s), at(span.end_s), "stage " + std::to_string(s));
    }
  }
  return timeline.json();
}

void PipelineReport::write_trace(const std::string& path) const {
  write_file_atomically(path, trace_json());
}

}  // namespace dist
