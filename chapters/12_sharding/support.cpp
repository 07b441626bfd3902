// Chapter 12's support code (see support.h): flags and printing.
#include "support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <dist/sampler.h>

namespace ch12 {

Mlp::Mlp(dist::Generator& g, dist::Device device) {
  layers.reserve(kLayers);
  for (std::size_t l = 0; l < kLayers; ++l) {
    const std::int64_t in = kWidths[l], out = kWidths[l + 1];
    layers.emplace_back(in, out, ch09::uniform_init(in, out, g), device);
  }
}

std::vector<std::vector<dist::Parameter*>> Mlp::units() {
  std::vector<std::vector<dist::Parameter*>> all;
  for (dist::Linear& layer : layers) all.push_back(layer.parameters());
  return all;
}

std::vector<dist::Parameter*> Mlp::parameters() {
  std::vector<dist::Parameter*> all;
  for (dist::Linear& layer : layers) {
    for (dist::Parameter* p : layer.parameters()) all.push_back(p);
  }
  return all;
}

std::vector<std::int64_t> unit_numels() {
  std::vector<std::int64_t> n;
  for (std::size_t l = 0; l < kLayers; ++l)
    n.push_back(kWidths[l] * kWidths[l + 1] + kWidths[l + 1]);
  return n;
}

Held ideal(int stage, int world) {
  std::int64_t psi = 0, c = 0;
  for (std::int64_t n : unit_numels()) {
    psi += n;
    c += (n + world - 1) / world;
  }
  switch (stage) {
    case 0:
      return {4 * psi, 4 * psi, 8 * psi};
    case 1:
      return {4 * psi, 4 * psi, 8 * c};
    case 2:
      return {4 * psi, 4 * c, 8 * c};
    default:
      return {4 * c, 4 * c, 8 * c};
  }
}

Held measured(Mlp& model, const dist::ShardedDataParallel* sharded, const dist::Adam& adam) {
  Held h{.state = adam.state_bytes()};
  if (sharded != nullptr) {
    const dist::ShardedDataParallel::Memory m = sharded->memory();
    h.parameters = m.parameters + m.shards;
    h.gradients = m.gradients + m.shard_gradients;
    return h;
  }
  for (dist::Parameter* p : model.parameters()) {
    h.parameters += static_cast<std::int64_t>(p->data.nbytes());
    h.gradients += static_cast<std::int64_t>(p->grad.nbytes());
  }
  return h;
}

Held expected(int stage, int world) {
  Held h = ideal(stage, world);
  if (stage == 0) return h;
  const auto e = dist::ShardedDataParallel::expected_memory(stage, unit_numels(), world);
  h.parameters = e.parameters + e.shards;
  h.gradients = e.gradients + e.shard_gradients;
  return h;
}

std::int64_t bucket_bytes(const dist::DistributedDataParallel& ddp) {
  std::int64_t bytes = 0;
  for (const auto& bucket : ddp.buckets())
    bytes += static_cast<std::int64_t>(bucket.buffer.nbytes());
  return bytes;
}

SameOrderDdp::SameOrderDdp(Mlp& model) : model_(&model) {
  for (dist::Parameter* p : model.parameters()) dist::broadcast(p->data, 0);
}

void SameOrderDdp::average_gradients() {
  const int world = dist::get_world_size();
  dist::ProcessGroup& group = dist::default_group();
  for (const std::vector<dist::Parameter*>& unit : model_->units()) {
    std::int64_t n = 0;
    for (const dist::Parameter* p : unit) n += p->grad.numel();
    const std::int64_t c = (n + world - 1) / world;  // the stages' chunk, padding included
    dist::Tensor flat(c * world, dist::kFloat32, unit[0]->grad.device());
    dist::Tensor chunk(c, dist::kFloat32, unit[0]->grad.device());
    std::int64_t at = 0;
    for (const dist::Parameter* p : unit) {
      flat.assign_slice(at, p->grad / world);  // divided before the sum, as the stages divide
      at += p->grad.numel();
    }
    group.reduce_scatter_tensor(chunk, flat);  // chunk r: the sum, in the ring's order
    group.all_gather_into_tensor(flat, chunk);
    at = 0;
    for (dist::Parameter* p : unit) {
      const std::int64_t numel = p->grad.numel();
      p->grad = flat.slice(at, numel);
      at += numel;
    }
  }
}

Traffic ddp_traffic(const dist::DistributedDataParallel& ddp, int world) {
  Traffic t;
  const bool gloo = dist::get_backend() == "gloo";
  for (const auto& bucket : ddp.buckets()) {
    const std::int64_t bytes = 4 * bucket.numel;
    if (gloo && bytes <= 128 * 1024) {
      t.bytes += bytes * (world - 1);
    } else {
      t.bytes += 2 * bytes * (world - 1) / world;
      t.slack += world > 1 ? 2 * 4 : 0;
    }
  }
  return t;
}

Held mixed_precision(int stage, int world) {
  const Held fp32 = ideal(stage, world);  // 4 a value each, 8 of Adam's state
  return {fp32.parameters / 2, fp32.gradients / 2, fp32.state / 8 * 12};
}

std::int64_t half_step_bytes(int stage, int world) {
  dist::ProcessGroup& group = dist::default_group();
  const std::int64_t before = group.bytes_sent();
  for (std::int64_t n : unit_numels()) {
    const std::int64_t c = (n + world - 1) / world;
    dist::Tensor flat(c * world, dist::kBFloat16, dist::get_device());
    dist::Tensor chunk(c, dist::kBFloat16, dist::get_device());
    group.reduce_scatter_tensor(chunk, flat);
    for (int gather = 0; gather < (stage == 3 ? 2 : 1); ++gather) {
      group.all_gather_into_tensor(flat, chunk);
    }
  }
  return group.bytes_sent() - before;
}

bool print_tables(int run_stage, int run_world, bool mixed) {
  dist::out0() << "per-rank bytes of model state, fp32 Adam, ZeRO's closed forms (Ψ values, c = "
                  "Σ⌈n_u/W⌉ ≈ Ψ/W; stage 3 also holds one layer whole during its turn):";
  dist::out0()
      << "  stage      parameters  gradients  Adam state         W=1         W=2         W=4";
  const char* rows[] = {"  0 (DDP)    4Ψ          4Ψ         8Ψ        ",
                        "  1          4Ψ          4Ψ         8c        ",
                        "  2          4Ψ          4c         8c        ",
                        "  3          4c          4c         8c        "};
  for (int stage = 0; stage <= 3; ++stage) {
    std::string line = rows[stage];
    for (int w : {1, 2, 4}) {
      const std::string cell = grouped(ideal(stage, w).total());
      line += std::string(12 - std::min<std::size_t>(cell.size(), 11), ' ') + cell;
    }
    dist::out0() << line;
  }
  if (!mixed) return true;
  dist::out0() << "mixed precision, ZeRO's section 3.1: fp16/bf16 parameters and gradients (2 + 2 "
                  "bytes a value), fp32 master weights and Adam's two moments (12): still 16Ψ "
                  "unsharded; each stage shards more of it:";
  dist::out0()
      << "  stage      half params half grads master+Adam         W=1         W=2         W=4";
  const char* halves[] = {"  0 (DDP)    2Ψ          2Ψ         12Ψ       ",
                          "  1          2Ψ          2Ψ         12c       ",
                          "  2          2Ψ          2c         12c       ",
                          "  3          2c          2c         12c       "};
  for (int s = 0; s <= 3; ++s) {
    std::string line = halves[s];
    for (int w : {1, 2, 4}) {
      const std::string cell = grouped(mixed_precision(s, w).total());
      line += std::string(12 - std::min<std::size_t>(cell.size(), 11), ' ') + cell;
    }
    dist::out0() << line;
  }
  // The traffic: what ZeRO sends is the gradients (reduce_scatter) and the parameters
  // (all_gather), both in half precision now: the same values, 2 bytes each instead of 4.
  std::int64_t psi = 0;
  for (std::int64_t n : unit_numels()) psi += n;
  const std::int64_t passes = run_stage == 3 ? 3 : 2, w = run_world;
  dist::out0() << "mixed precision at stage " << run_stage << ", W=" << w << ": "
               << grouped(mixed_precision(run_stage, w).total()) << " bytes of model state per "
               << "rank (fp32: " << grouped(ideal(run_stage, w).total()) << "); " << passes
               << "Ψ(W-1)/W values sent per step, 2 bytes each: "
               << grouped(2 * passes * psi * (w - 1) / w)
               << " bytes (fp32: " << grouped(4 * passes * psi * (w - 1) / w) << ")";
  const std::int64_t measured = half_step_bytes(run_stage, w);
  std::int64_t padded = 0;  // every layer padded to W chunks, as ShardedDataParallel lays it out
  for (std::int64_t n : unit_numels()) padded += 2 * passes * ((n + w - 1) / w) * (w - 1);
  dist::out0() << "bytes sent per rank per step in bfloat16, measured: " << grouped(measured)
               << " (with each layer's padding: " << grouped(padded) << ")";
  return measured == padded;
}

std::pair<std::int64_t, std::int64_t> evaluate(
    const ch09::Images& test, dist::Device device,
    const std::function<dist::Tensor(const dist::Tensor&)>& forward) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const ch09::Indices mine = dist::DistributedSampler(test.size(), {.shuffle = false}).indices();
  std::int64_t correct = 0, counted = 0, position = 0;
  for (const ch09::Indices& batch : dist::BatchSampler(mine, 250, false).batches()) {
    auto [x, y] = ch09::batch_tensors(test, batch, device, nullptr);
    const std::vector<float> logits = forward(x).to_vector<float>();
    for (std::size_t row = 0; row < batch.size(); ++row, ++position) {
      if (rank + position * world >= test.size()) continue;  // padding: counted by another rank
      const auto first = logits.begin() + static_cast<std::ptrdiff_t>(row * ch09::kClasses);
      const auto best = std::max_element(first, first + ch09::kClasses) - first;
      correct += best == test.labels[static_cast<std::size_t>(batch[row])] ? 1 : 0;
      ++counted;
    }
  }
  dist::Tensor counts = dist::Tensor::from<std::int64_t>({correct, counted}, device);
  dist::all_reduce(counts);
  return {static_cast<std::int64_t>(counts.item(0)), static_cast<std::int64_t>(counts.item(1))};
}

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch12_sharding",
                "Train a Fashion-MNIST MLP with Adam, sharded as ZeRO stage 1, 2 or 3 (FSDP) or "
                "not at all (stage 0: DDP); print per-rank memory and traffic beside their closed "
                "forms, and check that the weights end as DDP's do.");
  cli.add_int("--stage", &f.stage,
              "0: DDP; 1: optimizer state sharded; 2: and gradients; 3: and parameters (FSDP)", 0,
              3);
  cli.add_flag("--prefetch", &f.prefetch, "stage 3: gather the next layer while this one computes",
               "--no-prefetch");
  cli.add_flag("--check", &f.check,
               "also train with DDP from the same start, and compare the weights", "--no-check");
  cli.add_int("--train-samples", &f.train_samples, "training images (of 60000)", 64, 60000);
  cli.add_int("--test-samples", &f.test_samples, "held-out test images (of 10000)", 1, 10000);
  cli.add_int("--batch-size", &f.batch_size, "images per batch on each rank", 2, 4096);
  cli.add_int("--epochs", &f.epochs, "passes over the training images", 1, 100);
  cli.add_double("--lr", &f.lr, "Adam's learning rate", 1e-6, 1);
  cli.add_int("--seed", &f.seed, "initial weights (rank 0's draw) and the shuffle", 0, 1000000);
  cli.add_double("--bucket-mb", &f.bucket_mb, "stage 0: DDP's gradient bucket size in MiB", 1e-4,
                 1024);  // chapter 09's range
  cli.add_string("--data-dir", &f.data_dir, "where rank 0 writes the prepared data");
  cli.add_flag("--mixed-precision", &f.mixed_precision,
               "also print ZeRO's model state and traffic for fp16/bf16 training (2 + 2 + 12 bytes "
               "a value), and measure a step's collectives sent in bfloat16");
  cli.add_flag("--throughput", &f.throughput,
               "also print the training steps' samples per second (for bench/run.py)");
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  std::error_code ec;
  std::filesystem::create_directories(f.data_dir.empty() ? "." : f.data_dir, ec);
  if (ec || ::access(f.data_dir.empty() ? "." : f.data_dir.c_str(), W_OK) != 0) {
    throw dist::ConfigError("--data-dir: the directory " + f.data_dir +
                            " cannot be created or written (" +
                            (ec ? ec.message() : std::string("not writable")) + ")");
  }
  return f;
}

std::string stage_name(int stage) {
  switch (stage) {
    case 0:
      return "stage 0: nothing sharded (DDP)";
    case 1:
      return "stage 1: optimizer state sharded (ZeRO-1)";
    case 2:
      return "stage 2: optimizer state and gradients sharded (ZeRO-2)";
    default:
      return "stage 3: optimizer state, gradients and parameters sharded (ZeRO-3, FSDP)";
  }
}

std::string mib(std::int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string scientific(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

Compared compare(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) {
    return {static_cast<std::int64_t>(std::max(a.size(), b.size())), INFINITY};
  }
  Compared c;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) == 0) continue;
    ++c.differing;
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    c.largest = std::isnan(diff) ? INFINITY : std::max(c.largest, diff);
  }
  return c;
}

std::string describe(const Compared& c, std::size_t values) {
  return std::to_string(c.differing) + " of " + std::to_string(values) +
         " values differ, the largest by " + scientific(c.largest);
}

std::string fingerprint(const std::vector<float>& weights) {
  dist::Parameter all{.name = "weights", .data = dist::Tensor::from(weights), .grad = {}};
  return dist::fingerprint({&all});
}

}  // namespace ch12
