// Chapter 10 — failure modes: the job's side. One function per mistake.
//
// Each case below is a small piece of a training job with one mistake that users of
// torch.distributed make, written as people write it. With --fixed the same code runs with the
// mistake corrected: the two versions differ in one marked line (or two). The chapter's driver,
// ch10_failure_modes (main.cpp), starts this program under ddprun the way each case needs (some
// need two "machines", a port that is taken, a machine that never starts), and explains what
// happened. You can also run a case by hand; the driver prints every command it runs.
//
// A mistake that stops the job (a mismatched collective, a crash) is left to the library to
// catch: its error is the diagnosis. A silent one (no set_epoch, one seed everywhere) ends with
// the check that catches it, a check worth copying into your own job: it throws, so the job
// fails, instead of training on repeated data without a word.
//
// Run:   ./tutorial run 10 CASE          (the driver; ./tutorial run 10 runs every case)
//        ddprun --standalone --nproc-per-node 2 build/cpu/bin/ch10_broken CASE [--fixed]
#include <dist/dist.h>
#include <dist/seed.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using dist::ReduceOp;
using dist::Tensor;
namespace fs = std::filesystem;

// The flags a case reads (the shared ones, --timeout among them, come from dist::Cli).
struct Options {
  bool fixed = false;
  int steps = 5;
  int crash_step = 3;
  std::string data_dir;
};

// ---- A collective called on only some ranks

void partial_collective(const Options& o) {
  const int rank = dist::get_rank();
  Tensor loss = Tensor::full(1, 0.5 * (rank + 1));  // this rank's loss for the epoch
  // THE MISTAKE: only rank 0 prints the mean loss, so only rank 0 computes it. all_reduce is a
  // collective: every rank must call it, in the same order, or the ranks pair up wrong calls.
  if (o.fixed || rank == 0) dist::all_reduce(loss);  // fixed: every rank reduces, rank 0 prints
  dist::barrier();                                   // the end of the epoch
  dist::out0() << "mean loss " << loss.item(0) / dist::get_world_size();
}

// ---- Mismatched sizes, dtypes and reduce ops

void mismatched_size(const Options& o) {
  const int rank = dist::get_rank();
  // 7 samples over 2 ranks: the last batch gives rank 0 four samples and rank 1 three.
  const int samples = 4 - rank % 2;
  // THE MISTAKE: all_reduce of a tensor whose length is this rank's sample count.
  Tensor losses = o.fixed ? Tensor::from({0.25 * samples, double(samples)})  // fixed: {sum, count}
                          : Tensor::full(samples, 0.25);
  dist::all_reduce(losses);
  dist::out0() << "summed " << losses;
}

void mismatched_dtype(const Options& o) {
  const int rank = dist::get_rank();
  // THE MISTAKE: rank 0 keeps its metric in double (it also prints it), the others in float.
  const dist::DType dtype = (rank == 0 && !o.fixed) ? dist::kFloat64 : dist::kFloat32;
  Tensor correct = Tensor::full(1, 90 + rank, dtype);  // correct predictions on this rank
  dist::all_reduce(correct);
  dist::out0() << "correct predictions " << correct;
}

void mismatched_op(const Options& o) {
  const int rank = dist::get_rank();
  // THE MISTAKE: rank 0 wants the worst loss for its log, the others the total.
  const ReduceOp op = (rank == 0 && !o.fixed) ? ReduceOp::MAX : ReduceOp::SUM;
  Tensor loss = Tensor::full(1, 0.5 * (rank + 1));
  dist::all_reduce(loss, op);
  dist::out0() << "summed loss " << loss;
}

// ---- A barrier that one rank skips

