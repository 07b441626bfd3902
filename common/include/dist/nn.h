// dist/nn.h — the few pieces of torch.nn and torch.optim that a data-parallel training loop needs.
//
//   dist::Linear model(1, 1, {.weight = {0.5f}, .bias = {-0.2f}}, device);  // nn.Linear(1, 1)
//   dist::SGD optimizer(model.parameters(), /*lr=*/0.01);                   // optim.SGD
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
// Taught in: chapter 08 (ddp_linear).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/device.h"
#include "dist/tensor.h"

namespace dist {

// A learnable tensor and its gradient (torch.nn.Parameter and its .grad), same shape and device.
struct Parameter {
  std::string name;  // "weight", "bias": as in model.named_parameters()
  Tensor data;
  Tensor grad;
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

 private:
  std::int64_t in_, out_;
  Parameter weight_, bias_;
  Tensor input_;  // the last forward's x
};

// torch.nn.MSELoss() (reduction 'mean'): loss = mean((out - target)^2), and the gradient
// d loss / d out = 2 (out - target) / n that backward starts from.
struct MseLoss {
  double loss = 0;
  Tensor grad;
};
MseLoss mse_loss(const Tensor& out, const Tensor& target);

// torch.optim.SGD(params, lr) without momentum or weight decay.
class SGD {
 public:
  SGD(std::vector<Parameter*> params, double lr);
  void zero_grad();  // every grad to 0 (torch 1.13 keeps zero tensors by default, as here)
  void step();       // p -= lr * p.grad, in float32 as torch computes it
  double lr() const { return lr_; }

 private:
  std::vector<Parameter*> params_;
  double lr_;
};

}  // namespace dist
