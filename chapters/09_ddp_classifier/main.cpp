// Chapter 09 — ddp_classifier: the capstone, a real training run with DistributedDataParallel.
//
// Post A trains ResNet50 on CIFAR-10 with DDP: a DistributedSampler with set_epoch shards the
// data and the model is wrapped in DDP, but every rank calls CIFAR10(download=True): on a first
// run W processes download into the same directory at once. This chapter does the same at a size
// that trains in seconds on two CPU cores: a two-layer classifier with SyncBatchNorm on
// Fashion-MNIST (Debian's dataset-fashion-mnist, 28x28 pictures of clothes in 10 classes,
// shrunk to 14x14). Everything a real run needs is here: rank 0 prepares the data once while the
// others wait, gradients travel in buckets that overlap with backward, no_sync() accumulates
// gradients, BatchNorm sees the global batch, evaluation counts every test image exactly once, a
// checkpoint is written atomically and resumed to the same bits, and every rank can write a
// timeline of its compute and communication.
//
// You will learn: how the pieces of chapters 04-08 make one training run; bucketing and overlap;
// gradient accumulation with no_sync(); SyncBatchNorm; evaluation without the sampler's padding;
// checkpoints that resume exactly; reading a Chrome trace of a DDP step.
// Builds on: chapter 05 (rank 0 first), 06 (per-rank seeds), 07 (samplers), 08 (DDP).
//
// Run:   ./tutorial run 09
//        (or: ddprun --standalone --nproc-per-node 2 ch09_ddp_classifier)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] epoch 1/4: train loss 0.8323, test accuracy 77.10%
//   [rank 0/2] held-out accuracy 81.05% on 2000 test images, each counted once
//   [rank 0/2] OK: the replicas are bit-identical and the accuracy reached the floor of 75.00%
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/sampler.h>
#include <dist/trace.h>
#include <dist/zero_first.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;
constexpr std::int64_t kSide = 14, kPixels = kSide * kSide, kClasses = 10, kHidden = 128;
const std::string kSource = "/usr/share/datasets/fashion-mnist";

struct Images {
  std::vector<float> pixels;  // size() * kPixels values in [0, 1], row after row
  std::vector<std::int64_t> labels;
  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
};

// ---- The data: what rank 0 prepares while the others wait --------------------------------------

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
// pixel picture shrunk to 14x14 by averaging 2x2 blocks, scaled to [0, 1].
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
const std::string kRemade = "delete it, and it is made again";

// --8<-- [start:prepare]
// One file with both sets, written whole or not at all (write_file_atomically): a rank that
// reads it never sees half of it, and a crash while writing leaves no broken file behind.
void prepare(const std::string& path, std::int64_t train, std::int64_t test) {
  const Images a = read_idx(kSource + "/train", train), b = read_idx(kSource + "/t10k", test);
  std::string bytes = "FMNIST14";
  append(bytes, std::vector<std::int64_t>{train, test});
  append(bytes, a.pixels);
  append(bytes, a.labels);
  append(bytes, b.pixels);
  append(bytes, b.labels);
  dist::write_file_atomically(path, bytes);
}
// --8<-- [end:prepare]

std::pair<Images, Images> load(const std::string& path, std::int64_t train, std::int64_t test) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  std::vector<std::int64_t> sizes(2);
  if (!in.read(magic, 8) || std::memcmp(magic, "FMNIST14", 8) != 0) {
    throw dist::Error(path + " is not a prepared data file: delete it, and it is remade");
  }
  take(in, sizes, path, kRemade);
  if (sizes[0] != train || sizes[1] != test) throw dist::Error(path + " holds other sizes");
  std::pair<Images, Images> sets;
  for (auto [set, n] : {std::pair{&sets.first, train}, std::pair{&sets.second, test}}) {
    set->pixels.resize(static_cast<std::size_t>(n * kPixels));
    set->labels.resize(static_cast<std::size_t>(n));
    take(in, set->pixels, path, kRemade);
    take(in, set->labels, path, kRemade);
  }
  return sets;
}

// ---- The model ---------------------------------------------------------------------------------

// nn.Linear's default initialisation, uniform in [-1/sqrt(in), 1/sqrt(in)), from torch.randint's
// draws of `g` (as twin.py draws them): the weights first, then the biases.
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

