// Chapter 09's support code (see support.h): flags, the data set, checkpoints, printing, hooks.
#include "support.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ch09 {
namespace {

// Every path the run will write: its directory is created, and must be writable.
void check_paths(const Flags& f) {
  const auto directory = [](const std::string& flag, const std::filesystem::path& dir) {
    const std::filesystem::path where = dir.empty() ? "." : dir;
    std::error_code ec;
    std::filesystem::create_directories(where, ec);
    if (ec || ::access(where.c_str(), W_OK) != 0) {
      throw dist::ConfigError(flag + ": the directory " + dir.string() +
                              " cannot be created or written (" +
                              (ec ? ec.message() : std::string("not writable")) + ")");
    }
  };
  directory("--data-dir", f.data_dir);
  if (!f.trace_dir.empty()) directory("--trace", f.trace_dir);
  if (!f.checkpoint.empty()) {
    directory("--checkpoint", std::filesystem::path(f.checkpoint).parent_path());
  }
  if (f.resume && f.checkpoint.empty()) throw dist::ConfigError("--resume needs --checkpoint PATH");
  if (f.resume && !std::filesystem::exists(f.checkpoint)) {
    throw dist::ConfigError("--resume: " + f.checkpoint + " does not exist; run once with " +
                            "--checkpoint " + f.checkpoint + " first");
  }
}

}  // namespace

bool Flags::default_run() const {
  const Flags d;
  return train_samples == d.train_samples && test_samples == d.test_samples &&
         batch_size == d.batch_size && epochs == d.epochs && seed == d.seed &&
         accumulate == d.accumulate && lr == d.lr && sync_bn == d.sync_bn &&
         (comm_hook.empty() || comm_hook == "allreduce") &&
         (stop_after == 0 || stop_after >= epochs);
}

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch09_ddp_classifier",
                "Train a Fashion-MNIST classifier with DDP, SyncBatchNorm, gradient buckets, a "
                "cosine learning-rate schedule, checkpoints and a timeline.");
  cli.add_int("--train-samples", &f.train_samples, "training images (of 60000)", 64, 60000);
  cli.add_int("--test-samples", &f.test_samples, "held-out test images (of 10000)", 1, 10000);
  cli.add_int("--batch-size", &f.batch_size, "images per batch on each rank", 2, 4096);
  cli.add_int("--epochs", &f.epochs, "passes over the training images", 1, 100);
  cli.add_double("--lr", &f.lr, "SGD's first learning rate (cosine to 0 by the end)", 1e-6, 10);
  cli.add_int("--seed", &f.seed, "initial weights (seed + rank) and augmentation", 0, 1000000);
  cli.add_double("--bucket-mb", &f.bucket_mb, "DDP's gradient bucket size in MiB", 1e-4, 1024);
  cli.add_flag("--overlap", &f.overlap, "all_reduce buckets during backward", "--no-overlap");
  cli.add_int("--accumulate", &f.accumulate, "batches per optimizer step (no_sync)", 1, 64);
  cli.add_flag("--sync-bn", &f.sync_bn, "BatchNorm over the global batch", "--no-sync-bn");
  cli.add_string("--comm-hook", &f.comm_hook,
                 "DDP communication hook: allreduce, fp16, bf16 or powersgd; none is DDP's "
                 "own averaging");
  cli.add_int("--powersgd-rank", &f.powersgd_rank, "PowerSGD's matrix_approximation_rank", 1, 64);
  cli.add_int("--powersgd-start-iter", &f.powersgd_start_iter,
              "PowerSGD's start_powerSGD_iter: the steps before it use allreduce (torch: 1000)", 2,
              1000000);
  cli.add_string("--data-dir", &f.data_dir, "where rank 0 writes the prepared data");
  cli.add_string("--checkpoint", &f.checkpoint, "rank 0 saves here after every epoch");
  cli.add_int("--stop-after", &f.stop_after,
              "stop after this epoch, as a job killed there would (0: never); then --resume", 0,
              100);
  cli.add_flag("--resume", &f.resume, "start from --checkpoint's epoch and weights");
  cli.add_flag("--throughput", &f.throughput,
               "also print the training steps' samples per second (for bench/run.py)");
  cli.add_string("--trace", &f.trace_dir, "each rank writes DIR/rankR.json (Chrome trace)");
  cli.add_double("--min-accuracy", &f.min_accuracy,
                 "also require this held-out accuracy (the default run is held to 0.75)", 0, 1);
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  if (!f.comm_hook.empty() && f.comm_hook != "allreduce" && f.comm_hook != "fp16" &&
      f.comm_hook != "bf16" && f.comm_hook != "powersgd") {
    throw dist::ConfigError("--comm-hook: want allreduce, fp16, bf16 or powersgd, got '" +
                            f.comm_hook + "'");
  }
  check_paths(f);
  return f;
}

