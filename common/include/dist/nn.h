// dist/nn.h — the few pieces of torch.nn that a data-parallel training loop needs (its optimizers,
// torch.optim's part, are in dist/optim.h).
//
//   dist::Linear model(1, 1, {.weight = {0.5f}, .bias = {-0.2f}}, device);  // nn.Linear(1, 1)
//   dist::SGD optimizer(model.parameters(), /*lr=*/0.01);   // optim.SGD (dist/optim.h)
//   optimizer.zero_grad();
//   dist::Tensor out = model.forward(x);               // x: batch x in_features, row-major
//   dist::MseLoss loss = dist::mse_loss(out, y);       // nn.MSELoss(): the mean, and d loss/d out
//   model.backward(loss.grad);                         // accumulates into each parameter's grad
//   optimizer.step();                                  // p -= lr * p.grad
//
// There is no autograd: each layer's backward is written out, because the point of the chapters
// is what DistributedDataParallel does with the gradients, not how they are found. Tensors are
// the project's 1-D tensors; a batch of `n` rows of `k` features is n * k float32 values, row after
// row. Everything runs where the tensors are: plain loops on the CPU, CUDA kernels on a GPU (the
// cuda preset), each summing in double in a fixed order, so a run repeats bit for bit.
//
// Half precision (mixed-precision training): Linear, ReLU and cross_entropy also take float16 or
// bfloat16 inputs, and compute as torch's autocast does (torch 1.13's CPU autocast: bfloat16 only):
//   - Linear rounds its float32 weight and bias to the input's dtype (a half copy: the parameters,
//     the master weights, stay float32), sums in float32 or better (here double, rounded once) and
//     rounds the output to the input's dtype. Its backward takes a gradient in that dtype, or in
//     float32, which it rounds first (a loss gradient times a GradScaler's scale, dist/amp.h); it
//     adds d loss / d W and d b, each rounded to half, to the float32 grads, and returns d loss / d
//     x in half;
//   - ReLU keeps the dtype (exactly: max(x, 0) rounds nothing);
//   - cross_entropy widens half logits to float32, as autocast runs it in float32: the loss and
//     the gradient are float32.
// So a model trains with float32 master weights and optimizer state, while the forward and the
// backward see half-precision values. On a GPU the half values are widened and rounded on the
// host, through a copy, around the float32 kernels.
//
// Taught in: chapter 08 (ddp_linear: Linear, mse_loss), chapter 09 (ddp_classifier: ReLU,
// BatchNorm1d and SyncBatchNorm, cross_entropy) and chapter 14 (half precision).
// Built in: common/src/nn/nn.cpp (the CPU loops; nn_math.h holds the arithmetic they share with the
// kernels) and gpu/nn_kernels.cu (cuda preset).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/device.h"
#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

// A learnable tensor and its gradient (torch.nn.Parameter and its .grad), same shape and device.
struct Parameter {
  std::string name;  // "weight", "bias": as in model.named_parameters()
  Tensor data;
  Tensor grad;
  // torch's param.shape, for code that views the values as a matrix (PowerSGD): Linear's weight
  // is {out_features, in_features}. Empty means one dimension, {data.numel()}.
  std::vector<std::int64_t> shape = {};
  std::vector<std::int64_t> sizes() const {
    return shape.empty() ? std::vector<std::int64_t>{data.numel()} : shape;
  }
};

struct LinearInit {
  std::vector<float> weight;  // out_features * in_features values, row-major: weight[o][i]
  std::vector<float> bias;    // out_features values
};

// torch.nn.Linear(in_features, out_features): out = x W^T + b, on `device`.
class Linear {
 public:
  Linear(std::int64_t in_features, std::int64_t out_features, const LinearInit& init,
         Device device = Device::cpu());

  // x holds batch * in_features values; returns batch * out_features. Keeps x for backward.
  Tensor forward(const Tensor& x);
  // grad_out = d loss / d out for the last forward's batch. Adds d loss / d W and d loss / d b to
  // the parameters' grads (accumulates, as torch does until zero_grad) and returns d loss / d x.
  Tensor backward(const Tensor& grad_out);