// 196 pixels -> Linear -> (Sync)BatchNorm -> ReLU -> Linear -> 10 logits.
struct Classifier {
  dist::Linear fc1, fc2;
  dist::BatchNorm1d bn;
  dist::ReLU relu;

  Classifier(dist::Generator& g, dist::Device device, dist::ProcessGroup* sync)
      : fc1(kPixels, kHidden, uniform_init(kPixels, kHidden, g), device),
        fc2(kHidden, kClasses, uniform_init(kHidden, kClasses, g), device),
        bn(kHidden, device, sync) {}

  std::vector<dist::Parameter*> parameters() {
    return {fc1.parameters()[0], fc1.parameters()[1], bn.parameters()[0],
            bn.parameters()[1],  fc2.parameters()[0], fc2.parameters()[1]};
  }
  std::vector<dist::Tensor*> buffers() { return {&bn.running_mean(), &bn.running_var()}; }
  dist::Tensor forward(const dist::Tensor& x) {
    return fc2.forward(relu.forward(bn.forward(fc1.forward(x))));
  }
  // --8<-- [start:backward]
  // Backward, layer by layer from the last; after each layer its gradients are final, and DDP
  // may start all-reducing a bucket that holds only finished ones while the layers below run.
  void backward(const dist::Tensor& grad, dist::DistributedDataParallel& ddp, dist::Timeline* t) {
    dist::Tensor g;
    {
      const dist::Timeline::Span s(t, "backward fc2");
      g = relu.backward(fc2.backward(grad));
    }
    ddp.grads_ready(fc2.parameters());
    {
      const dist::Timeline::Span s(t, "backward bn");
      g = bn.backward(g);  // SyncBatchNorm: an all_reduce on the default group, here
    }
    ddp.grads_ready(bn.parameters());
    {
      const dist::Timeline::Span s(t, "backward fc1");
      fc1.backward(g);
    }
    ddp.grads_ready(fc1.parameters());
    ddp.finish_gradient_sync();
  }
  // --8<-- [end:backward]
};

// A batch's pixels and labels on `device`. With `flips` (training), each picture is mirrored
// left-right with probability 1/2: a random augmentation, drawn from a per-rank generator.
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

// ---- Checkpoints -------------------------------------------------------------------------------

// "DDPCKPT1", the epochs done, then every parameter and buffer as (count, float32 values).
void save_checkpoint(const std::string& path, Classifier& model, std::int64_t epochs_done) {
  std::string bytes = "DDPCKPT1";
  append(bytes, std::vector<std::int64_t>{epochs_done});
  std::vector<dist::Tensor*> tensors = model.buffers();
  for (dist::Parameter* p : model.parameters()) tensors.push_back(&p->data);
  for (dist::Tensor* t : tensors) {
    append(bytes, std::vector<std::int64_t>{t->numel()});
    append(bytes, t->to_vector<float>());
  }
  dist::write_file_atomically(path, bytes);
}

std::int64_t load_checkpoint(const std::string& path, Classifier& model) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  std::vector<std::int64_t> epochs(1), count(1);
  if (!in.read(magic, 8) || std::memcmp(magic, "DDPCKPT1", 8) != 0) {
    throw dist::ConfigError("--resume: " + path + " is not a checkpoint of this chapter (or " +
                            "does not exist); run once with --checkpoint " + path + " first");
  }
  const std::string broken = "the checkpoint is damaged; resume from another, or start again";
  take(in, epochs, path, broken);
  if (epochs[0] < 0 || epochs[0] > 100) {
    throw dist::ConfigError(path + " says " + std::to_string(epochs[0]) +
                            " epochs were done, which no run of this chapter writes: " + broken);
  }
  std::vector<dist::Tensor*> tensors = model.buffers();
  for (dist::Parameter* p : model.parameters()) tensors.push_back(&p->data);
  for (dist::Tensor* t : tensors) {
    take(in, count, path, broken);
    if (count[0] != t->numel()) throw dist::ConfigError(path + " holds a model of another size");
    std::vector<float> values(static_cast<std::size_t>(count[0]));
    take(in, values, path, broken);
    *t = dist::Tensor::from(values, t->device());
  }
  return epochs[0];
}

// ---- Evaluation --------------------------------------------------------------------------------

