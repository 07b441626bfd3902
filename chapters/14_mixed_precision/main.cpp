// Chapter 14 — mixed precision: float16 and bfloat16, in a collective and in training.
//
// A float32 takes 4 bytes; float16 and bfloat16 take 2, so a half-precision value moves twice as
// fast through an all_reduce and a GPU multiplies it several times faster. Each gives up
// something: float16 keeps 11 significant bits but stops at 65504; bfloat16 keeps float32's range
// but only 8 bits. So mixed-precision training keeps the weights and the optimizer in float32 (the
// master weights), runs the forward and the backward in half, and, for float16, multiplies the
// loss by a scale so that small gradients do not vanish, a scale that a GradScaler lowers when a
// gradient overflows and raises again later. This program shows the two formats, an all_reduce
// in them, and the same model trained in float32, in bfloat16 and in float16 with a GradScaler,
// and checks every number it can against its closed form.
//
// You will learn: what float16 and bfloat16 keep; why sums need float32; the half of the bytes a
// collective saves; master weights, autocast's rounding points, GradScaler's skip, backoff and
// growth, and why DDP keeps every rank's scale equal.
// Builds on: chapter 04 (all_reduce), 08/09 (DDP, cross_entropy), 12 (--mixed-precision).
//
// Run:   ./tutorial run 14       (or: ddprun --standalone --nproc-per-node 2 ch14_mixed_precision)
// Prints, among other lines:
//   [rank 0/2]   step 32: a gradient is inf or NaN at scale 524288: step skipped, scale 262144
//   [rank 0/2] OK: casts, sums, the all_reduce, GradScaler's rule and the bytes are their closed
//   forms
#include <dist/amp.h>
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "support.h"

namespace {

using namespace ch14;

// Adds 1.0 `terms` times into an accumulator of type T, rounding after every addition.
template <typename T>
double sum_of_ones(int terms) {
  T sum(0.0f);
  for (int i = 0; i < terms; ++i) sum = sum + T(1.0f);
  return static_cast<double>(static_cast<float>(sum));
}

enum class Precision { kFloat32, kBFloat16, kFloat16 };

struct Run {
  double first_loss = 0, last_loss = 0;
  int skipped = 0;
  float final_scale = 0;
  bool rules_ok = true;          // every step as GradScaler's rule says (float16 only)
  std::int64_t activations = 0;  // bytes of the first forward's outputs
};

// Trains the MLP for --steps with DDP on 2 ranks' batches; the forward and the backward in
// `precision`, the master weights and SGD always in float32.
Run train(const Flags& f, Precision precision) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const dist::DType dtype = precision == Precision::kFloat16    ? dist::kFloat16
                            : precision == Precision::kBFloat16 ? dist::kBFloat16
                                                                : dist::kFloat32;
  const dist::Device device = dist::get_device();  // cuda:LOCAL_RANK under nccl, else cpu
  Mlp model(f.hidden, device);
  std::vector<dist::Parameter*> params = model.parameters();
  dist::DistributedDataParallel ddp(params);
  dist::SGD sgd(params, f.lr);
  const dist::GradScalerOptions options{.init_scale = f.init_scale,
                                        .growth_interval = f.growth_interval};
  std::optional<dist::GradScaler> scaler;
  if (precision == Precision::kFloat16) scaler.emplace(options);
  ScaleRule rule{.scale = static_cast<float>(f.init_scale)};
  Run run;
  for (int step = 0; step < f.steps; ++step) {
    sgd.zero_grad();
    const Batch b = batch((static_cast<std::int64_t>(step) * world + rank) * f.batch_size,
                          f.batch_size, device);
    // autocast: the layers round their float32 weights to `dtype` and compute in it
    const dist::Tensor logits = model.forward(b.x.to(dtype));
    if (step == 0) run.activations = model.activation_bytes();
    const dist::CrossEntropy loss = dist::cross_entropy(logits, b.y, kClasses);  // float32
    model.backward(scaler ? scaler->scale(loss.grad) : loss.grad);
    ddp.average_gradients();  // float32 gradients: an inf on one rank is an inf in every mean
    if (scaler) {
      const float scale = scaler->get_scale();
      const bool overflow = any_nonfinite(params);
      const std::vector<float> before = values(params);
      const bool stepped = scaler->step(sgd);  // unscale_, then sgd.step() unless inf/NaN
      scaler->update();
      rule.after_step(!stepped, options);
      run.rules_ok = run.rules_ok && stepped == !overflow && scaler->get_scale() == rule.scale &&
                     (stepped || values(params) == before);
      if (!stepped) {
        ++run.skipped;
        dist::out0() << "  step " << step + 1 << ": a gradient is inf or NaN at scale " << scale
                     << ": step skipped, scale " << scaler->get_scale();
      } else if (scaler->get_scale() > scale) {
        dist::out0() << "  step " << step + 1 << ": " << f.growth_interval
                     << " clean steps at scale " << scale << ": scale " << scaler->get_scale();
      }
    } else {
      sgd.step();
    }
    dist::Tensor mean = dist::full(1, loss.loss / world, dist::kFloat64, device);
    dist::all_reduce(mean);
    (step == 0 ? run.first_loss : run.last_loss) = mean.item(0);
    if (f.steps == 1) run.last_loss = run.first_loss;
  }
  if (scaler) run.final_scale = scaler->get_scale();
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const Flags& f = *parsed;
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();

