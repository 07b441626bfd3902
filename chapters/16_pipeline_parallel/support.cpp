#include "support.h"

#include <dist/cli.h>
#include <dist/optim.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ch16 {

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch16_pipeline_parallel",
                "pipeline parallel: an MLP cut into stages, one per rank; GPipe and 1F1B push "
                "micro-batches through it by send/recv. Checks each stage's layers, the "
                "micro-batches it holds at its peak, and its weights after training against one "
                "process's.");
  cli.add_int("--layers", &f.layers, "Linear layers of the MLP (a ReLU after each but the last)", 1,
              64);
  cli.add_int("--hidden", &f.hidden, "the hidden layers' width", 1, 4096);
  cli.add_int("--batch-size", &f.batch_size, "rows of each step's batch", 1, 65536);
  cli.add_int("--microbatches", &f.microbatches,
              "m: micro-batches a batch is cut into (must divide --batch-size)", 1, 4096);
  cli.add_int("--dp", &f.dp,
              "N: data-parallel replicas of the pipeline (must divide the world size); each "
              "takes B/N rows of each batch",
              1, 4096);
  cli.add_int("--steps", &f.steps, "SGD steps of each schedule", 1, 10000);
  cli.add_double("--lr", &f.lr, "SGD's learning rate", 1e-6, 10);
  cli.add_string("--schedule", &f.schedule, "gpipe, 1f1b, or both");
  cli.add_string("--trace", &f.trace_dir,
                 "a folder: rank 0 writes each schedule's last step there as a Chrome trace "
                 "(gpipe.json, 1f1b.json) and prints the bubble measured from it");
  cli.add_string("--mistake", &f.mistake,
                 "mismatched-widths: the last stage is built from another --hidden (a p2p recv "
                 "of the wrong size)");
  cli.add_flag("--throughput", &f.throughput,
               "also print each schedule's training steps' samples per second, GPipe's first; "
               "the first step (a warm-up) is left out (for bench/run.py)");
  if (!cli.parse(argc, argv)) return std::nullopt;
  if (f.schedule != "gpipe" && f.schedule != "1f1b" && f.schedule != "both") {
    throw dist::ConfigError("--schedule " + f.schedule + ": use gpipe, 1f1b or both");
  }
  // The library refuses it too (ScheduleOptions::batch_size); said here in the flags' words.
  if (f.dp > 1 && (f.batch_size % f.dp != 0 || (f.batch_size / f.dp) % f.microbatches != 0)) {
    throw dist::ConfigError("--microbatches " + std::to_string(f.microbatches) + " x --dp " +
                            std::to_string(f.dp) + " does not divide --batch-size " +
                            std::to_string(f.batch_size) +
                            ": each replica's micro-batches must have the same number of rows");
  }
  if (f.batch_size % f.microbatches != 0) {
    throw dist::ConfigError("--microbatches " + std::to_string(f.microbatches) +
                            " does not divide --batch-size " + std::to_string(f.batch_size) +
                            ": every micro-batch must have the same number of rows");
  }
  if (!f.mistake.empty() && f.mistake != "mismatched-widths") {
    throw dist::ConfigError("--mistake " + f.mistake + ": the only one is mismatched-widths");
  }
  f.init = cli.init_options();
  return f;
}

dist::SequentialSpec model_spec(const Flags& f) {
  std::vector<std::int64_t> widths = {kFeatures};
  for (int l = 1; l < f.layers; ++l) widths.push_back(f.hidden);
  widths.push_back(kOutputs);
  return dist::mlp_spec(widths, /*seed=*/16);
}

