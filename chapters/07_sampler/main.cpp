// Chapter 07 — sampler: which rank reads which part of the dataset, epoch after epoch.
//
// Data-parallel training needs each rank to read a different shard of the dataset, and every
// rank to take the same number of steps. DistributedSampler does it without a single message:
// every rank shuffles with the same seed, pads the list until it divides evenly, and keeps every
// W-th index from its rank on. This chapter computes each rank's shard for a few epochs, cuts it
// into the batches a DataLoader would build, gathers all shards on rank 0 to draw who reads
// what (and what is read twice), and checks it all against the same four lines done by hand.
// Then it trains by iterations instead of epochs, as post D's make_batch_data_sampler does, and
// shows what resuming that mid-run reads.
//
// You will learn: DistributedSampler's shuffle (seed + epoch), padding and drop_last, the slice
// indices[rank:total_size:num_replicas]; why set_epoch matters; BatchSampler, and what
// DataLoader(sampler=..., batch_size=...) builds from them; the iteration-based batch sampler
// and its start_iter; post D's make_data_sampler and the other samplers.
// Builds on: chapter 05 (all_gather) and chapter 06 (seeded generators).
//
// Run:   ./tutorial run 07            (or: ddprun --standalone --nproc-per-node 2 ch07_sampler)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] epoch 0 indices: 10 4 5 2 9 6 -> batches (len 2): [10, 4, 5, 2] [9, 6]
//   [rank 1/2] epoch 0 indices: 0 3 8 1 7 10 -> batches (len 2): [0, 3, 8, 1] [7, 10]
//   [rank 0/2]   rank 1   x  x  .  x  .  .  .  x  x  .  p
//   [rank 0/2] iterations 4-5, resumed at 3 (set_epoch 3): [9, 3, 4, 2] [1, 7]
//   [rank 0/2] OK: every shard is what the computation by hand gives, the shards cover the ...
#include <dist/dist.h>
#include <dist/sampler.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support.h"

