// Chapter 09's support code (see support.h): flags, the data set, checkpoints, printing.
#include "support.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ch09 {
namespace {

const std::string kSource = "/usr/share/datasets/fashion-mnist";

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

std::vector<unsigned char> read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw dist::ConfigError(path +
                            " cannot be read: this chapter's data set comes from Debian's "
                            "dataset-fashion-mnist package (sudo apt-get install "
                            "dataset-fashion-mnist)");
  }
  std::vector<unsigned char> bytes;
  unsigned char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  gzclose(f);
  if (n < 0) throw dist::Error(path + " is not a readable gzip file: reinstall the package");
  return bytes;
}

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

// The first `count` images of an IDX pair (magic 2051 for images, 2049 for labels), each 28x28
// picture shrunk to 14x14 by averaging 2x2 blocks, scaled to [0, 1].
Images read_idx(const std::string& prefix, std::int64_t count) {
  const std::vector<unsigned char> img = read_gzip(prefix + "-images-idx3-ubyte.gz");
  const std::vector<unsigned char> lab = read_gzip(prefix + "-labels-idx1-ubyte.gz");
  if (img.size() < 16 || big_endian(&img[0]) != 2051 || big_endian(&img[8]) != 28 ||
      big_endian(&img[12]) != 28 || lab.size() < 8 || big_endian(&lab[0]) != 2049) {
    throw dist::Error(prefix + "-*-ubyte.gz are not the IDX files of 28x28 images expected");
  }
  const std::int64_t available = std::min(big_endian(&img[4]), big_endian(&lab[4]));
  if (count > available) {
    throw dist::ConfigError(prefix + " has " + std::to_string(available) + " images, fewer than " +
                            "the " + std::to_string(count) + " asked for");
  }
  Images out;
  for (std::int64_t i = 0; i < count; ++i) {
    const unsigned char* picture = &img[16 + static_cast<std::size_t>(i) * 28 * 28];
    for (std::int64_t r = 0; r < kSide; ++r) {
      for (std::int64_t c = 0; c < kSide; ++c) {
        const int sum = picture[2 * r * 28 + 2 * c] + picture[2 * r * 28 + 2 * c + 1] +
                        picture[(2 * r + 1) * 28 + 2 * c] + picture[(2 * r + 1) * 28 + 2 * c + 1];
        out.pixels.push_back(static_cast<float>(sum) / (4 * 255.0f));
      }
    }
    out.labels.push_back(lab[8 + static_cast<std::size_t>(i)]);
  }
  return out;
}

template <typename T>
void append(std::string& out, const std::vector<T>& values) {
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Reads values.size() values; a file that ends first is an error naming it and what to do.
template <typename T>
void take(std::istream& in, std::vector<T>& values, const std::string& path,
          const std::string& what_to_do) {
  if (!in.read(reinterpret_cast<char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(T)))) {
    throw dist::Error(path + " is shorter than its header says: " + what_to_do);
  }
}

}  // namespace

bool Flags::default_run() const {
  const Flags d;
  return train_samples == d.train_samples && test_samples == d.test_samples &&
         batch_size == d.batch_size && epochs == d.epochs && seed == d.seed &&
         accumulate == d.accumulate && lr == d.lr && sync_bn == d.sync_bn &&
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
  check_paths(f);
  return f;
}

std::string prepared_path(const Flags& f) {
  return f.data_dir + "/fashion-mnist-14x14-" + std::to_string(f.train_samples) + "-" +
         std::to_string(f.test_samples) + ".bin";
}

void prepare(const std::string& path, std::int64_t train, std::int64_t test) {
  const Images a = read_idx(kSource + "/train", train), b = read_idx(kSource + "/t10k", test);
  std::string bytes = "FMNIST14";
  append(bytes, std::vector<std::int64_t>{train, test});
  append(bytes, a.pixels);
  append(bytes, a.labels);
  append(bytes, b.pixels);
  append(bytes, b.labels);
  dist::write_file_atomically(path, bytes);
  dist::write_stderr("[rank " + std::to_string(dist::get_rank()) + "/" +
                     std::to_string(dist::get_world_size()) + "] prepared " + path + "\n");
}

std::pair<Images, Images> load(const std::string& path, std::int64_t train, std::int64_t test) {
  const std::string remade = "delete it, and it is made again";
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  std::vector<std::int64_t> sizes(2);
  if (!in.read(magic, 8) || std::memcmp(magic, "FMNIST14", 8) != 0) {
    throw dist::Error(path + " is not a prepared data file: " + remade);
  }
  take(in, sizes, path, remade);
  if (sizes[0] != train || sizes[1] != test) throw dist::Error(path + " holds other sizes");
  std::pair<Images, Images> sets;
  for (auto [set, n] : {std::pair{&sets.first, train}, std::pair{&sets.second, test}}) {
    set->pixels.resize(static_cast<std::size_t>(n * kPixels));
    set->labels.resize(static_cast<std::size_t>(n));
    take(in, set->pixels, path, remade);
    take(in, set->labels, path, remade);
  }
  return sets;
}

dist::LinearInit uniform_init(std::int64_t in, std::int64_t out, dist::Generator& g) {
  const double bound = 1 / std::sqrt(static_cast<double>(in));
  const auto draws = [&](std::int64_t n) {
    std::vector<float> values;
    for (std::int64_t k : dist::randint(0, 1 << 24, n, g).to_vector<std::int64_t>()) {
      values.push_back(static_cast<float>((static_cast<double>(k) / (1 << 24) * 2 - 1) * bound));
    }
    return values;
  };
  dist::LinearInit init;
  init.weight = draws(in * out);
  init.bias = draws(out);
  return init;
}

std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Images& set, const Indices& batch,
                                                    dist::Device device, dist::Generator* flips) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i : batch) {
    const bool mirror = flips != nullptr && flips->random() % 2 == 1;
    for (std::int64_t r = 0; r < kSide; ++r) {
      for (std::int64_t c = 0; c < kSide; ++c) {
        x.push_back(set.pixels[i * kPixels + r * kSide + (mirror ? kSide - 1 - c : c)]);
      }
    }
    y.push_back(set.labels[i]);
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
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

std::string fixed4(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

std::string percent(std::int64_t part, std::int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * static_cast<double>(part) / whole);
  return text;
}

}  // namespace ch09