// Every rank evaluates its shard of the test set, leaving out the sampler's padding (positions
// >= size), so that each test image counts exactly once; one all_reduce adds the counts.
// --8<-- [start:evaluate_shard]
std::pair<std::int64_t, std::int64_t> evaluate(Classifier& model, const Images& test,
                                               dist::Device device) {
  model.bn.train(false);
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const dist::DistributedSampler sampler(test.size(), {.shuffle = false});
  const Indices mine = sampler.indices();
  Indices kept;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    if (rank + static_cast<std::int64_t>(k) * world < test.size()) kept.push_back(mine[k]);
  }
  // --8<-- [end:evaluate_shard]
  std::int64_t correct = 0;
  for (const Indices& batch : dist::BatchSampler(kept, 256, false).batches()) {
    auto [x, y] = batch_tensors(test, batch, device, nullptr);
    correct += dist::cross_entropy(model.forward(x), y, kClasses).correct;
  }
  dist::Tensor counts =
      dist::Tensor::from<std::int64_t>({correct, static_cast<std::int64_t>(kept.size())}, device);
  dist::all_reduce(counts);
  model.bn.train(true);
  return {static_cast<std::int64_t>(counts.item(0)), static_cast<std::int64_t>(counts.item(1))};
}

// Rank 0's progress bar, on a terminal only (redrawn in place on stderr); nothing in a pipe.
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

// Every path the run will write, checked before anything starts, so that a typo is an error
// naming the flag (exit 2) rather than a failure after an hour of training.
void check_paths(const std::string& data_dir, const std::string& checkpoint, bool resume,
                 const std::string& trace_dir) {
  const auto directory = [](const std::string& flag, const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir.empty() ? "." : dir, ec);
    if (ec || ::access((dir.empty() ? "." : dir).c_str(), W_OK) != 0) {
      throw dist::ConfigError(flag + ": the directory " + dir.string() +
                              " cannot be created or written (" +
                              (ec ? ec.message() : std::string("not writable")) + ")");
    }
  };
  directory("--data-dir", data_dir);
  if (!trace_dir.empty()) directory("--trace", trace_dir);
  if (!checkpoint.empty()) {
    directory("--checkpoint", std::filesystem::path(checkpoint).parent_path());
  }
  if (resume && checkpoint.empty()) throw dist::ConfigError("--resume needs --checkpoint PATH");
  if (resume && !std::filesystem::exists(checkpoint)) {
    throw dist::ConfigError("--resume: " + checkpoint + " does not exist; run once with " +
                            "--checkpoint " + checkpoint + " first");
  }
}

std::string fixed4(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", v);
  return text;
}

