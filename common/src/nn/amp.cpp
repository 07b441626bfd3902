// dist/amp.h: GradScaler. The arithmetic is torch 1.13's: the reciprocal of the scale in double,
// rounded once to float32; each gradient multiplied in its own precision (float32 by a float32
// inv_scale, float64 by the same value widened); the new scale a float32 times a double factor,
// rounded back to float32.
#include "dist/amp.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "dist/check.h"

namespace dist {
namespace {

// A double in the fewest digits that read back as it: 1e+39, 0.5, inf.
std::string number(double value) {
  char text[32];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

void check_option(bool ok, const std::string& what) {
  if (!ok) throw ConfigError("GradScaler: " + what);
}

// Runs f(T*, n) over the tensor's values on the host, for float32 and float64, writing the
// values back when the tensor lives on a GPU. Other dtypes: dist::ConfigError naming `what`.
template <typename F>
void on_host_values(Tensor& tensor, const std::string& what, F&& f) {
  const DType dtype = tensor.dtype();
  if (dtype != kFloat32 && dtype != kFloat64) {
    throw ConfigError("GradScaler: " + what + " is " + std::string(dtype_name(dtype)) +
                      "; GradScaler unscales float32 (or float64) gradients, as torch's refuses "
                      "float16 ones: keep fp32 master gradients for the optimizer");
  }
  Tensor host = tensor.is_cuda() ? tensor.cpu() : Tensor();
  Tensor& values = tensor.is_cuda() ? host : tensor;
  if (dtype == kFloat32) {
    f(values.data_ptr<float>(), values.numel());
  } else {
    f(values.data_ptr<double>(), values.numel());
  }
  if (tensor.is_cuda()) tensor.copy_(host);
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options, ProcessGroup* found_inf_group)
    : options_(options), found_inf_group_(found_inf_group) {
  const double max_float = std::numeric_limits<float>::max();
  check_option(std::isfinite(options.init_scale) && options.init_scale > 0 &&
                   options.init_scale <= max_float,
               "init_scale must be finite, positive and at most float32's largest value "
               "(3.4028235e+38), got " +
                   number(options.init_scale));
  check_option(std::isfinite(options.growth_factor) && options.growth_factor > 1,
               "growth_factor must be finite and > 1.0 (torch: \"The growth factor must be > "
               "1.0.\"), got " +
                   number(options.growth_factor));
  check_option(options.backoff_factor > 0 && options.backoff_factor < 1,
               "backoff_factor must be in (0, 1) (torch: \"The backoff factor must be < 1.0.\"; "
               "at 0 or below the scale would vanish or change sign), got " +
                   number(options.backoff_factor));
  check_option(options.growth_interval >= 1 &&
                   options.growth_interval <= std::numeric_limits<std::int32_t>::max(),
               "growth_interval must be in [1, 2147483647] (torch counts clean steps in an "
               "int32), got " +
                   std::to_string(options.growth_interval));
  scale_ = static_cast<float>(options.init_scale);
  if (!(scale_ > 0)) {  // a positive double below float32's smallest subnormal rounds to 0
    throw ConfigError("GradScaler: init_scale " + number(options.init_scale) +
                      " rounds to 0 in float32; use a scale of at least 1.4e-45");
  }
}

Tensor GradScaler::scale(const Tensor& loss_grad) const {
  Tensor out = loss_grad;
  const float s = scale_;
  on_host_values(out, "the loss gradient", [s]<typename T>(T* v, std::int64_t n) {
    for (std::int64_t i = 0; i < n; ++i) v[i] = v[i] * static_cast<T>(s);
  });
  return out;
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (stage_ == Stage::kUnscaled) {
    throw Error(
        "GradScaler::unscale_() has already been called on this optimizer since the last "
        "update(); call it at most once per step");
  }
  if (stage_ == Stage::kStepped) {
    throw Error("GradScaler::unscale_() is being called after step(); call update() first");
  }
  // torch: self._scale.double().reciprocal().float()
  const auto inv_scale = static_cast<float>(1.0 / static_cast<double>(scale_));
  bool found = false;
  for (Parameter* p : optimizer.parameters()) {
    on_host_values(p->grad, "the gradient of " + p->name,
                   [inv_scale, &found]<typename T>(T* v, std::int64_t n) {
                     for (std::int64_t i = 0; i < n; ++i) {
                       if (!std::isfinite(v[i])) found = true;
                       if (inv_scale != 1.0f) v[i] = v[i] * static_cast<T>(inv_scale);
                     }
                   });
  }
  if (found_inf_group_ != nullptr) {
    // Sharded gradients: a rank may see an inf in its shard that the others do not see in
    // theirs; every rank must skip that step, or the shards diverge.
    // NCCL reduces GPU tensors only (the gradients' GPU); Gloo, host ones.
    const auto& params = optimizer.parameters();
    const Device device = found_inf_group_->backend() == "nccl" && !params.empty()
                              ? params.front()->grad.device()
                              : Device::cpu();
    Tensor flag = Tensor::full(1, found ? 1.0 : 0.0, kFloat32, device);
    found_inf_group_->all_reduce(flag, ReduceOp::MAX);
    found = flag.item(0) != 0;
  }
  found_inf_ = found;
  stage_ = Stage::kUnscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (stage_ == Stage::kStepped) {
    throw Error("GradScaler::step() has already been called since the last update()");
  }
  if (stage_ == Stage::kReady) unscale_(optimizer);
  stage_ = Stage::kStepped;
  if (found_inf_) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (stage_ != Stage::kStepped) {
    throw Error(
        "GradScaler::update(): no inf checks were recorded prior to update(); call "
        "scaler.step(optimizer) first, once per step");
  }
  if (found_inf_) {
    const auto backed_off =
        static_cast<float>(static_cast<double>(scale_) * options_.backoff_factor);
    if (!(backed_off > 0)) {
      // torch 1.13 lets it reach 0: then every gradient is 0 * inf = NaN after unscaling, yet
      // found in no check (the check looks at the scaled values, all 0), and the steps go on.
      throw ConfigError("GradScaler::update(): backing off the loss scale " + number(scale_) +
                        " by backoff_factor " + number(options_.backoff_factor) +
                        " reaches 0 in float32: the gradients have been inf or NaN at every "
                        "scale tried. Check the loss and the inputs for inf or NaN");
    }
    scale_ = backed_off;
    growth_tracker_ = 0;
  } else if (growth_tracker_ + 1 == options_.growth_interval) {
    const auto grown = static_cast<float>(static_cast<double>(scale_) * options_.growth_factor);
    if (!std::isfinite(grown)) {
      throw ConfigError("GradScaler::update(): growing the loss scale " + number(scale_) +
                        " by growth_factor " + number(options_.growth_factor) +
                        " overflows float32 (largest 3.4028235e+38) after " +
                        std::to_string(options_.growth_interval) +
                        " steps without an inf or NaN; the gradients are all but zero. Check the "
                        "loss, or lower init_scale or growth_factor (torch 1.13 lets the scale "
                        "become inf, which skips every later step)");
    }
    scale_ = grown;
    growth_tracker_ = 0;
  } else {
    ++growth_tracker_;
  }
  stage_ = Stage::kReady;
}

}  // namespace dist