  // weight first, then bias, as model.parameters() orders them.
  std::vector<Parameter*> parameters() { return {&weight_, &bias_}; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  std::int64_t in_features() const { return in_; }
  std::int64_t out_features() const { return out_; }

  // What forward keeps for backward (torch's autograd keeps it on each forward's graph):
  // take_saved() moves it out after a forward, restore_saved() puts it back before that batch's
  // backward. So several batches can be in flight at once, each with its own: a pipeline stage's
  // stash (dist/pipeline.h). Its tensors count in memory_allocated() wherever they are.
  struct Saved {
    Tensor input;
    DType compute = kFloat32;
    Tensor half_weight;
  };
  Saved take_saved();
  void restore_saved(Saved saved);

 private:
  std::int64_t in_, out_;
  Parameter weight_, bias_;
  Tensor input_;              // the last forward's x (in float32: a half x widened)
  DType compute_ = kFloat32;  // the last forward's dtype
  Tensor half_weight_;        // a half forward's weight, rounded to half (and widened back)
};

// torch.nn.ReLU: out = max(x, 0); backward passes the gradient where x > 0.
class ReLU {
 public:
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& grad_out);
  // Its forward's input, moved out and back as Linear's (above).
  Tensor take_saved() {
    Tensor input = std::move(input_);
    input_ = Tensor();  // a moved-from Tensor keeps its numel
    return input;
  }
  void restore_saved(Tensor input) { input_ = std::move(input); }

 private:
  Tensor input_;
};

// torch.nn.BatchNorm1d(features) on a batch of rows, and torch.nn.SyncBatchNorm when given a
// process group. In training each feature is normalised with the mean and (biased) variance of
// the batch, then scaled and shifted: out = weight * (x - mean) / sqrt(var + eps) + bias; the
// running statistics follow with `momentum` (the variance unbiased, as torch keeps it). In
// evaluation the running statistics are used.
//
// SyncBatchNorm: the batch is the union of every rank's batch. forward all_reduces each
// feature's sum, sum of squares and count (in float64) over `sync_group`, so every rank
// normalises with the statistics of the whole global batch; backward all_reduces the two sums
// it needs the same way: one all_reduce of 2C + 1 values in forward and one of 2C in backward,
// per layer and step, in training only. With equal per-rank batches, N ranks give what
// BatchNorm1d gives one process on the N batches together, to float32 rounding
// (tests/multiprocess/sync_batchnorm_test.cpp). It buys better statistics when per-rank batches
// are small, not faster convergence in general (chapter 09). PyTorch's SyncBatchNorm (1.13)
// needs CUDA tensors; this one runs on the CPU too. Every rank of `sync_group` must call forward
// and backward in step: they are collectives.
class BatchNorm1d {
 public:
  explicit BatchNorm1d(std::int64_t features, Device device = Device::cpu(),
                       ProcessGroup* sync_group = nullptr, double eps = 1e-5,
                       double momentum = 0.1);

  Tensor forward(const Tensor& x);  // x: batch * features
  Tensor backward(const Tensor& grad_out);
  void train(bool on) { training_ = on; }  // model.train() / model.eval()
  bool training() const { return training_; }

  std::vector<Parameter*> parameters() { return {&weight_, &bias_}; }
  const Parameter& weight() const { return weight_; }
  const Parameter& bias() const { return bias_; }
  // Buffers, not parameters: saved in checkpoints, never averaged by DDP.
  Tensor& running_mean() { return running_mean_; }
  Tensor& running_var() { return running_var_; }
  bool synchronized() const { return sync_group_ != nullptr; }

 private:
  std::int64_t features_;
  ProcessGroup* sync_group_;
  double eps_, momentum_;
  bool training_ = true;
  Parameter weight_, bias_;
  Tensor running_mean_, running_var_;
  Tensor xhat_, invstd_;  // the last training forward's normalised input and 1 / sqrt(var + eps)
  std::int64_t rows_ = 0, global_rows_ = 0;
};

// torch.nn.CrossEntropyLoss() (reduction 'mean') on logits (batch * classes) and int64 labels:
// loss = mean(log(sum_k exp(logit_k)) - logit_label), gradient (softmax - one_hot(label)) / batch.
struct CrossEntropy {
  double loss = 0;
  Tensor grad;
  std::int64_t correct = 0;  // rows whose largest logit is the label's (for accuracy)
};
CrossEntropy cross_entropy(const Tensor& logits, const Tensor& labels, std::int64_t classes);

// torch.nn.MSELoss() (reduction 'mean'): loss = mean((out - target)^2), and the gradient
// d loss / d out = 2 (out - target) / n that backward starts from.
struct MseLoss {
  double loss = 0;
  Tensor grad;
};
MseLoss mse_loss(const Tensor& out, const Tensor& target);

// A hash of every parameter's bits, then every buffer's (float32), in order (FNV-1a over their
// bytes), as 16 hex digits: equal on two ranks, or between two runs, exactly when the bits are
// (barring a 1 in 2^64 collision). How chapter 09 shows that DDP's replicas stay identical,
// BatchNorm's running statistics included, and that resuming a checkpoint ends where the
// uninterrupted run ends.
std::string fingerprint(const std::vector<Parameter*>& parameters,
                        const std::vector<Tensor*>& buffers = {});

}  // namespace dist