std::string percent(std::int64_t part, std::int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * static_cast<double>(part) / whole);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags
    dist::Cli cli("ch09_ddp_classifier",
                  "Train a Fashion-MNIST classifier with DDP, SyncBatchNorm, gradient buckets, "
                  "checkpoints and a timeline, and check its held-out accuracy.");
    int train_n = 8000, test_n = 2000, batch_size = 32, epochs = 4, seed = 0, accumulate = 1;
    double lr = 0.1, bucket_mb = 0.005, floor = 0.75;
    bool overlap = true, sync_bn = true, resume = false, throughput = false;
    std::string data_dir = "data", checkpoint, trace_dir;
    cli.add_int("--train-samples", &train_n, "training images (of 60000)", 64, 60000);
    cli.add_int("--test-samples", &test_n, "held-out test images (of 10000)", 1, 10000);
    cli.add_int("--batch-size", &batch_size, "images per batch on each rank", 2, 4096);
    cli.add_int("--epochs", &epochs, "passes over the training images", 1, 100);
    cli.add_double("--lr", &lr, "SGD's learning rate", 1e-6, 10);
    cli.add_int("--seed", &seed, "initial weights (seed + rank) and augmentation", 0, 1000000);
    cli.add_double("--bucket-mb", &bucket_mb, "DDP's gradient bucket size in MiB", 1e-4, 1024);
    cli.add_flag("--overlap", &overlap, "all_reduce buckets during backward", "--no-overlap");
    cli.add_int("--accumulate", &accumulate, "batches per optimizer step (no_sync)", 1, 64);
    cli.add_flag("--sync-bn", &sync_bn, "BatchNorm over the global batch", "--no-sync-bn");
    cli.add_string("--data-dir", &data_dir, "where rank 0 writes the prepared data");
    cli.add_string("--checkpoint", &checkpoint, "rank 0 saves here after every epoch");
    cli.add_flag("--resume", &resume, "start from --checkpoint's epoch and weights");
    cli.add_flag("--throughput", &throughput,
                 "also print the training steps' samples per second (for bench/run.py)");
    cli.add_string("--trace", &trace_dir, "each rank writes DIR/rankR.json (Chrome trace)");
    cli.add_double("--min-accuracy", &floor, "the held-out accuracy to reach", 0, 1);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    check_paths(data_dir, checkpoint, resume, trace_dir);

    // ---- Step 1: join; rank 0 prepares the data while the others wait, then all read it
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    dist::Timeline timeline(rank);
    dist::Timeline* t = trace_dir.empty() ? nullptr : &timeline;
    if (t != nullptr) timeline.name_this_thread("main");
    // --8<-- [start:data_once]
    const std::string data = data_dir + "/fashion-mnist-14x14-" + std::to_string(train_n) + "-" +
                             std::to_string(test_n) + ".bin";
    {
      const dist::ZeroFirst rank0_first;  // post C's torch_distributed_zero_first
      if (rank0_first.leads() && !std::filesystem::exists(data)) {
        prepare(data, train_n, test_n);
        dist::write_stderr("[rank 0/" + std::to_string(world) + "] prepared " + data + "\n");
      }
    }
    const auto [train, test] = load(data, train_n, test_n);
    // --8<-- [end:data_once]
    dist::out0() << "Fashion-MNIST, 14x14: " << train.size() << " training and " << test.size()
                 << " test images, " << world << (world == 1 ? " rank" : " ranks") << ", batch "
                 << batch_size << " per rank";

    // --8<-- [start:model_ddp]
    // ---- Step 2: the model (its own seed per rank), then DDP: rank 0's weights everywhere
    dist::Generator init_gen(static_cast<std::uint64_t>(seed + rank));
    // SyncBatchNorm all_reduces on the default group, from the main thread; DDP's gradient
    // thread has a group of its own, so the two never mix their calls.
    Classifier model(init_gen, device, sync_bn ? &dist::default_group() : nullptr);
    int first_epoch = 0;
    if (resume) first_epoch = static_cast<int>(load_checkpoint(checkpoint, model));
    // NCCL forbids two threads issuing operations on one GPU at once, even on two communicators,
    // and SyncBatchNorm's backward runs while DDP's thread all-reduces: with both, no overlap.
    const bool nccl_sync_bn = sync_bn && dist::get_backend() == "nccl";
    auto ddp = std::make_unique<dist::DistributedDataParallel>(
        model.parameters(),
        dist::DdpOptions{
            .bucket_cap_mb = bucket_mb, .overlap = overlap && !nccl_sync_bn, .timeline = t});
    // --8<-- [end:model_ddp]
    dist::out0() << "DDP: " << ddp->buckets().size() << " gradient buckets of at most " << bucket_mb
                 << " MiB, " << (ddp->overlapping() ? "overlapping" : "after")
                 << " backward; BatchNorm " << (sync_bn ? "synchronised" : "per rank")
                 << (resume ? "; resumed after epoch " + std::to_string(first_epoch) : "");
    dist::SGD optimizer(model.parameters(), lr);

    // ---- Step 3: train; every `accumulate` batches make one step
    dist::DistributedSampler sampler(train.size(), {.seed = seed});
    std::optional<std::pair<std::int64_t, std::int64_t>> evaluated;    // the last epoch's
    auto training_time = std::chrono::steady_clock::duration::zero();  // steps only (--throughput)
    std::int64_t trained = 0;                                          // samples, this rank
    for (int epoch = first_epoch; epoch < epochs; ++epoch) {
      const auto epoch_started = std::chrono::steady_clock::now();
      sampler.set_epoch(epoch);
      // Per rank and per epoch, so a resumed run draws what the uninterrupted one drew.
      dist::Generator flips(static_cast<std::uint64_t>(seed) * 1000003 + epoch * 1009 + rank + 1);
      const auto batches = dist::BatchSampler(sampler, batch_size, false).batches();
      double loss_sum = 0;
      for (std::size_t step = 0; step < batches.size(); ++step) {
        // --8<-- [start:no_sync]
        const bool sync = (step + 1) % accumulate == 0 || step + 1 == batches.size();
        std::optional<dist::DistributedDataParallel::NoSync> local;
        if (!sync) local.emplace(*ddp);  // torch: with ddp.no_sync():
        // --8<-- [end:no_sync]
        auto [x, y] = batch_tensors(train, batches[step], device, &flips);
        dist::CrossEntropy loss;
        {
          const dist::Timeline::Span s(t, "forward");
          loss = dist::cross_entropy(model.forward(x), y, kClasses);
        }
        // --8<-- [start:accumulate_step]
        // Each loss counts 1/K of the step: the step is then the mean over its K batches. The
        // epoch's last group may hold fewer than K; it is the mean over those.
        const std::size_t group =
            std::min<std::size_t>(accumulate, batches.size() - step / accumulate * accumulate);
        if (group > 1) loss.grad *= 1.0 / static_cast<double>(group);
        model.backward(loss.grad, *ddp, t);
        if (sync) {
          const dist::Timeline::Span s(t, "optimizer step");
          optimizer.step();
          optimizer.zero_grad();
        }
        // --8<-- [end:accumulate_step]
        loss_sum += loss.loss;
        progress(epoch, epochs, step, batches.size(), loss_sum / static_cast<double>(step + 1));
      }

      training_time += std::chrono::steady_clock::now() - epoch_started;
      for (const auto& b : batches) trained += static_cast<std::int64_t>(b.size());

      // ---- Step 4: evaluate on the held-out images; rank 0 checkpoints
      // --8<-- [start:epoch_end]
      dist::Tensor mean_loss = dist::full(1, loss_sum / batches.size(), dist::kFloat64, device);
      dist::all_reduce(mean_loss);
      evaluated = evaluate(model, test, device);
      const auto [correct, counted] = *evaluated;
      dist::out0() << "epoch " << epoch + 1 << "/" << epochs << ": train loss "
                   << fixed4(mean_loss.item(0) / world) << ", test accuracy "
                   << percent(correct, counted);
      if (!checkpoint.empty() && rank == 0) save_checkpoint(checkpoint, model, epoch + 1);
      // --8<-- [end:epoch_end]
    }

    if (throughput) {
      dist::report_throughput(training_time, trained * world);  // equal shards on every rank
    }

    // ---- Step 5: the verdict: equal replicas, every test image counted once, the floor reached
    // (the last epoch's evaluation; a run resumed after its last epoch evaluates now)
    const auto [correct, counted] = evaluated ? *evaluated : evaluate(model, test, device);
    // Equal on all ranks, and between an uninterrupted run and a resumed one, exactly when the
    // parameters' bits are. (Not the BatchNorm buffers: without SyncBatchNorm each rank keeps
    // running statistics of its own batches, as in torch.)
    const std::string print = dist::fingerprint(model.parameters());
    dist::out() << "parameters fingerprint " << print;
    std::vector<dist::Tensor> everyone;
    dist::all_gather(everyone,
                     dist::Tensor::from<std::int64_t>(
                         {static_cast<std::int64_t>(std::stoull(print, nullptr, 16))}, device));
    bool identical = true;
    for (const dist::Tensor& f : everyone) identical = identical && f.equal(everyone[0]);
    dist::out0() << "held-out accuracy " << percent(correct, counted) << " on " << counted
                 << " test images, each counted once";
    if (t != nullptr) timeline.write(trace_dir + "/rank" + std::to_string(rank) + ".json");
    const bool reached = static_cast<double>(correct) >= floor * static_cast<double>(counted);
    const bool job_ok = dist::all_ranks_ok(identical && counted == test.size() && reached);
    ddp.reset();  // its gradient group goes before the default group
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: replicas identical " << (identical ? "yes" : "no")
                   << ", every test image counted once " << (counted == test.size() ? "yes" : "no")
                   << ", accuracy floor "
                   << percent(static_cast<std::int64_t>(floor * 10000), 10000) << " reached "
                   << (reached ? "yes" : "no");
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: the replicas are bit-identical and the accuracy reached the floor of "
                 << percent(static_cast<std::int64_t>(floor * 10000), 10000);
    return dist::kExitOk;
  });
}