    // ---- Step 1: what float16 and bfloat16 keep
    const dist::Tensor v = dist::Tensor::from({0.1f, 65504.0f, 65520.0f, 1.00390625f});
    dist::out0() << "float32:  " << v;
    dist::out0() << "float16:  " << v.to(dist::kFloat16);
    dist::out0() << "bfloat16: " << v.to(dist::kBFloat16);
    const double h01 = v.to(dist::kFloat16).item(0), b01 = v.to(dist::kBFloat16).item(0);
    dist::out0() << "0.1 is stored as " << exact(h01) << " in float16, " << exact(b01)
                 << " in bfloat16";
    // Closed forms: 0.1 rounded to 11 and to 8 significant bits; 65520 is halfway past float16's
    // largest, 65504, so it rounds to inf; 1 + 2^-8 is halfway between bfloat16's 1 and 1 + 2^-7,
    // and the tie goes to the even one, 1.
    const bool casts_ok = h01 == 0.0999755859375 && b01 == 0.10009765625 &&
                          std::isinf(v.to(dist::kFloat16).item(2)) &&
                          v.to(dist::kBFloat16).item(3) == 1.0;
    // A sum stops growing where 1 is less than half a step between neighbours: at 2^11 in
    // float16, 2^8 in bfloat16. The reason sums (and master weights) stay float32.
    const double s32 = sum_of_ones<float>(f.terms), s16 = sum_of_ones<dist::Half>(f.terms),
                 sb16 = sum_of_ones<dist::BFloat16>(f.terms);
    dist::out0() << "1.0 added " << f.terms << " times: float32 " << s32 << ", float16 " << s16
                 << ", bfloat16 " << sb16 << " (closed form: min(terms, 2^11) and min(terms, 2^8))";
    const bool sums_ok =
        s32 == f.terms && s16 == std::min(f.terms, 2048) && sb16 == std::min(f.terms, 256);

    // ---- Step 2: an all_reduce in float16, and the bytes it saves
    dist::Tensor mine = dist::Tensor::from({0.1f, 40000.0f, 0.5f * static_cast<float>(rank + 1)})
                            .to(dist::kFloat16)
                            .to(dist::get_device());  // a GPU under nccl: NCCL reduces there
    dist::out() << "holds " << mine;
    dist::all_reduce(mine);  // SUM, rounded to float16 after every addition
    dist::Half fold(0.0f);   // W additions of float16's 0.1: the same whatever the order
    for (int r = 0; r < world; ++r) fold = fold + dist::Half(0.1f);
    const dist::Tensor want =
        dist::Tensor::from({static_cast<float>(fold), 40000.0f * static_cast<float>(world),
                            0.25f * static_cast<float>(world * (world + 1))})
            .to(dist::kFloat16);  // 40000 W passes 65504 from W = 2 on: inf
    dist::out0() << "all_reduce(SUM) in float16: " << mine << "; closed form " << want;
    const bool reduce_ok =
        mine.to(dist::kFloat32).to_vector<float>() == want.to(dist::kFloat32).to_vector<float>();
    std::int64_t sent[2];
    for (const dist::DType dt : {dist::kFloat32, dist::kFloat16}) {
      dist::Tensor payload = dist::full(f.numel, 1.0, dt, dist::get_device());
      const std::int64_t before = dist::default_group().bytes_sent();
      dist::all_reduce(payload);
      sent[dt == dist::kFloat16] = dist::default_group().bytes_sent() - before;
    }
    // Up to 128 KiB, Gloo's mesh sends the whole tensor to each of the W-1 others in one step
    // (larger ones go round chapter 04's ring): n(W-1) values, 4 or 2 bytes each.
    const std::int64_t n_sent = static_cast<std::int64_t>(f.numel) * (world - 1);
    dist::out0() << "all_reduce of " << grouped(f.numel)
                 << " values, bytes sent by rank 0: float32 " << grouped(sent[0]) << ", float16 "
                 << grouped(sent[1]) << " (closed form: n(W-1) "
                 << "values, 4 or 2 bytes each: " << grouped(4 * n_sent) << " and "
                 << grouped(2 * n_sent) << ")";
    const bool bytes_ok = sent[0] == 4 * n_sent && sent[1] == 2 * n_sent;

