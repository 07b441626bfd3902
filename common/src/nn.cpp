// dist/nn.h: Linear, mse_loss, SGD. The CPU loops are here; the same computations as CUDA kernels
// are in gpu/nn_kernels.cu (cuda preset). Every sum is taken in double, then rounded once to
// float32: the CPU and the GPU give the same bits for outputs and gradients (the loss, a scalar
// summed in another order on the GPU, can differ in its last bits).
#include "dist/nn.h"

#include <string>
#include <utility>

#include "dist/check.h"
#include "gpu/gpu.h"

namespace dist {
namespace {

void require_float32(const Tensor& t, const char* what) {
  if (t.dtype() != kFloat32) {
    throw ConfigError(std::string(what) + " must be float32 (dist::kFloat32), got " +
                      std::string(dtype_name(t.dtype())));
  }
}

void require_same_device(const Tensor& t, Device device, const char* what) {
  if (t.device() != device) {
    throw ConfigError(std::string(what) + " is on " + t.device().str() + " but the model is on " +
                      device.str() + "; move it first with .to(device), as in torch");
  }
}

Tensor from_floats(const std::vector<float>& values, Device device) {
  return Tensor::from(values, device);
}

}  // namespace

Linear::Linear(std::int64_t in_features, std::int64_t out_features, const LinearInit& init,
               Device device)
    : in_(in_features), out_(out_features) {
  if (in_ < 1 || out_ < 1) {
    throw ConfigError("Linear(" + std::to_string(in_) + ", " + std::to_string(out_) +
                      "): in_features and out_features must be at least 1");
  }
  if (static_cast<std::int64_t>(init.weight.size()) != in_ * out_ ||
      static_cast<std::int64_t>(init.bias.size()) != out_) {
    throw ConfigError("Linear(" + std::to_string(in_) + ", " + std::to_string(out_) + ") needs " +
                      std::to_string(in_ * out_) + " initial weights and " + std::to_string(out_) +
                      " biases, got " + std::to_string(init.weight.size()) + " and " +
                      std::to_string(init.bias.size()));
  }
  weight_ = {"weight", from_floats(init.weight, device), zeros(in_ * out_, kFloat32, device)};
  bias_ = {"bias", from_floats(init.bias, device), zeros(out_, kFloat32, device)};
}

Tensor Linear::forward(const Tensor& x) {
  const Device device = weight_.data.device();
  require_float32(x, "Linear.forward's input");
  require_same_device(x, device, "Linear.forward's input");
  if (x.numel() % in_ != 0) {
    throw ConfigError("Linear.forward: " + std::to_string(x.numel()) +
                      " input values are not whole rows of in_features = " + std::to_string(in_));
  }
  const std::int64_t batch = x.numel() / in_;
  Tensor out(batch * out_, kFloat32, device);
  const float* xs = x.data_ptr<float>();
  const float* w = weight_.data.data_ptr<float>();
  const float* b = bias_.data.data_ptr<float>();
  float* o = out.data_ptr<float>();
  if (device.is_cuda()) {
    gpu::linear_forward(xs, w, b, o, batch, in_, out_, device.index());
  } else {
    for (std::int64_t n = 0; n < batch; ++n) {
      for (std::int64_t j = 0; j < out_; ++j) {
        double acc = b[j];
        for (std::int64_t i = 0; i < in_; ++i) acc += double{xs[n * in_ + i]} * w[j * in_ + i];
        o[n * out_ + j] = static_cast<float>(acc);
      }
    }
  }
  input_ = x;
  return out;
}

Tensor Linear::backward(const Tensor& grad_out) {
  const Device device = weight_.data.device();
  require_float32(grad_out, "Linear.backward's gradient");
  require_same_device(grad_out, device, "Linear.backward's gradient");
  const std::int64_t batch = input_.numel() / in_;
  if (grad_out.numel() != batch * out_) {
    throw ConfigError("Linear.backward: the gradient has " + std::to_string(grad_out.numel()) +
                      " values, but the last forward produced " + std::to_string(batch * out_) +
                      "; call forward before backward, on the same batch");
  }
  Tensor grad_x(batch * in_, kFloat32, device);
  const float* x = input_.data_ptr<float>();
  const float* g = grad_out.data_ptr<float>();
  const float* w = weight_.data.data_ptr<float>();
  float* gw = weight_.grad.data_ptr<float>();
  float* gb = bias_.grad.data_ptr<float>();
  float* gx = grad_x.data_ptr<float>();
  if (device.is_cuda()) {
    gpu::linear_backward(x, g, w, gw, gb, gx, batch, in_, out_, device.index());
    return grad_x;
  }
  for (std::int64_t j = 0; j < out_; ++j) {
    double db = 0;
    for (std::int64_t n = 0; n < batch; ++n) db += g[n * out_ + j];
    gb[j] = static_cast<float>(gb[j] + db);  // += : gradients accumulate until zero_grad()
    for (std::int64_t i = 0; i < in_; ++i) {
      double dw = 0;
      for (std::int64_t n = 0; n < batch; ++n) dw += double{g[n * out_ + j]} * x[n * in_ + i];
      gw[j * in_ + i] = static_cast<float>(gw[j * in_ + i] + dw);
    }
  }
  for (std::int64_t n = 0; n < batch; ++n) {
    for (std::int64_t i = 0; i < in_; ++i) {
      double acc = 0;
      for (std::int64_t j = 0; j < out_; ++j) acc += double{g[n * out_ + j]} * w[j * in_ + i];
      gx[n * in_ + i] = static_cast<float>(acc);
    }
  }
  return grad_x;
}

MseLoss mse_loss(const Tensor& out, const Tensor& target) {
  require_float32(out, "mse_loss's input");
  require_float32(target, "mse_loss's target");
  require_same_device(target, out.device(), "mse_loss's target");
  if (out.numel() != target.numel() || out.numel() == 0) {
    throw ConfigError("mse_loss: the input has " + std::to_string(out.numel()) +
                      " values and the target " + std::to_string(target.numel()) +
                      "; they must be the same, and not 0");
  }
  const std::int64_t n = out.numel();
  MseLoss result{0, Tensor(n, kFloat32, out.device())};
  const float* o = out.data_ptr<float>();
  const float* t = target.data_ptr<float>();
  float* g = result.grad.data_ptr<float>();
  if (out.is_cuda()) {
    result.loss = gpu::mse_loss(o, t, g, n, out.device().index());
    return result;
  }
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = double{o[i]} - t[i];
    sum += d * d;
    g[i] = static_cast<float>(2.0 * d / static_cast<double>(n));
  }
  result.loss = sum / static_cast<double>(n);
  return result;
}

SGD::SGD(std::vector<Parameter*> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr > 0))
    throw ConfigError("SGD: the learning rate must be positive, got " + std::to_string(lr));
}

void SGD::zero_grad() {
  for (Parameter* p : params_) p->grad.fill_(0);
}

void SGD::step() {
  const auto lr = static_cast<float>(lr_);
  for (Parameter* p : params_) {
    float* data = p->data.data_ptr<float>();
    const float* grad = p->grad.data_ptr<float>();
    const std::int64_t n = p->data.numel();
    if (p->data.is_cuda()) {
      gpu::sgd_step(data, grad, n, lr, p->data.device().index());
      continue;
    }
    for (std::int64_t i = 0; i < n; ++i) data[i] -= lr * grad[i];
  }
}

}  // namespace dist
