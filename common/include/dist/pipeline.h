// dist/pipeline.h — pipeline parallelism: a model cut into stages, one per rank, and the two
// classic schedules that push micro-batches through it, GPipe and 1F1B.
//
//   dist::SequentialSpec model = dist::mlp_spec({64, 64, 64, 64, 8}, /*seed=*/0);
//   dist::PipelineStage stage(model, pp_group);            // this rank's layers
//   dist::Schedule1F1B schedule(stage, /*n_microbatches=*/8, {.batch_size = 32});
//   dist::SGD optimizer(stage.parameters(), 0.05);
//   optimizer.zero_grad();
//   schedule.step(x, y);        // x on the first stage, y on the last; others pass {}
//   optimizer.step();
//   dist::PipelineReport r = schedule.report();   // every stage's times: the bubble
//
// Data parallelism copies the whole model onto every rank; a model too large for one device must
// be cut instead. Pipeline parallelism cuts it by depth: stage s holds a run of consecutive layers
// and sends its output (the activations) to stage s + 1, which sends the gradient of the loss with
// respect to them back in backward. One batch would keep only one stage busy at a time, so the
// batch is split into m micro-batches (by rows) that follow each other through the stages:
//   - GPipe (Huang et al., 2019): every micro-batch's forward, then every backward. Each stage
//     keeps what the backward of each of the m micro-batches needs (its stash) until the end.
//   - 1F1B (PipeDream-Flush, Narayanan et al., 2021; Megatron-LM's schedule): stage s runs
//     min(p - s - 1, m) forwards (the warm-up), then alternates one forward, one backward, then
//     runs the backwards left (the cool-down). A micro-batch's stash is freed as soon as its
//     backward has run, so stage s never holds more than min(p - s, m): p on stage 0, not m.
// Both run the same forwards and backwards in the same micro-batch order on every stage, so both
// give the same gradients, bit for bit; they differ in memory, not in time: with a forward taking
// t_f and a backward t_b on every stage, both take (m + p - 1)(t_f + t_b), and each stage is idle
// for (p - 1)(t_f + t_b) of it: the bubble, a fraction (p - 1)/(m + p - 1) of the step, whatever
// t_b / t_f is (a backward costs about twice a forward). The closed form assumes equal stages
// and free communication; report() measures it: each stage's busy time is the sum of its "F3" /
// "B3" spans, its idle time the rest of the step's window (the first span's start to the last
// span's end, over all stages), so time spent waiting for a message counts as bubble.
//
// The model: a sequence of Linear and ReLU layers (SequentialSpec), whose weights every process
// draws from the same seed (initial_weights), so one process can build the unsplit model and
// train it as the reference. The cut: the units are the Linear layers, each with the layers
// after it up to the next Linear; stage s gets a run of consecutive units, ⌈L/p⌉ units on the
// first L mod p stages and ⌊L/p⌋ on the others (as torch.tensor_split splits L items): balanced
// when the Linear layers are alike. More stages than Linear layers is a dist::ConfigError.
//
// The arithmetic: each micro-batch's loss is the mean over its rows (dist::mse_loss or
// dist::cross_entropy on the last stage); the gradients of the m micro-batch losses add up in the
// parameters' grads, micro-batch 0 first, and with scale_grads are divided by m at the end. That
// is, bit for bit, what one process computes running the same micro-batches one after the other
// (forward, loss, backward, accumulate) and dividing by m (tests/multiprocess/pipeline_test.cpp,
// at p = 1, 2, 4 and m = 1, 4, 8). It equals the gradient of the mean loss over the whole batch
// up to float32 rounding only: each micro-batch's dW is a sum over its own rows, rounded to
// float32, then added to the grad, where the whole batch rounds one sum over all rows.
//
// Messages: stage s receives micro-batch i's input from stage s - 1 (tag 2i) and sends its output
// to s + 1; in backward it receives the gradient from s + 1 (tag 2i + 1) and sends its input's
// gradient to s - 1. Ranks are the group's ranks: stage s is rank s of the PP group (any group:
// the default one, or new_group(ranks)'s). Sends are isends, waited for before the stage's next
// forward or backward, so that on Gloo a send and the receive after it are in flight together, as
// torch's batch_isend_irecv of the two (on NCCL each message finishes inside its call, and the
// order below is what keeps the stages from waiting on each other); receives are irecvs waited
// for at once (each wait ends by
// the group's timeout). Where a stage would send and receive on the same link at once (1F1B's
// steady state), the activation goes first: the lower stage sends, then receives, the upper one
// receives, then sends. So even as blocking sends and receives the program cannot deadlock
// (detail::stage_program; the unit test runs every program for p <= 8, m <= 12 against a model
// of blocking sends). A message of the wrong size (stages built from different specs) fails with
// the p2p layer's dist::Error on the receiver, naming both ranks and sizes, and the sender fails
// at once after it (dist/process_group.h); the schedule lets both pass.
//
// PyTorch: torch 2.x has this as torch.distributed.pipelining (from 2.4): pipeline(module, mb_args,
// split_spec={"layers.4": SplitPoint.BEGINNING}) traces and cuts a model where it is told (or where
// pipe_split() marks it), PipelineStage(submodule, stage_index, num_stages, device, group=pp_group)
// is one rank's part (earlier releases also wanted an example input_args), and ScheduleGPipe(stage,
// n_microbatches, loss_fn) or Schedule1F1B(...) runs schedule.step(x) on the first stage,
// schedule.step(target=y, losses=losses) on the last, schedule.step() between. Its schedules
// compute each micro-batch's loss with loss_fn and, with scale_grads=True (the default since the
// option came in January 2025, pytorch/pytorch#144352; the schedules before it kept the sum),
// divide the summed gradients by n_microbatches at the end of step(), as here. In today's source
// both schedules refuse n_microbatches < num_stages (a ValueError); here they run, 1F1B's warm-up
// cut to m. Its p2p goes through batch_isend_irecv. torch 1.13 has none of this: its
// torch.distributed.pipeline.sync.Pipe (from torchgpipe) runs GPipe inside one process over several
// GPUs (it needs the RPC framework initialised, and checkpoints activations by default), not across
// ranks.
//
// What differs from torch: the model is a spec, not a traced module; the stage is told the batch
// size (torch infers shapes from the first micro-batch), so that an m that does not divide the
// batch is refused on every rank before any waits; step() starts with a barrier over the PP group,
// so that the stages' clocks start together for the trace.
//
// Taught in: chapter 16 (pipeline parallel).
// Built in: common/src/parallel/pipeline.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "dist/device.h"
#include "dist/nn.h"
#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