namespace {

float feature(std::int64_t i, std::int64_t j) {
  return static_cast<float>(static_cast<double>((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0);
}

}  // namespace

dist::Tensor inputs(std::int64_t first_sample, std::int64_t rows) {
  std::vector<float> x;
  for (std::int64_t i = first_sample; i < first_sample + rows; ++i)
    for (std::int64_t j = 0; j < kFeatures; ++j) x.push_back(feature(i, j));
  return dist::Tensor::from(x);
}

dist::Tensor targets(std::int64_t first_sample, std::int64_t rows) {
  std::vector<float> y;
  for (std::int64_t i = first_sample; i < first_sample + rows; ++i) {
    for (std::int64_t k = 0; k < kOutputs; ++k) {
      double sum = 0;
      for (std::int64_t j = 0; j < kFeatures; ++j)
        sum += static_cast<double>(feature(i, j)) * static_cast<double>((3 * k + 5 * j) % 7 - 3);
      y.push_back(static_cast<float>(sum / 16.0));
    }
  }
  return dist::Tensor::from(y);
}

std::vector<std::vector<float>> values(const std::vector<dist::Parameter*>& params) {
  std::vector<std::vector<float>> out;
  for (dist::Parameter* p : params) out.push_back(p->data.to_vector<float>());
  return out;
}

Trained train_one_process(const dist::SequentialSpec& spec, const Flags& f, int replica,
                          dist::ProcessGroup* dp) {
  const dist::Device device = dist::get_device();
  dist::Sequential model(spec, device);  // the unsplit model: the reference
  dist::SGD sgd(model.parameters(), f.lr);
  Trained t;
  const std::int64_t replica_rows = f.batch_size / f.dp, rows = replica_rows / f.microbatches;
  for (int step = 0; step < f.steps; ++step) {
    sgd.zero_grad();
    const std::int64_t first = std::int64_t{step} * f.batch_size + replica * replica_rows;
    double sum = 0;
    for (int i = 0; i < f.microbatches; ++i) {
      const dist::Tensor out = model.forward(inputs(first + i * rows, rows).to(device));
      const dist::MseLoss loss = dist::mse_loss(out, targets(first + i * rows, rows).to(device));
      sum += loss.loss;
      model.backward(loss.grad);
    }
    if (f.microbatches > 1)
      for (dist::Parameter* p : model.parameters()) p->grad /= static_cast<double>(f.microbatches);
    // DDP's mean over the replicas, written here apart from average_gradients so that a slip in
    // that one shows: each parameter's all_reduce has the same size on every "dp" group, so it
    // sums the replicas in the same order as the stages' on theirs; then / N.
    if (dp != nullptr && dp->size() > 1) {
      for (dist::Parameter* p : model.parameters()) {
        dp->all_reduce(p->grad, dist::ReduceOp::SUM);
        p->grad /= dp->size();
      }
    }
    sgd.step();
    t.losses.push_back(dp != nullptr ? mean_over(*dp, sum / f.microbatches) : sum / f.microbatches);
  }
  t.params = values(model.parameters());
  return t;
}

std::vector<std::vector<float>> stage_part(const Trained& whole, const dist::SequentialSpec& spec,
                                           dist::LayerRange range) {
  int before = 0, inside = 0;
  for (int i = 0; i < range.end; ++i) {
    if (spec.layers[static_cast<std::size_t>(i)].kind != dist::LayerSpec::Kind::kLinear) continue;
    (i < range.begin ? before : inside) += 1;
  }
  return {whole.params.begin() + 2 * before, whole.params.begin() + 2 * (before + inside)};
}

namespace {

// |a - b| relative to max(1, |b|); 0 when both diverged (inf or NaN).
double difference(double a, double b) {
  if (!std::isfinite(a) && !std::isfinite(b)) return 0;
  const double d = std::fabs(a - b) / std::max(1.0, std::fabs(b));
  return std::isnan(d) ? HUGE_VAL : d;
}

}  // namespace

double largest_difference(const std::vector<std::vector<float>>& a,
                          const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    for (std::size_t j = 0; j < std::min(a[i].size(), b[i].size()); ++j)
      worst = std::max(worst, difference(a[i][j], b[i][j]));
  return worst;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    worst = std::max(worst, difference(a[i], b[i]));
  return worst;
}

double max_over_ranks(double value) {
  dist::Tensor t = dist::full(1, value, dist::kFloat64, dist::get_device());
  dist::default_group().all_reduce(t, dist::ReduceOp::MAX);
  return t.item(0);
}

void average_gradients(const std::vector<dist::Parameter*>& params, dist::ProcessGroup& dp) {
  for (dist::Parameter* p : params) {
    dp.all_reduce(p->grad, dist::ReduceOp::SUM);
    p->grad /= dp.size();
  }
}

double mean_over(dist::ProcessGroup& dp, double value) {
  if (dp.size() == 1) return value;
  dist::Tensor mean = dist::full(1, value / dp.size(), dist::kFloat64, dist::get_device());
  dp.all_reduce(mean, dist::ReduceOp::SUM);
  return mean.item(0);
}

void print_replicas(dist::DeviceMesh& mesh, const Flags& f) {
  dist::out0() << "mesh " << mesh.str() << ": a row is a replica's pipeline (\"pp\"), a column "
               << "a \"dp\" group";
  if (mesh.coordinate("pp") != 0) return;
  const int d = mesh.coordinate("dp");
  const std::int64_t rows = f.batch_size / f.dp;
  std::string ranks;
  for (int r : mesh.group("pp").ranks()) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  dist::out() << "replica " << d << " of " << f.dp << ": stages on ranks [" << ranks << "], rows "
              << d * rows << ".." << (d + 1) * rows - 1 << " of each batch of " << f.batch_size;
}

bool same_bits(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].size() != b[i].size() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

std::string describe_layers(const dist::SequentialSpec& spec, dist::LayerRange range) {
  std::string text;
  for (int i = range.begin; i < range.end; ++i) {
    const dist::LayerSpec& l = spec.layers[static_cast<std::size_t>(i)];
    if (!text.empty()) text += ", ";
    text += l.kind == dist::LayerSpec::Kind::kReLU
                ? std::string("ReLU")
                : "Linear(" + std::to_string(l.in_features) + ", " +
                      std::to_string(l.out_features) + ")";
  }
  return text;
}

std::string widths(const dist::SequentialSpec& spec) {
  std::string text;
  for (const dist::LayerSpec& l : spec.layers) {
    if (l.kind != dist::LayerSpec::Kind::kLinear) continue;
    if (text.empty()) text = std::to_string(l.in_features);
    text += "-" + std::to_string(l.out_features);
  }
  return text;
}

std::string loss6(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string sci(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

std::string percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100 * fraction);
  return text;
}

}  // namespace ch16
