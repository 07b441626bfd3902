// Chapter 12's support code (see support.h): flags and printing.
#include "support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace ch12 {

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
  cli.add_double("--bucket-mb", &f.bucket_mb, "stage 0: DDP's gradient bucket size in MiB", 0.2,
                 1024);
  cli.add_string("--data-dir", &f.data_dir, "where rank 0 writes the prepared data");
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

std::string grouped(std::int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
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
  if (a.size() != b.size()) return {INFINITY, false};
  Compared c;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    c.largest = std::max(c.largest, diff);
    c.close = c.close && diff <= 1e-5 + 1.3e-6 * std::fabs(static_cast<double>(b[i]));
  }
  return c;
}

}  // namespace ch12