// One layer of a SequentialSpec: Linear(in_features, out_features) or ReLU.
struct LayerSpec {
  enum class Kind { kLinear, kReLU };
  Kind kind = Kind::kLinear;
  std::int64_t in_features = 0, out_features = 0;  // Linear only
  static LayerSpec linear(std::int64_t in, std::int64_t out) { return {Kind::kLinear, in, out}; }
  static LayerSpec relu() { return {Kind::kReLU, 0, 0}; }
};

// nn.Sequential's layers, and the seed their weights are drawn from (initial_weights).
struct SequentialSpec {
  std::vector<LayerSpec> layers;
  std::uint64_t seed = 0;
};

// Linear(w0, w1), ReLU, Linear(w1, w2), ReLU, ..., Linear(w[n-2], w[n-1]): no ReLU after the last.
SequentialSpec mlp_spec(const std::vector<std::int64_t>& widths, std::uint64_t seed);

// The initial weights of the spec's Linear layers, in order, drawn from one Generator(seed): for
// each Linear, randn(out * in) then randn(out) (torch.randn's CPU values, dist/seed.h), both
// times 2^-k with k = floor(log2(in_features)) / 2 in integers (about 1/sqrt(in), and exact: a
// torch twin gets the same bits from torch.randn(out, in, generator=g) * 2.0**-k). Every stage
// draws them all and keeps its own, so the stages together hold exactly the unsplit model. Throws
// dist::ConfigError for an empty spec, a first layer that is not a Linear, or widths that do not
// chain (a Linear's in_features differs from the previous Linear's out_features).
std::vector<LinearInit> initial_weights(const SequentialSpec& model);

// Layers [begin, end) of the spec.
struct LayerRange {
  int begin = 0, end = 0;
};

