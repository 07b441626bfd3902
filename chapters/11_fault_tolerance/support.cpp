// Chapter 11's support code (see support.h).
#include "support.h"

#include <dist/files.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace ch11 {

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch11_fault_tolerance",
                "Chapter 08's training, made to survive a crash: rank 0 writes a snapshot every "
                "--snapshot-every steps, every rank loads it at start, and a restarted job ends "
                "with the bits of the uninterrupted one. Run it under ddprun --max-restarts 1.");
  cli.add_int("--samples", &f.samples, "samples in the dataset", 2, 1000000);
  cli.add_int("--batch-size", &f.batch_size, "samples per batch on each rank", 1, 100000);
  cli.add_int("--epochs", &f.epochs, "passes over the dataset", 1, 1000);
  // Chapter 08's bound: lr * curvature <= 1, and heavy-ball momentum m stays stable below
  // 2 (1 + m), so every step is stable for any momentum here.
  cli.add_double("--lr", &f.lr, "SGD's learning rate (at most 0.1: every step stays stable)", 1e-9,
                 0.1);
  cli.add_double("--momentum", &f.momentum, "SGD's momentum: the optimizer's state", 0, 0.99);
  cli.add_int("--seed", &f.seed, "seeds the data, the sampler, the weights and the jitter", 0,
              1000000000);
  cli.add_string("--snapshot", &f.snapshot,
                 "the snapshot file: loaded at start when it exists, removed when the job is done");
  cli.add_int("--snapshot-every", &f.snapshot_every, "steps between two snapshots", 1, 1000000);
  cli.add_int("--crash-at-step", &f.crash_at_step,
              "on the first attempt only, --crash-rank dies before this step (-1: never)", -1,
              1000000000);
  cli.add_int("--crash-rank", &f.crash_rank, "the rank that crashes (-1: the last one)", -1,
              1000000);
  cli.add_int("--step-delay-ms", &f.step_delay_ms,
              "a pause in every step, so that a rank can be killed by hand", 0, 10000);
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  return f;
}

int restart_count() {
  const char* v = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return v == nullptr ? 0 : std::atoi(v);
}

std::uint64_t jitter_seed(int seed, int rank) {
  return static_cast<std::uint64_t>(seed) + 1000 + static_cast<std::uint64_t>(rank);
}

