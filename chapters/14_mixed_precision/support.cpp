#include "support.h"

#include <dist/cli.h>

#include <cmath>
#include <cstdio>

namespace ch14 {

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch14_mixed_precision",
                "float16 and bfloat16: what each keeps, an all_reduce in half precision, and "
                "mixed-precision training (float32 master weights; bfloat16, then float16 with a "
                "GradScaler), each checked against its closed form.");
  cli.add_int("--terms", &f.terms, "step 1: how many 1.0s to add in each dtype", 1, 1000000);
  cli.add_int("--numel", &f.numel,
              "step 2: values in the all_reduce whose bytes are counted (up to 128 KiB, Gloo's "
              "mesh sends a tensor whole to every other rank)",
              1, 32768);
  cli.add_int("--steps", &f.steps, "step 3: training steps of each run", 1, 10000);
  cli.add_int("--batch-size", &f.batch_size, "samples per batch on each rank", 1, 4096);
  cli.add_int("--hidden", &f.hidden, "the hidden layer's width", 1, 4096);
  cli.add_double("--lr", &f.lr, "SGD's learning rate", 1e-6, 10);
  cli.add_double("--init-scale", &f.init_scale, "the GradScaler's first scale (torch: 65536)", 1,
                 1e30);
  cli.add_int("--growth-interval", &f.growth_interval,
              "clean steps before the scale doubles (torch: 2000)", 1, 1000000);
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  return f;
}

namespace {

// The teacher: class c scores x . t_c with t_cj = ((3c + 5j) mod 7) - 3.
std::int64_t label(const std::vector<double>& x) {
  std::int64_t best = 0;
  double best_score = 0;
  for (std::int64_t c = 0; c < kClasses; ++c) {
    double score = 0;
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      score += static_cast<double>((3 * c + 5 * j) % 7 - 3) * x[static_cast<std::size_t>(j)];
    }
    if (c == 0 || score > best_score) best = c, best_score = score;
  }
  return best;
}

std::vector<float> weights(std::int64_t rows, std::int64_t cols, int a, int b, int m, double div) {
  std::vector<float> w;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      w.push_back(static_cast<float>(static_cast<double>((a * r + b * c) % m - m / 2) / div));
    }
  }
  return w;
}

}  // namespace

Batch batch(std::int64_t first_sample, std::int64_t size, dist::Device device) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = first_sample; i < first_sample + size; ++i) {
    std::vector<double> row;
    for (std::int64_t j = 0; j < kFeatures; ++j) {
      row.push_back(static_cast<double>((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0);
      x.push_back(static_cast<float>(row.back()));
    }
    y.push_back(label(row));
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
}

Mlp::Mlp(std::int64_t hidden, dist::Device device)
    : l1(kFeatures, hidden,
         {.weight = weights(hidden, kFeatures, 31, 17, 23, 20.0),
          .bias = std::vector<float>(static_cast<std::size_t>(hidden), 0.0f)},
         device),
      l2(hidden, kClasses,
         {.weight = weights(kClasses, hidden, 13, 7, 19, 10.0),
          .bias = std::vector<float>(kClasses, 0.0f)},
         device) {}

dist::Tensor Mlp::forward(const dist::Tensor& x) {
  h1 = l1.forward(x);
  h2 = relu.forward(h1);
  out = l2.forward(h2);
  return out;
}

void Mlp::backward(const dist::Tensor& grad_out) {
  l1.backward(relu.backward(l2.backward(grad_out)));
}

std::vector<dist::Parameter*> Mlp::parameters() {
  std::vector<dist::Parameter*> p = l1.parameters();
  for (dist::Parameter* q : l2.parameters()) p.push_back(q);
  return p;
}

std::int64_t Mlp::activation_bytes() const {
  return static_cast<std::int64_t>(h1.nbytes() + h2.nbytes() + out.nbytes());
}

void ScaleRule::after_step(bool skipped, const dist::GradScalerOptions& o) {
  if (skipped) {
    scale = static_cast<float>(scale * o.backoff_factor);
    tracker = 0;
  } else if (++tracker == o.growth_interval) {
    scale = static_cast<float>(scale * o.growth_factor);
    tracker = 0;
  }
}

bool any_nonfinite(const std::vector<dist::Parameter*>& params) {
  for (const dist::Parameter* p : params) {
    for (float g : p->grad.to_vector<float>()) {
      if (!std::isfinite(g)) return true;
    }
  }
  return false;
}

std::vector<float> values(const std::vector<dist::Parameter*>& params) {
  std::vector<float> v;
  for (const dist::Parameter* p : params) {
    for (float x : p->data.to_vector<float>()) v.push_back(x);
  }
  return v;
}

std::string exact(double value) {
  char text[48];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string fixed4(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

}  // namespace ch14