// torch.nn.Sequential built whole from a spec in one process, from initial_weights(): the unsplit
// model a pipeline's stages are checked against (the stages together hold exactly its values).
// forward() runs every layer; backward() runs them in reverse, adding into each Linear's grads,
// and returns d loss / d input.
class Sequential {
 public:
  explicit Sequential(const SequentialSpec& model, Device device = Device::cpu());
  Tensor forward(Tensor x);
  Tensor backward(Tensor grad);
  // Every Linear's weight and bias, in layer order; or those of layers [range.begin, range.end)
  // only, the part one stage holds.
  std::vector<Parameter*> parameters();
  std::vector<Parameter*> parameters(LayerRange range);

 private:
  std::vector<std::variant<Linear, ReLU>> layers_;
};
// The balanced cut above: num_stages ranges. Throws dist::ConfigError naming both counts when
// num_stages exceeds the number of Linear layers, or is below 1.
std::vector<LayerRange> split_stages(const SequentialSpec& model, int num_stages);

// A schedule's compute actions on one stage, in order: "F3" is micro-batch 3's forward, "B3"
// its backward.
struct PipelineAction {
  enum class Type { kForward, kBackward };
  Type type = Type::kForward;
  int microbatch = 0;
  std::string str() const;  // "F3", "B3"
};
enum class ScheduleKind { kGPipe, k1F1B };
// GPipe: F0 .. F(m-1), then B0 .. B(m-1). 1F1B: w = min(p - s - 1, m) forwards, then F, B
// alternating, then the backwards left. Throws dist::ConfigError for p < 1, s outside [0, p),
// m < 1.
std::vector<PipelineAction> pipeline_order(ScheduleKind kind, int num_stages, int stage,
                                           int n_microbatches);

// The closed forms: the bubble (p - 1)/(m + p - 1), and the micro-batches a stage holds at its
// peak (m for GPipe, min(p - s, m) for 1F1B).
double bubble_fraction_closed_form(int num_stages, int n_microbatches);
int peak_stash_closed_form(ScheduleKind kind, int num_stages, int stage, int n_microbatches);

// torch.distributed.pipelining.PipelineStage: stage group.rank() of group.size(), holding its
// layers of `model` (split_stages) on `device`. Every rank of the group builds its stage from the
// same spec. The group must outlive the stage.
class PipelineStage {
 public:
  PipelineStage(const SequentialSpec& model, ProcessGroup& group, Device device = Device::cpu());
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;
  ~PipelineStage();

  int stage_index() const { return group_->rank(); }
  int num_stages() const { return group_->size(); }
  bool is_first() const { return stage_index() == 0; }
  bool is_last() const { return stage_index() == num_stages() - 1; }
  LayerRange layers() const { return range_; }
  std::int64_t in_features() const { return in_; }    // of a row this stage takes in
  std::int64_t out_features() const { return out_; }  // of a row it sends on (or the loss sees)
  ProcessGroup& group() { return *group_; }
  Device device() const { return device_; }
  // Its Linear layers' weights and biases, in order: what its optimizer steps.
  std::vector<Parameter*> parameters();

  // One micro-batch through this stage's layers. forward stashes what their backward needs
  // under `microbatch`; backward (of a micro-batch forwarded before) uses it and frees it.
  Tensor forward_one_chunk(int microbatch, const Tensor& input);
  Tensor backward_one_chunk(int microbatch, const Tensor& grad_output);

  // The stash: micro-batches held now, their bytes (the layers' inputs, and on the last stage
  // the loss's gradient), and its closed form for one micro-batch of `rows` rows: rows * 4 *
  // (the sum of its layers' input widths, + out_features on the last stage).
  int stashed() const;
  std::int64_t stashed_bytes() const;
  std::int64_t stash_bytes_closed_form(std::int64_t rows) const;

  struct Impl;

 private:
  friend class PipelineSchedule;
  ProcessGroup* group_;
  Device device_;
  LayerRange range_;
  std::int64_t in_ = 0, out_ = 0;
  std::unique_ptr<Impl> impl_;
};

// What the last stage computes on its output, as the loss_fn of torch's schedules: nn.MSELoss()
// against float32 targets, or nn.CrossEntropyLoss() against int64 labels (classes = its
// out_features). Both are means over the micro-batch's rows.
enum class PipelineLoss { kMse, kCrossEntropy };

struct ScheduleOptions {
  std::int64_t batch_size = 0;  // rows of the whole batch: n_microbatches must divide it
  PipelineLoss loss = PipelineLoss::kMse;
  bool scale_grads = true;  // divide the summed gradients by n_microbatches (torch's default)
};

