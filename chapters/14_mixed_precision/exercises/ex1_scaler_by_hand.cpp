// Chapter 14, exercise 1 — GradScaler's rule by hand: skip, back off, grow.
//
// Each rank's gradient comes out of a float16 backward multiplied by the scale S (so that small
// gradients stay above float16's smallest value). Every few steps one rank's gradient is large
// enough that S times it passes 65504 and becomes inf. DDP averages the float32 gradients, so an
// inf on one rank is an inf in every rank's mean. Then, as torch.cuda.amp.GradScaler does:
// unscale (multiply by 1/S), step unless a value was inf or NaN, and update S as GradScaler does
// (backoff factor 0.5, growth factor 2, --growth-interval clean steps). Write that part.
// Grade it: ./tutorial check 14-ex1        Run it: ./tutorial run 14-ex1
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr std::int64_t kValues = 4;

// Rank r's gradient at step t, before scaling: (t + 1 + r + i) / 64 for value i, and 64 times
// that on rank t mod W at every fourth step (t mod 4 == 3). Closed forms the grader computes too.
std::vector<float> gradient(int rank, int world, int step) {
  std::vector<float> g;
  for (std::int64_t i = 0; i < kValues; ++i) {
    float v = static_cast<float>(step + 1 + rank + i) / 64;
    if (step % 4 == 3 && rank == step % world) v *= 64;
    g.push_back(v);
  }
  return g;
}

std::string values(const dist::Tensor& t) {
  std::string text;
  for (float v : t.to_vector<float>()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%s%.9g", text.empty() ? "" : ", ", static_cast<double>(v));
    text += buf;
  }
  return text;
}

struct Scaler {
  double scale;
  std::int64_t growth_interval;
  std::int64_t tracker = 0;  // clean steps since the last growth or backoff
};

// The scale after one step; `found_inf`: some gradient was inf or NaN at this step.
void update(Scaler& s, bool found_inf) {
  // TODO(exercise): after an inf/NaN, back off: S *= 0.5 and the count of clean steps to 0.
  // After a clean step, count it; at s.growth_interval clean steps, grow: S *= 2, count to 0.
  // The placeholder never changes S.
  (void)s;
  (void)found_inf;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int steps = 16, growth_interval = 4;
    double init_scale = 8192, lr = 0.5;
    dist::Cli cli("ch14_mixed_precision_ex1",
                  "GradScaler's rule by hand: float16 gradients scaled by S, averaged by DDP, "
                  "unscaled, a step skipped on inf/NaN, S backed off and grown.");
    cli.add_int("--steps", &steps, "training steps", 1, 1000);
    cli.add_int("--growth-interval", &growth_interval, "clean steps before S doubles", 1, 1000);
    cli.add_double("--init-scale", &init_scale, "the first scale S (a power of two)", 1, 65536);
    cli.add_double("--lr", &lr, "SGD's learning rate", 1e-6, 10);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();

    dist::Parameter w{"w", dist::Tensor::from(std::vector<float>{1, 2, 3, 4}),
                      dist::Tensor(kValues, dist::kFloat32)};
    dist::SGD sgd({&w}, lr);
    Scaler scaler{.scale = init_scale, .growth_interval = growth_interval};
    for (int step = 0; step < steps; ++step) {
      // The float16 backward's result: S times the gradient, rounded to float16 (inf past 65504),
      // then widened to float32 and averaged over the ranks, as DDP does.
      const dist::Tensor scaled =
          (dist::Tensor::from(gradient(rank, world, step)) * scaler.scale).to(dist::kFloat16);
      w.grad = scaled.to(dist::kFloat32) / world;
      dist::all_reduce(w.grad);
      const double scale = scaler.scale;

      // TODO(exercise): found_inf = whether any value of w.grad is inf or NaN; unless it is,
      // unscale w.grad (times 1/S, as a float32) and sgd.step(). The placeholder steps on the
      // scaled gradient, inf or not.
      const bool found_inf = false;
      sgd.step();
      update(scaler, found_inf);

      dist::out() << "step " << step + 1 << ": scale " << scale << " -> " << scaler.scale << ", "
                  << (found_inf ? "skipped" : "stepped");
    }
    dist::out() << "final: " << values(w.data);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