void skipped_barrier(const Options& o) {
  const int rank = dist::get_rank();
  const bool has_validation_shard = rank != 1;  // say the validation set had no files for rank 1
  // THE MISTAKE: a rank with nothing to validate skips the barrier that ends validation.
  if (o.fixed || has_validation_shard) {
    // monitored_barrier instead of barrier() while hunting the bug: it names who did not come.
    dist::monitored_barrier(std::chrono::seconds(2));
  }
  Tensor epoch_loss = Tensor::full(1, 1.0);
  dist::all_reduce(epoch_loss);  // every rank, the next collective of the epoch
  dist::out0() << "epoch loss " << epoch_loss;
}

// ---- A healthy job, and one whose rank crashes or stops mid-training
// The driver starts the healthy job in broken ways (a port that is taken, a machine missing).

enum class Breakdown { kNone, kCrash, kStop };

void train(const Options& o, Breakdown breakdown) {
  const int rank = dist::get_rank();
  const bool last_rank = rank == dist::get_world_size() - 1;
  Tensor weight = Tensor::zeros(4);
  for (int step = 1; step <= o.steps; ++step) {
    Tensor grad = Tensor::full(4, 0.1 * (rank + 1));
    if (breakdown == Breakdown::kCrash && last_rank && step == o.crash_step) {
      dist::out() << "step " << step
                  << ": crashing now (SIGKILL, as the out-of-memory killer does)";
      std::raise(SIGKILL);  // no destructor, no message: the process is simply gone
    }
    if (breakdown == Breakdown::kStop && last_rank && step == o.crash_step) {
      dist::out() << "step " << step << ": stopping now (SIGSTOP, as Ctrl-Z or a debugger does)";
      std::raise(SIGSTOP);  // alive, connections open, answering nothing
    }
    dist::all_reduce(grad);
    weight -= grad * 0.5;
  }
  dist::out0() << "trained " << o.steps << " steps, weight " << weight;
}

// ---- A forgotten set_epoch

void no_set_epoch(const Options& o) {
  const int epochs = 3;
  dist::DistributedSampler sampler(16, {.shuffle = true, .seed = 0});
  std::vector<std::vector<std::int64_t>> orders;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    if (o.fixed) sampler.set_epoch(epoch);  // THE MISTAKE is leaving this line out
    orders.push_back(sampler.indices());
    dist::out() << "epoch " << epoch << " reads " << Tensor::from(orders.back());
  }
  // The check that catches it: a shuffling sampler must not give every epoch the same order.
  bool all_same = true;
  for (const auto& order : orders) all_same = all_same && order == orders.front();
  if (dist::all_ranks_ok(!all_same)) {
    dist::out0() << "the order changes from epoch to epoch";
    return;
  }
  throw dist::Error("all " + std::to_string(epochs) +
                    " epochs read the same order: the sampler was never told the epoch. Call "
                    "sampler.set_epoch(epoch) at the start of every epoch");
}

// ---- The same seed on every rank

void same_seed(const Options& o) {
  const int rank = dist::get_rank();
  const std::uint64_t seed = 0;
  // THE MISTAKE: every rank seeds the same stream, so every rank draws the same augmentations.
  dist::init_seeds(o.fixed ? seed + rank : seed);
  Tensor crops = dist::randint(0, 32, 4);  // random crop offsets for this rank's 4 images
  dist::out() << "crop offsets " << crops;
  // The check that catches it: gather every rank's draws and look for two ranks that agree.
  std::vector<Tensor> all;
  dist::all_gather(all, crops);
  for (int a = 0; a < static_cast<int>(all.size()); ++a) {
    for (int b = a + 1; b < static_cast<int>(all.size()); ++b) {
      if (all[a].to_vector<std::int64_t>() == all[b].to_vector<std::int64_t>()) {
        throw dist::Error("ranks " + std::to_string(a) + " and " + std::to_string(b) +
                          " drew the same augmentations: every rank was seeded alike. Seed with "
                          "seed + rank (dist::init_seeds(seed + dist::get_rank()))");
      }
    }
  }
  dist::out0() << "every rank drew its own augmentations";
}