namespace {

using ch07::Indices;
using ch07::join;

// torch 1.13's DistributedSampler.__iter__, by hand: shuffle with seed + epoch, pad by
// repeating from the start (or cut the tail), then every W-th index from `rank` on.
Indices shard_by_hand(std::int64_t n, int world, int rank, const dist::DistributedSamplerOptions& o,
                      std::int64_t epoch) {
  Indices order;
  if (o.shuffle) {
    dist::Generator g;
    g.manual_seed(static_cast<std::uint64_t>(o.seed + epoch));  // the same on every rank
    order = dist::randperm(n, g);
  } else {
    for (std::int64_t i = 0; i < n; ++i) order.push_back(i);
  }
  const bool uneven = n % world != 0;
  const std::int64_t num_samples = o.drop_last && uneven ? n / world : (n + world - 1) / world;
  const std::int64_t total_size = num_samples * world;
  for (std::int64_t i = n; i < total_size; ++i) order.push_back(order[(i - n) % n]);  // padding
  order.resize(total_size);                                                           // drop_last
  Indices mine;
  for (std::int64_t i = rank; i < total_size; i += world) mine.push_back(order[i]);
  return mine;
}

// Every rank's shard on every rank. The shards have the same length on all ranks (num_samples),
// which all_gather needs; with drop_last and fewer indices than ranks they are empty, and
// all_gather of 0 elements is fine.
std::vector<Indices> gather_shards(const Indices& mine) {
  std::vector<dist::Tensor> all;
  dist::all_gather(all, dist::Tensor::from(mine, dist::get_device()));
  std::vector<Indices> shards;
  for (const dist::Tensor& t : all) shards.push_back(t.to_vector<std::int64_t>());
  return shards;
}

// Post D's make_batch_data_sampler(dataset, sampler, aspect_grouping=False, batch_size,
// num_iters, start_iter): a BatchSampler wrapped in maskrcnn-benchmark's
// IterationBasedBatchSampler, which chains passes and seeds each with set_epoch(the iteration
// the pass starts at). A fresh sampler, as a restarted job builds one.
std::vector<Indices> iteration_batches(std::int64_t n, const dist::DistributedSamplerOptions& o,
                                       std::int64_t batch_size, std::int64_t num_iterations,
                                       std::int64_t start_iter) {
  dist::DistributedSampler sampler(n, o);
  return dist::IterationBasedBatchSampler(sampler, batch_size, num_iterations, start_iter)
      .batches();
}

// How many ranks say yes: one all_reduce, so every rank must call it.
std::int64_t ranks_that(bool yes) {
  dist::Tensor count = dist::Tensor::from(Indices{yes ? 1 : 0}, dist::get_device());
  dist::all_reduce(count);
  return count.to_vector<std::int64_t>()[0];
}

// Rank 0 shows post D's make_data_sampler and the other samplers, each with a generator seeded
// `seed` (or no generator: make_data_sampler's RandomSampler draws from the default generator).
void show_other_samplers(std::int64_t n, std::int64_t seed) {
  const auto name = [](const dist::Sampler& s) -> std::string {
    if (dynamic_cast<const dist::DistributedSampler*>(&s)) return "DistributedSampler";
    if (dynamic_cast<const dist::RandomSampler*>(&s)) return "RandomSampler";
    return "SequentialSampler";
  };
  const std::pair<bool, bool> cases[] = {{true, true}, {true, false}, {false, false}};
  for (const auto& [shuffle, distributed] : cases) {
    const auto s = dist::make_data_sampler(n, shuffle, distributed);
    dist::out0() << "make_data_sampler(shuffle=" << (shuffle ? "True" : "False")
                 << ", distributed=" << (distributed ? "True" : "False") << ") -> " << name(*s)
                 << ", len " << s->size();
  }
  dist::Generator g(static_cast<std::uint64_t>(seed));
  Indices even;
  std::vector<double> weights;
  for (std::int64_t i = 0; i < n; ++i) {
    if (i % 2 == 0) even.push_back(i);
    weights.push_back(static_cast<double>(1 + i % 3));
  }
  dist::out0() << "SequentialSampler:     " << join(dist::SequentialSampler(n).indices());
  dist::out0() << "RandomSampler:         "
               << join(dist::RandomSampler(n, {.generator = &g}).indices());
  dist::out0() << "SubsetRandomSampler:   " << join(dist::SubsetRandomSampler(even, &g).indices())
               << "  (the even indices)";
  dist::out0() << "WeightedRandomSampler: "
               << join(dist::WeightedRandomSampler(weights, n, true, &g).indices())
               << "  (weights 1, 2, 3, 1, 2, 3, ...)";
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags (--backend, --init-method, --timeout, --help, and the sampler's)
    dist::Cli cli("ch07_sampler",
                  "Shard a dataset over the ranks with DistributedSampler, batch it, and check "
                  "who reads what against the same computation by hand.");
    int dataset_size = 11, batch_size = 4, seed = 0, epochs = 2, iterations = 5, resume_at = 3;
    bool shuffle = true, drop_last = false;
    cli.add_int("--dataset-size", &dataset_size, "indices in the dataset", 1, 1000000);
    cli.add_int("--batch-size", &batch_size, "indices per batch", 1, 1000000);
    cli.add_flag("--shuffle", &shuffle, "shuffle every epoch (seed + epoch)", "--no-shuffle");
    cli.add_int("--seed", &seed, "the shuffle's seed, the same on every rank", -1000000000,
                1000000000);
    cli.add_int("--epochs", &epochs, "epochs to sample", 1, 100);
    cli.add_flag("--drop-last", &drop_last, "cut the tail instead of padding");
    cli.add_int("--iterations", &iterations, "iterations of the iteration-based run", 1, 1000);
    cli.add_int("--resume-at", &resume_at, "the start_iter the run is resumed from", 0, 1000);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    if (resume_at > iterations) {
      throw dist::ConfigError("--resume-at " + std::to_string(resume_at) +
                              " is past --iterations " + std::to_string(iterations));
    }

    // ---- Step 1: join the group; the sampler takes num_replicas and rank from it
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::int64_t n = dataset_size;
    const dist::DistributedSamplerOptions options{
        .shuffle = shuffle, .seed = seed, .drop_last = drop_last};
    dist::DistributedSampler sampler(n, options);
    const std::int64_t dropped = drop_last ? n - sampler.total_size() : 0;
    dist::out0() << "dataset of " << n << " indices on " << world
                 << " ranks: num_samples = " << sampler.num_samples()
                 << ", total_size = " << sampler.total_size() << " ("
                 << sampler.total_size() - n + dropped << " padded, " << dropped << " dropped)";

    bool ok = true;  // every check below ands into this; Step 8 makes it the job's verdict

    // ---- Step 2: every epoch, set_epoch, then this rank's shard. Forget set_epoch and every
    // epoch repeats epoch 0's order.
    for (int epoch = 0; epoch < epochs; ++epoch) {
      sampler.set_epoch(epoch);
      const Indices mine = sampler.indices();

      // ---- Step 3: batches of the shard, as DataLoader(dataset, batch_size=B, sampler=sampler)
      // builds them: a BatchSampler(sampler, B, drop_last=False). The loader then fetches
      // dataset[i] for each index of a batch and collates them into one tensor (in worker
      // processes with num_workers > 0, handed back in this order). Same length on every rank.
      const dist::BatchSampler batches(sampler, batch_size, /*drop_last=*/false);
      dist::out() << "epoch " << epoch << " indices: " << join(mine) << " -> batches (len "
                  << batches.size() << "):" << ch07::batches_text(batches.batches());

      // ---- Step 4: all_gather every shard; rank 0 draws who reads what
      const std::vector<Indices> shards = gather_shards(mine);
      if (rank == 0) ch07::draw_grid(epoch, shards, n);

      // ---- Step 5: check: each shard is what that rank computes alone (no message was needed
      // to agree), and together they cover the dataset as the closed form says
      for (int r = 0; r < world; ++r) {
        ok = ok && shards[r] == shard_by_hand(n, world, r, options, epoch);
      }
      ok = ok && ch07::covers_dataset(shards, n, drop_last) && mine == shards[rank];
    }

    // ---- Step 6: train by iterations, not epochs (post D's make_batch_data_sampler with
    // num_iters), then resume that run from a checkpoint's start_iter
    const std::int64_t per_pass = dist::BatchSampler(sampler, batch_size, false).size();
    if (per_pass == 0) {
      dist::out0() << "iterations: every shard is empty, so iteration 1 would never come";
    } else {
      const std::vector<Indices> run = iteration_batches(n, options, batch_size, iterations, 0);
      const std::vector<Indices> resumed =
          iteration_batches(n, options, batch_size, iterations, resume_at);
      // The exact resume: start where the interrupted pass began, skip what it had served.
      const std::int64_t into_pass = resume_at % per_pass;
      std::vector<Indices> exact =
          iteration_batches(n, options, batch_size, iterations, resume_at - into_pass);
      exact.erase(exact.begin(), exact.begin() + static_cast<std::ptrdiff_t>(into_pass));
      const std::vector<Indices> tail(run.begin() + std::min<std::int64_t>(run.size(), resume_at),
                                      run.end());
      dist::out() << ch07::iterations_text(1, iterations) << ", one run"
                  << ch07::pass_seeds(0, iterations, per_pass) << ":"
                  << ch07::pass_marks(run, per_pass);
      dist::out() << ch07::iterations_text(resume_at + 1, iterations) << ", resumed at "
                  << resume_at << ch07::pass_seeds(resume_at, iterations, per_pass) << ":"
                  << ch07::pass_marks(resumed, per_pass);
      const std::int64_t same = ranks_that(resumed == tail), exact_same = ranks_that(exact == tail);
      dist::out0() << "resumed at " << resume_at
                   << (into_pass == 0 ? " (where a pass of " : " (inside a pass of ") << per_pass
                   << (into_pass == 0 ? " begins): " : "): ")
                   << ch07::iterations_text(resume_at + 1, iterations) << " as in the one run on "
                   << same << " of " << world << " ranks; at " << resume_at - into_pass
                   << ", skipping " << into_pass << ": on " << exact_same << " of " << world;
      // What holds for any flags: the counts, the exact resume, and a resume where a pass
      // begins. Whether a resume inside a pass differs is reported, not judged: with tiny
      // shards a new pass can draw the same batches by chance (1 rank, --dataset-size 2
      // --batch-size 1 --iterations 2 --resume-at 1).
      ok = ok && static_cast<std::int64_t>(run.size()) == iterations && exact == tail &&
           static_cast<std::int64_t>(resumed.size()) == iterations - resume_at &&
           (into_pass != 0 || resumed == tail);
    }

    // ---- Step 7: post D's make_data_sampler and the other samplers (rank 0)
    if (rank == 0) show_other_samplers(n, seed);

    // ---- Step 8: one verdict for the job
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: a shard or a batch differs from the computation by hand, or "
                   << "the exact resume from the one run (see above)";
      // Only rank 0 fails the job: a rank that exited 1 first would make ddprun stop rank 0
      // before its MISMATCH line is out.
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: every shard is what the computation by hand gives, the shards cover the "
                 << "dataset, and the exact resume replays the run";
    return dist::kExitOk;
  });
}