std::pair<dist::Tensor, dist::Tensor> jittered_batch(const Dataset& d,
                                                     const std::vector<std::int64_t>& batch,
                                                     dist::Generator& jitter, dist::Device device) {
  const auto n = static_cast<std::int64_t>(batch.size());
  const std::vector<std::int64_t> k =
      dist::randint(0, 1 << 24, n, jitter).to_vector<std::int64_t>();
  std::vector<float> x, y;
  for (std::int64_t i = 0; i < n; ++i) {
    const double shift = (static_cast<double>(k[i]) / (1 << 24) - 0.5) * 0.1;
    x.push_back(static_cast<float>(d.x[batch[i]] + shift));
    y.push_back(d.y[batch[i]]);
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
}

namespace {

constexpr char kMagic[] = "DISTSNAP";

template <typename T>
void append(std::string& bytes, const T* values, std::size_t count) {
  bytes.append(reinterpret_cast<const char*>(values), count * sizeof(T));
}

// The flags that shape the numbers, as 64-bit words (the doubles by their bits).
std::vector<std::int64_t> run_shape(const Flags& f, int world) {
  std::int64_t lr = 0, momentum = 0;
  std::memcpy(&lr, &f.lr, sizeof lr);
  std::memcpy(&momentum, &f.momentum, sizeof momentum);
  return {world, f.samples, f.batch_size, f.epochs, f.seed, lr, momentum};
}

void append_tensor(std::string& bytes, const dist::Tensor& t) {
  const std::int64_t head[2] = {static_cast<std::int64_t>(t.dtype()), t.numel()};
  append(bytes, head, 2);
  const dist::Tensor cpu = t.cpu();
  bytes.append(static_cast<const char*>(cpu.data()), cpu.nbytes());
}

class Reader {
 public:
  Reader(std::string path, std::string bytes) : path_(std::move(path)), bytes_(std::move(bytes)) {}
  void take(void* out, std::size_t n) {
    if (bytes_.size() - at_ < n) {
      throw dist::ConfigError(path_ + " ends at byte " + std::to_string(bytes_.size()) +
                              ", inside a record: the snapshot is damaged; remove it to start "
                              "again");
    }
    std::memcpy(out, bytes_.data() + at_, n);
    at_ += n;
  }
  std::int64_t word() {
    std::int64_t v = 0;
    take(&v, sizeof v);
    return v;
  }
  dist::Tensor tensor() {
    const std::int64_t dtype = word(), count = word();
    if (dtype < 0 || dtype > static_cast<std::int64_t>(dist::kInt64) || count < 0 ||
        count > 1 << 20) {
      throw dist::ConfigError(path_ + " holds a tensor of " + std::to_string(count) +
                              " values of dtype " + std::to_string(dtype) +
                              ", which no run of this chapter writes: the snapshot is damaged");
    }
    dist::Tensor t(count, static_cast<dist::DType>(dtype));
    take(t.data(), t.nbytes());
    return t;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string path_, bytes_;
  std::size_t at_ = 0;
};

std::string encode(const Flags& f, int world, const Snapshot& s) {
  std::string bytes(kMagic, 8);
  const std::vector<std::int64_t> shape = run_shape(f, world);
  append(bytes, shape.data(), shape.size());
  append(bytes, &s.steps_done, 1);
  for (const auto* list : {&s.parameters, &s.momentum_buffers, &s.generators}) {
    const auto count = static_cast<std::int64_t>(list->size());
    append(bytes, &count, 1);
    for (const dist::Tensor& t : *list) append_tensor(bytes, t);
  }
  return bytes;
}

// The snapshot in `bytes`, read from `path` (the name its errors give).
Snapshot decode(const std::string& path, std::string bytes, const Flags& f, int world) {
  Reader r(path, std::move(bytes));
  char magic[8] = {};
  r.take(magic, 8);
  if (std::memcmp(magic, kMagic, 8) != 0) {
    throw dist::ConfigError(path +
                            " is not a snapshot of this chapter; remove it, or name "
                            "another file with --snapshot");
  }
  const std::vector<std::int64_t> want = run_shape(f, world);
  const char* names[] = {"world size", "--samples", "--batch-size", "--epochs",
                         "--seed",     "--lr",      "--momentum"};
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::int64_t saved = r.word();
    if (saved != want[i]) {
      throw dist::ConfigError(path + " was written by a run with another " + names[i] +
                              (i == 0 ? " (" + std::to_string(saved) + " ranks)" : "") +
                              ": a snapshot resumes the run that wrote it. Start that run again, "
                              "or remove the file to start this one from the beginning");
    }
  }
  Snapshot s;
  s.steps_done = r.word();
  for (auto* list : {&s.parameters, &s.momentum_buffers, &s.generators}) {
    const std::int64_t count = r.word();
    for (std::int64_t i = 0; i < count && i < 1024; ++i) list->push_back(r.tensor());
  }
  if (!r.done() || s.parameters.size() != 2 || s.momentum_buffers.size() != 2 ||
      s.generators.size() != static_cast<std::size_t>(world) || s.steps_done < 0) {
    throw dist::ConfigError(path +
                            " does not hold what a snapshot of this chapter holds: it is "
                            "damaged; remove it to start again");
  }
  return s;
}

// One number through an all_reduce, on this rank's device (a GPU's under NCCL).
std::int64_t reduce_over_ranks(std::int64_t mine, dist::ReduceOp op) {
  dist::Tensor t = dist::Tensor::from(std::vector<std::int64_t>{mine}, dist::get_device());
  dist::all_reduce(t, op);
  return t.to_vector<std::int64_t>()[0];
}

// `root`'s bytes on every rank (the others pass anything): the length first, then the bytes as
// 64-bit words, because the collectives move tensors.
std::string broadcast_text(const std::string& bytes, int root) {
  const bool sender = dist::get_rank() == root;
  const std::int64_t length =
      reduce_over_ranks(sender ? static_cast<std::int64_t>(bytes.size()) : 0, dist::ReduceOp::MAX);
  std::vector<std::int64_t> words(static_cast<std::size_t>((length + 7) / 8));
  if (sender) std::memcpy(words.data(), bytes.data(), bytes.size());
  dist::Tensor t = dist::Tensor::from(words, dist::get_device());
  dist::broadcast(t, root);
  words = t.to_vector<std::int64_t>();
  return {reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(length)};
}

}  // namespace

void write_snapshot(const std::string& path, const Flags& f, int world, const Snapshot& s) {
  dist::write_file_atomically(path, encode(f, world, s));
}

Snapshot read_snapshot(const std::string& path, const Flags& f, int world) {
  std::ifstream in(path, std::ios::binary);
  return decode(path, std::string(std::istreambuf_iterator<char>(in), {}), f, world);
}

std::int64_t max_over_ranks(std::int64_t mine) {
  return reduce_over_ranks(mine, dist::ReduceOp::MAX);
}

std::int64_t min_over_ranks(std::int64_t mine) {
  return reduce_over_ranks(mine, dist::ReduceOp::MIN);
}

std::optional<Snapshot> read_local_copy(const Flags& f, int world) {
  std::optional<Snapshot> mine;
  std::string refused;  // why this rank cannot use its copy
  if (dist::get_local_rank() == 0 && std::filesystem::exists(f.snapshot)) {
    try {
      mine = read_snapshot(f.snapshot, f, world);
    } catch (const dist::ConfigError& e) {
      refused = e.what();
    }
  }
  // Every rank learns whether any copy was refused, and why, so that all stop here with the
  // reason: none waits in a collective for a rank that has left, and the reason is on every
  // rank's error line (the launcher may stop the refusing rank before it prints its own).
  const int rank = dist::get_rank();
  const auto first = static_cast<int>(min_over_ranks(refused.empty() ? world : rank));
  if (first == world) return mine;
  const std::string reason = broadcast_text(refused, first);
  if (first == rank) throw dist::ConfigError(reason);
  throw dist::ConfigError("rank " + std::to_string(first) + " refused its machine's copy, so no " +
                          "rank resumes: " + reason);
}

Snapshot broadcast_snapshot(const std::optional<Snapshot>& mine, int holder, const Flags& f,
                            int world) {
  const bool sender = dist::get_rank() == holder;
  std::string received = broadcast_text(sender ? encode(f, world, *mine) : std::string(), holder);
  return decode("rank " + std::to_string(holder) + "'s copy of " + f.snapshot, std::move(received),
                f, world);
}

Position position(std::int64_t steps_done, std::int64_t steps_per_epoch) {
  return {steps_done / steps_per_epoch, steps_done % steps_per_epoch};
}

std::string weights_text(const dist::Linear& model) {
  const double w = model.weight().data.item(0), b = model.bias().data.item(0);
  char text[128];
  std::snprintf(text, sizeof text, "w = %a (%.6f), b = %a (%.6f)", w, w, b, b);
  return text;
}

double full_loss(const dist::Linear& model, const Dataset& d) {
  const double w = model.weight().data.item(0), b = model.bias().data.item(0);
  double sum = 0;
  for (std::size_t i = 0; i < d.x.size(); ++i) {
    const double e = w * d.x[i] + b - d.y[i];
    sum += e * e;
  }
  return sum / static_cast<double>(d.x.size());
}

}  // namespace ch11