// ---- RANK where LOCAL_RANK belongs
// --data-dir is this machine's local disk (the driver gives each "machine" its own directory).

void rank_for_local_rank(const Options& o) {
  DIST_CHECK(!o.data_dir.empty(), "pass --data-dir DIR: this machine's local disk");
  const fs::path file = fs::path(o.data_dir) / "train.bin";
  // THE MISTAKE: RANK picks who prepares this machine's copy of the data. Only one rank in the
  // whole job has RANK 0, so only machine A gets a copy. (The same mistake picks the GPU:
  // cuda:RANK is cuda:2 on machine B, which has cuda:0 and cuda:1.)
  const bool prepares = o.fixed ? dist::get_local_rank() == 0 : dist::get_rank() == 0;
  if (prepares && !fs::exists(file)) {
    fs::create_directories(o.data_dir);
    dist::write_file_atomically(file.string(), std::string(1000, 'x'));
    dist::out() << "prepared the data set on this machine";
  }
  dist::barrier();  // nobody reads before it is prepared
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw dist::Error("no data set at " + file.string() + " on this machine (LOCAL_RANK " +
                      std::to_string(dist::get_local_rank()) +
                      "): nobody here prepared it. Let LOCAL_RANK 0 of each machine prepare "
                      "what lives on that machine's disk");
  }
  const auto bytes = std::distance(std::istreambuf_iterator<char>(in), {});
  Tensor total = Tensor::full(1, static_cast<double>(bytes), dist::kInt64);
  dist::all_reduce(total);
  dist::out0() << "every rank read its machine's copy: " << static_cast<std::int64_t>(total.item(0))
               << " bytes";
}

const std::map<std::string, std::function<void(const Options&)>>& cases() {
  static const std::map<std::string, std::function<void(const Options&)>> table = {
      {"partial-collective", partial_collective},
      {"mismatched-size", mismatched_size},
      {"mismatched-dtype", mismatched_dtype},
      {"mismatched-op", mismatched_op},
      {"skipped-barrier", skipped_barrier},
      {"train", [](const Options& o) { train(o, Breakdown::kNone); }},
      {"crash", [](const Options& o) { train(o, o.fixed ? Breakdown::kNone : Breakdown::kCrash); }},
      {"stopped-rank",
       [](const Options& o) { train(o, o.fixed ? Breakdown::kNone : Breakdown::kStop); }},
      {"no-set-epoch", no_set_epoch},
      {"same-seed", same_seed},
      {"rank-for-local-rank", rank_for_local_rank},
  };
  return table;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 1: which mistake, and whether to make it
    std::string names;
    for (const auto& [name, body] : cases()) names += (names.empty() ? "" : ", ") + name;
    dist::Cli cli("ch10_broken", "One distributed mistake per case, and its fix (--fixed).");
    Options o;
    std::vector<std::string> words;
    cli.allow_positional(&words, "CASE (" + names + ")");
    cli.add_flag("--fixed", &o.fixed, "run the case with its mistake corrected");
    cli.add_int("--steps", &o.steps, "training steps of train, crash and stopped-rank", 1,
                10000000);
    cli.add_int("--crash-step", &o.crash_step,
                "the step at which crash and stopped-rank break the last rank", 1, 1000);
    cli.add_string("--data-dir", &o.data_dir, "this machine's local disk (rank-for-local-rank)");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    if (words.size() != 1 || cases().count(words[0]) == 0) {
      throw dist::ConfigError("name one case: " + names +
                              (words.empty() ? "" : "; got '" + words[0] + "'"));
    }
    const std::string& name = words[0];

    // ---- Step 2: join the job
    dist::init_process_group(cli.init_options());
    const std::string how = name == "train" ? "" : o.fixed ? " (fixed)" : " (with the mistake)";
    dist::out0() << name << how << ", " << dist::get_world_size() << " ranks";

    // ---- Step 3: the case; a mistake that the library catches ends here with its error
    cases().at(name)(o);
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