// One span of a stage's step: "F3" or "B3", in seconds since the step began (its barrier).
struct PipelineSpan {
  std::string name;
  double start_s = 0, end_s = 0;
};

// One stage's last step.
struct StageStats {
  std::vector<PipelineSpan> spans;  // in the order run: pipeline_order()
  double busy_s = 0;                // the spans' total
  int peak_stash = 0;               // micro-batches stashed at once, at most
  std::int64_t peak_stash_bytes = 0;
  // max_memory_allocated(device) during the step, above memory_allocated() at its start: the
  // stash at its peak, plus what the step holds besides (the micro-batch being computed, its
  // output and gradient, a message being received).
  std::int64_t peak_memory_bytes = 0;
};

// Every stage's StageStats of the last step, and the bubble measured from them.
struct PipelineReport {
  ScheduleKind kind = ScheduleKind::kGPipe;
  int n_microbatches = 0;
  std::vector<StageStats> stages;
  double window_start_s = 0, window_end_s = 0;  // first span's start, last span's end
  double window_s() const { return window_end_s - window_start_s; }
  double idle_s(int stage) const { return window_s() - stages.at(stage).busy_s; }
  double bubble_fraction() const;  // sum of idle over p * window
  double bubble_closed_form() const;
  // The Chrome trace (dist::Timeline's format): one lane per stage ("stage 0", ...), its F and
  // B spans, the bubbles the gaps between them; all in one trace process (dist::Timeline names it
  // "rank 0"), times from the window's start.
  std::string trace_json() const;
  void write_trace(const std::string& path) const;  // atomically (dist/files.h)
};

// torch.distributed.pipelining's schedules: ScheduleGPipe and Schedule1F1B below.
class PipelineSchedule {
 public:
  virtual ~PipelineSchedule();
  PipelineSchedule(const PipelineSchedule&) = delete;
  PipelineSchedule& operator=(const PipelineSchedule&) = delete;

  // One step over the whole batch: `input` (batch_size * in_features float32 values) on the
  // first stage, `target` (batch_size * out_features float32 values, or batch_size int64 labels)
  // on the last; other stages' arguments are ignored ({}). Splits them into n_microbatches runs
  // of rows, runs the schedule, and leaves the gradients accumulated in the stage's parameters'
  // grads (added to what they held: zero_grad() first), ready for an optimizer step. Returns
  // each micro-batch's loss on the last stage (torch's `losses`), nothing elsewhere. Every stage
  // of the group must call it. A wrong size is a dist::ConfigError on the stage that has it.
  std::vector<double> step(const Tensor& input = {}, const Tensor& target = {});

  ScheduleKind kind() const { return kind_; }
  int n_microbatches() const { return m_; }
  const StageStats& stats() const { return stats_; }  // this stage's last step
  // A collective over the stage's group (all_gather): every stage's stats of the last step, on
  // every stage.
  PipelineReport report();

 protected:
  PipelineSchedule(ScheduleKind kind, PipelineStage& stage, int n_microbatches,
                   const ScheduleOptions& options);

 private:
  ScheduleKind kind_;
  PipelineStage& stage_;
  int m_;
  ScheduleOptions options_;
  StageStats stats_;
};

class ScheduleGPipe : public PipelineSchedule {
 public:
  ScheduleGPipe(PipelineStage& stage, int n_microbatches, const ScheduleOptions& options)
      : PipelineSchedule(ScheduleKind::kGPipe, stage, n_microbatches, options) {}
};

class Schedule1F1B : public PipelineSchedule {
 public:
  Schedule1F1B(PipelineStage& stage, int n_microbatches, const ScheduleOptions& options)
      : PipelineSchedule(ScheduleKind::k1F1B, stage, n_microbatches, options) {}
};

namespace detail {
// The program a stage runs: its compute actions with the sends and receives around them, in
// the order issued (see "Messages" above).
struct PipelineOp {
  enum class Type { kRecvForward, kForward, kSendForward, kRecvBackward, kBackward, kSendBackward };
  Type type;
  int microbatch;
};
std::vector<PipelineOp> stage_program(ScheduleKind kind, int num_stages, int stage,
                                      int n_microbatches);
}  // namespace detail

}  // namespace dist