std::string register_comm_hook(const Flags& f, dist::DistributedDataParallel& ddp,
                               std::optional<dist::PowerSGDState>& powersgd) {
  if (f.comm_hook.empty()) return "";
  dist::ProcessGroup& group = dist::default_group();
  std::string name = f.comm_hook;
  if (f.comm_hook == "allreduce") ddp.register_comm_hook(group, dist::allreduce_hook);
  if (f.comm_hook == "fp16") ddp.register_comm_hook(group, dist::fp16_compress_hook);
  if (f.comm_hook == "bf16") ddp.register_comm_hook(group, dist::bf16_compress_hook);
  if (f.comm_hook == "powersgd") {
    powersgd.emplace(dist::PowerSGDOptions{.matrix_approximation_rank = f.powersgd_rank,
                                           .start_powerSGD_iter = f.powersgd_start_iter});
    ddp.register_comm_hook(*powersgd, dist::powerSGD_hook);
    name += " (rank " + std::to_string(f.powersgd_rank) + " from step " +
            std::to_string(f.powersgd_start_iter) + ")";
  }
  return "; comm hook " + name;
}

void save_checkpoint(const std::string& path, const std::vector<dist::Tensor*>& state,
                     std::int64_t epochs_planned, std::int64_t epochs_done) {
  std::string bytes = "DDPCKPT2";
  append(bytes, std::vector<std::int64_t>{epochs_planned, epochs_done});
  for (const dist::Tensor* t : state) {
    append(bytes, std::vector<std::int64_t>{t->numel()});
    append(bytes, t->to_vector<float>());
  }
  dist::write_file_atomically(path, bytes);
}

std::int64_t load_checkpoint(const std::string& path, const std::vector<dist::Tensor*>& state,
                             std::int64_t epochs_planned) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  std::vector<std::int64_t> epochs(2), count(1);  // planned, done
  if (!in.read(magic, 8) || std::memcmp(magic, "DDPCKPT2", 8) != 0) {
    throw dist::ConfigError("--resume: " + path + " is not a checkpoint of this chapter (or " +
                            "does not exist); run once with --checkpoint " + path + " first");
  }
  const std::string broken = "the checkpoint is damaged; resume from another, or start again";
  take(in, epochs, path, broken);
  if (epochs[0] < 1 || epochs[0] > 100 || epochs[1] < 0 || epochs[1] > epochs[0]) {
    throw dist::ConfigError(path + " says " + std::to_string(epochs[1]) + " of " +
                            std::to_string(epochs[0]) +
                            " epochs were done, which no run of this chapter writes: " + broken);
  }
  if (epochs[0] != epochs_planned) {
    throw dist::ConfigError("--resume: " + path + " was written by a run of " +
                            std::to_string(epochs[0]) + " epochs, whose learning rate anneals " +
                            "over those; resume it with --epochs " + std::to_string(epochs[0]) +
                            ", or start again without --resume");
  }
  for (dist::Tensor* t : state) {
    take(in, count, path, broken);
    if (count[0] != t->numel()) throw dist::ConfigError(path + " holds a model of another size");
    std::vector<float> values(static_cast<std::size_t>(count[0]));
    take(in, values, path, broken);
    *t = dist::Tensor::from(values, t->device());
  }
  return epochs[1];
}

bool same_on_every_rank(const std::string& fingerprint, dist::Device device) {
  const auto mine = static_cast<std::int64_t>(std::stoull(fingerprint, nullptr, 16));
  std::vector<dist::Tensor> everyone;
  dist::all_gather(everyone, dist::Tensor::from<std::int64_t>({mine}, device));
  bool same = true;
  for (const dist::Tensor& each : everyone) same = same && each.equal(everyone[0]);
  return same;
}

void progress(int epoch, int epochs, std::size_t step, std::size_t steps, double loss) {
  static const bool tty = ::isatty(2) == 1;
  if (!tty || dist::get_rank() != 0) return;
  const std::size_t filled = 30 * (step + 1) / steps;
  char text[160];
  std::snprintf(text, sizeof text, "\r[rank 0/%d] epoch %d/%d [%s%s] %zu/%zu loss %.4f%s",
                dist::get_world_size(), epoch + 1, epochs, std::string(filled, '#').c_str(),
                std::string(30 - filled, '.').c_str(), step + 1, steps, loss,
                step + 1 == steps ? "\r\033[K" : "");
  dist::write_stderr(text);
}

std::string rate(double lr) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", lr);
  return text;
}

int verdict(int rank, bool job_ok, bool identical, bool once, bool reached, double floor) {
  const auto yes = [](bool b) { return b ? "yes" : "no"; };
  const std::string floor_text = percent(std::llround(floor * 1e4), 10000);
  if (!job_ok) {
    dist::out0() << "MISMATCH: replicas identical " << yes(identical)
                 << ", every test image counted once " << yes(once) << ", accuracy floor "
                 << floor_text << " reached " << yes(reached);
    return rank == 0 ? dist::kExitFailure : dist::kExitOk;
  }
  dist::out0() << "OK: the replicas are bit-identical, every test image was counted once, and "
               << (floor > 0 ? "the accuracy reached the floor of " + floor_text
                             : "the accuracy is reported, not judged (the floor is known for "
                               "the default run only)");
  return dist::kExitOk;
}

}  // namespace ch09