    // ---- Step 3: the same model trained in float32, bfloat16, float16 with a GradScaler
    dist::out0() << "MLP 8-" << f.hidden << "-4, SGD (lr " << f.lr << "), " << f.steps
                 << " steps of " << f.batch_size << " samples per rank, DDP on " << world
                 << (world == 1 ? " rank" : " ranks") << "; master weights in float32:";
    const Run fp32 = train(f, Precision::kFloat32);
    const Run bf16 = train(f, Precision::kBFloat16);
    dist::out0() << "float16 with GradScaler(init_scale=" << f.init_scale
                 << ", growth_interval=" << f.growth_interval << "):";
    const Run fp16 = train(f, Precision::kFloat16);
    dist::out0() << "loss, first step -> last: float32 " << fixed4(fp32.first_loss) << " -> "
                 << fixed4(fp32.last_loss) << ", bfloat16 " << fixed4(bf16.first_loss) << " -> "
                 << fixed4(bf16.last_loss) << ", float16 " << fixed4(fp16.first_loss) << " -> "
                 << fixed4(fp16.last_loss);
    dist::out0() << "float16: " << fp16.skipped << " of " << f.steps
                 << " steps skipped, final scale " << fp16.final_scale
                 << "; every step as GradScaler's rule says: " << (fp16.rules_ok ? "yes" : "NO");

    // ---- Step 4: the memory
    const std::int64_t values_per_forward = f.batch_size * (2 * f.hidden + kClasses);
    dist::out0() << "activations of one forward: float32 " << grouped(fp32.activations)
                 << " bytes, bfloat16 " << grouped(bf16.activations) << ", float16 "
                 << grouped(fp16.activations)
                 << " (closed form: batch * (2 * hidden + 4) = " << grouped(values_per_forward)
                 << " values, 4 or 2 bytes each)";
    const bool activations_ok = fp32.activations == 4 * values_per_forward &&
                                bf16.activations == 2 * values_per_forward &&
                                fp16.activations == 2 * values_per_forward;
    const std::int64_t psi = f.hidden * (kFeatures + 1) + kClasses * (f.hidden + 1);
    dist::out0() << "model state with Adam: float32 4 + 4 + 8 bytes a value, mixed 2 + 2 + 12: "
                 << "16Ψ = " << grouped(16 * psi) << " bytes either way (Ψ = " << grouped(psi)
                 << "); what sharding does to it: ./tutorial run 12 -- --mixed-precision";

    const bool job_ok = dist::all_ranks_ok(casts_ok && sums_ok && reduce_ok && bytes_ok &&
                                           fp16.rules_ok && activations_ok);
    dist::destroy_process_group();
    if (!job_ok) {
      const auto yes = [](bool b) { return b ? "yes" : "NO"; };
      dist::out0() << "MISMATCH: as their closed forms: casts " << yes(casts_ok) << ", sums "
                   << yes(sums_ok) << ", the all_reduce " << yes(reduce_ok) << ", its bytes "
                   << yes(bytes_ok) << ", GradScaler's rule " << yes(fp16.rules_ok)
                   << ", activations " << yes(activations_ok) << " (rank 0's; a rank may differ)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: casts, sums, the all_reduce, GradScaler's rule and the bytes are their "
                    "closed forms";
    return dist::kExitOk;
  });
}
