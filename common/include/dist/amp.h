// dist/amp.h — torch.cuda.amp.GradScaler: dynamic loss scaling for half-precision training.
//
//   dist::GradScaler scaler;                            // GradScaler(): scale 2^16, x2 per 2000
//   dist::Adam optimizer(model.parameters());           // float32 master weights and state
//   for (batch : my_shard) {
//     optimizer.zero_grad();
//     out = model.forward(x.to(dist::kFloat16));        // the layers compute in float16 (nn.h)
//     loss = dist::cross_entropy(out, y, classes);      // in float32, as autocast runs it
//     model.backward(scaler.scale(loss.grad));          // scaler.scale(loss).backward()
//     scaler.step(optimizer);   // unscales the grads; steps only if every one is finite
//     scaler.update();          // backs off after an inf/NaN, grows after a clean run
//   }
//
// Why: float16 holds magnitudes from 6e-8 (its smallest subnormal) to 65504. Small gradients
// fall below the bottom and become 0 (underflow), so the backward starts from the loss gradient
// times a large scale S, and every gradient comes out S times larger, above the bottom; before the
// optimizer steps, unscale_ divides them by S again, in float32. Too large an S overflows: some
// gradient is inf or NaN, and that step must not be taken. So S is tuned as training runs:
//   - unscale_: every grad *= inv_scale, where inv_scale = float32(1 / double(S)) (torch takes
//     the reciprocal in double, then rounds it once); found_inf = 1 when any value before the
//     multiplication is inf or NaN (every gradient of the optimizer is checked);
//   - step: the optimizer's step, skipped when found_inf;
//   - update: after an inf/NaN, S *= backoff_factor and the count of clean steps goes back to 0;
//     after a clean step the count grows, and when it reaches growth_interval, S *= growth_factor
//     and the count goes back to 0. S is a float32, multiplied in double and rounded, as torch's
//     _amp_update_scale_ kernel computes it.
// With the defaults (2^16, x2, x0.5, 2000), a run finds the largest S that does not overflow
// within a few skipped steps, and tries a larger one every 2000 clean steps.
//
// With DDP (dist/ddp.h) the gradients are averaged (finish_gradient_sync) before the scaler sees
// them, so every rank holds the same gradients, finds the same inf or NaN and skips the same steps:
// the replicas stay equal with no extra communication. Sharded gradients (dist/sharded.h) are not
// the same on every rank: each rank checks only its shard, so one rank may find an inf that the
// others do not. Give the scaler a process group (torch's ShardedGradScaler does the same for FSDP:
// an all_reduce of found_inf), and unscale_ agrees on found_inf over it (a MAX all_reduce of one
// float32: every rank must call unscale_, or step, in step with the others).
//
// Not quite torch (1.13):
//   - the scale is a float here, not a one-element tensor on the GPU (torch keeps it there so that
//     nothing waits for the GPU; this library finishes every operation before it returns);
//   - a growth that would overflow float32 is a dist::ConfigError naming the scale, and leaves the
//     scaler as it was. torch 1.13 (and 2.0) multiplies anyway: the scale becomes inf, every later
//     gradient is inf or NaN, every later step is skipped and the scale stays inf, silently (its
//     CPU rule, ShardedGradScaler's, does so here: 2^127 grows to inf). Since torch 2.1 (pull
//     request 98876) the kernel keeps the old scale instead, also silently. A scale near 3.4e38
//     means the gradients are all but zero: something to look at, not to hide. A backoff that
//     reaches 0 is a ConfigError too (torch 1.13 goes on: every unscaled gradient is 0 * inf =
//     NaN, and its check, which looks at the scaled values, all 0, does not see them);
//   - constructor checks: init_scale finite, > 0 and a float32 (at most 3.4e38, not rounding to
//     0), growth_factor finite and > 1, backoff_factor in (0, 1), growth_interval in [1, 2^31 - 1]
//     (torch asserts only growth_factor > 1 and backoff_factor < 1; its tracker is an int32). A
//     ConfigError names the value;
//   - the scale is multiplied in double and rounded to float32, as GradScaler's CUDA kernel does;
//     torch 1.13's ShardedGradScaler multiplies a CPU scale in float32 (tensor *= factor): the same
//     scales for power-of-two factors (the defaults), not always for others (1.1, 0.3);
//   - one optimizer per scaler, and no `enabled` switch: without CUDA, torch 1.13's GradScaler
//     disables itself with a warning (and has no CPU kernels for its two operations); this one runs
//     on the CPU, and on GPU tensors through a copy to the host;
//   - gradients may be float32 or float64; float16 (and bfloat16) gradients are refused, as torch
//     refuses float16 ones ("Attempting to unscale FP16 gradients."): the optimizer steps float32
//     master weights, whose gradients the half-precision layers fill (dist/nn.h).
//
// Taught in: chapter 13 (mixed-precision training; chapter 12's --mixed-precision counts what half
// precision saves per ZeRO stage).
// Built in: common/src/nn/amp.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/process_group.h"
#include "dist/tensor.h"

namespace dist {

// torch.cuda.amp.GradScaler(init_scale, growth_factor, backoff_factor, growth_interval), with
// torch's defaults.
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  // Throws dist::ConfigError naming the first option out of range (see above). `found_inf_group`:
  // null, or the group over which unscale_ agrees on found_inf (sharded gradients).
  explicit GradScaler(GradScalerOptions options = {}, ProcessGroup* found_inf_group = nullptr);

  // scaler.scale(loss): the loss gradient times the scale, in float32 (the backward starts there).
  // Must be float32 or float64 (the result keeps its dtype).
  Tensor scale(const Tensor& loss_grad) const;

  // Divides every gradient of the optimizer's parameters by the scale (in place) and records
  // whether any was inf or NaN. At most once between two update()s, and not after step(), as in
  // torch (dist::Error otherwise). Call it to look at or clip the real gradients before step().
  void unscale_(Optimizer& optimizer);
  // unscale_ (unless already called this step), then optimizer.step() unless found_inf. Returns
  // whether the optimizer stepped. Once between two update()s.
  bool step(Optimizer& optimizer);
  // The new scale from this step's found_inf (see above). After step() (dist::Error otherwise).
  // Throws dist::ConfigError, changing nothing, when growth would overflow float32.
  void update();

  float get_scale() const { return scale_; }  // scaler.get_scale()
  // Clean steps since the last growth or backoff (torch's _growth_tracker).
  std::int64_t growth_tracker() const { return growth_tracker_; }
  // The last unscale_'s verdict (kept through update()): some gradient was inf or NaN.
  bool found_inf() const { return found_inf_; }
  const GradScalerOptions& options() const { return options_; }

 private:
  enum class Stage { kReady, kUnscaled, kStepped };
  GradScalerOptions options_;
  ProcessGroup* found_inf_group_;
  float scale_;
  std::int64_t growth_tracker_ = 0;
  bool found_inf_ = false;
  Stage stage_ = Stage::kReady;
};

}  // namespace dist
