// Chapter 08's support code (see support.h).
#include "support.h"

#include <cstdio>

namespace ch08 {

bool Flags::training_defaults() const {
  const Flags d;
  return samples == d.samples && batch_size == d.batch_size && epochs == d.epochs &&
         seed == d.seed && lr == d.lr;
}

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch08_ddp_linear",
                "Fit y = 3x + 2 with nn.Linear(1, 1) on every rank, kept equal by "
                "DistributedDataParallel; check that the replicas are identical and that they "
                "took the steps of one process on the global batches.");
  cli.add_int("--samples", &f.samples,
              "samples in the dataset (2 at least: a line needs two points)", 2, 1000000);
  cli.add_int("--batch-size", &f.batch_size, "samples per batch on each rank", 1, 100000);
  cli.add_int("--epochs", &f.epochs, "passes over the dataset", 1, 1000);
  // With x in [-2, 2), a step's curvature 2 (x^2 + 1) is below 10, so lr <= 0.1 keeps every SGD
  // step stable (lr * curvature <= 1) for any batch; larger steps can overshoot and diverge.
  cli.add_double("--lr", &f.lr, "SGD's learning rate (at most 0.1: every step stays stable)", 1e-9,
                 0.1);
  cli.add_int("--seed", &f.seed, "seeds the data, the sampler and the initial weights", 0,
              1000000000);
  cli.add_flag("--throughput", &f.throughput,
               "also print the training loop's samples per second (for bench/run.py)");
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  return f;
}

std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Dataset& d,
                                                    const std::vector<std::int64_t>& batch,
                                                    dist::Device device) {
  std::vector<float> x, y;
  for (std::int64_t i : batch) {
    x.push_back(d.x[i]);
    y.push_back(d.y[i]);
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
}

LineFit least_squares(const Dataset& d) {
  const auto n = static_cast<double>(d.x.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) mx += d.x[i], my += d.y[i];
  mx /= n, my /= n;
  double sxy = 0, sxx = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) {
    sxy += (d.x[i] - mx) * (d.y[i] - my);
    sxx += (d.x[i] - mx) * (d.x[i] - mx);
  }
  return {sxy / sxx, my - sxy / sxx * mx};
}

std::string fixed(double v, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

std::string weights_text(const dist::Linear& model, int decimals) {
  return "w = " + fixed(model.weight().data.item(0), decimals) +
         ", b = " + fixed(model.bias().data.item(0), decimals);
}

void print_losses(const std::vector<double>& losses) {
  for (std::size_t epoch = 0; epoch < losses.size(); ++epoch) {
    if (epoch < 5 || (epoch + 1) % 5 == 0 || epoch + 1 == losses.size()) {
      dist::out0() << "epoch " << (epoch < 10 ? " " : "") << epoch << ": loss "
                   << fixed(losses[epoch]);
    }
  }
}

void print_checks(const Checks& c, bool job_ok) {
  const auto yes = [](bool v) { return v ? "yes" : "no"; };
  dist::out0() << "promise 1, the replicas are bit-identical: " << yes(c.identical);
  dist::out0() << "promise 2, the steps of one process on the global batches: "
               << yes(c.same_steps);
  dist::out0() << "fit: |w - w*| = " << fixed(c.dw) << ", |b - b*| = " << fixed(c.db)
               << (c.judged ? std::string(", within 0.02 (the default run): ") + yes(c.near)
                            : std::string(" (reported; judged in the default run only)"));
  if (!job_ok) {
    dist::out0() << "MISMATCH: a line above says no";
  } else {
    dist::out0() << "OK: both promises hold"
                 << (c.judged ? ", and the fit is within 0.02 of least squares" : "");
  }
}

}  // namespace ch08
