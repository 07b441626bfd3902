// Chapter 07 — sampler: which rank reads which part of the dataset, epoch after epoch.
//
// Data-parallel training needs each rank to read a different shard of the dataset, and every
// rank to take the same number of steps. DistributedSampler does it without a single message:
// every rank shuffles with the same seed, pads the list until it divides evenly, and keeps every
// W-th index from its rank on. This chapter computes each rank's shard for a few epochs, cuts it
// into batches, gathers all shards on rank 0 to draw who reads what (and what is read twice),
// and checks it all against the same four lines done by hand, as post D shows them in Python.
//
// You will learn: DistributedSampler's shuffle (seed + epoch), padding and drop_last, the slice
// indices[rank:total_size:num_replicas]; why set_epoch matters; BatchSampler and drop_last; post
// D's make_data_sampler and the other samplers (Sequential, Random, SubsetRandom, Weighted).
// Builds on: chapter 05 (all_gather) and chapter 06 (seeded generators).
//
// Run:   ./tutorial run 07            (or: ddprun --standalone --nproc-per-node 2 ch07_sampler)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] epoch 0 indices: 10 4 5 2 9 6
//   [rank 1/2] epoch 0 indices: 0 3 8 1 7 10
//   [rank 1/2] epoch 0 batches (len 2): [0, 3, 8, 1] [7, 10]
//   [rank 0/2]   rank 1   x  x  .  x  .  .  .  x  x  .  p
//   [rank 0/2] OK: in every epoch, every shard matches the computation by hand, and the ...
#include <dist/dist.h>
#include <dist/sampler.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using Indices = std::vector<std::int64_t>;

// "0 3 8" (as the indices line prints them) and "[0, 3, 8]" (as Python prints a batch).
std::string join(const Indices& v, const char* sep = " ") {
  std::string text;
  for (std::size_t i = 0; i < v.size(); ++i) text += (i ? sep : "") + std::to_string(v[i]);
  return text;
}

// --8<-- [start:shard_by_hand]
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
// --8<-- [end:shard_by_hand]

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

// Rank 0 draws who reads which index: x a read, p a read of the padding (a position past the
// end of the shuffled list, so an index some rank already reads), . nothing.
void draw_grid(std::int64_t epoch, const std::vector<Indices>& shards, std::int64_t n) {
  const int world = static_cast<int>(shards.size());
  if (n > 40) {
    dist::out0() << "epoch " << epoch << ": grid left out for more than 40 indices";
    return;
  }
  const std::size_t width = std::to_string(n - 1).size() + 1;
  auto cell = [&](const std::string& s) { return std::string(width - s.size(), ' ') + s; };
  std::string header = "  index  ";
  for (std::int64_t i = 0; i < n; ++i) header += cell(std::to_string(i));
  dist::out0() << "epoch " << epoch << ": who reads which index (x read, p padding, . not read)";
  dist::out0() << header;
  std::int64_t padded = 0;
  for (int r = 0; r < world; ++r) {
    std::vector<std::string> row(n, ".");
    for (std::size_t k = 0; k < shards[r].size(); ++k) {
      const bool padding = r + static_cast<std::int64_t>(k) * world >= n;
      padded += padding;
      const std::int64_t index = shards[r][k];
      if (index < 0 || index >= n) continue;  // not an index: Step 5 reports it as a MISMATCH
      row[static_cast<std::size_t>(index)] = padding ? "p" : "x";
    }
    std::string line = "  rank " + std::to_string(r) + " ";
    for (const std::string& c : row) line += cell(c);
    dist::out0() << line;
  }
  std::int64_t reads = 0;
  for (const Indices& s : shards) reads += static_cast<std::int64_t>(s.size());
  dist::out0() << "epoch " << epoch << ": " << reads << " reads of " << n << " indices: " << padded
               << " padded, " << n + padded - reads << " dropped";
}

// The closed form the shards must meet: without drop_last each index is read at least once and
// exactly total_size - n reads are repeats; with drop_last W * floor(n / W) distinct indices.
bool covers_dataset(const std::vector<Indices>& shards, std::int64_t n, bool drop_last) {
  const auto world = static_cast<std::int64_t>(shards.size());
  std::map<std::int64_t, std::int64_t> times;
  std::int64_t reads = 0;
  for (const Indices& s : shards) {
    for (std::int64_t i : s) ++times[i];
    reads += static_cast<std::int64_t>(s.size());
  }
  for (const auto& [index, count] : times) {
    if (index < 0 || index >= n || (drop_last && count != 1)) return false;
  }
  const auto distinct = static_cast<std::int64_t>(times.size());
  if (drop_last && n % world != 0) return distinct == n / world * world && reads == distinct;
  return distinct == n && reads == (n + world - 1) / world * world;
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
    int dataset_size = 11, batch_size = 4, seed = 0, epochs = 2;
    bool shuffle = true, drop_last = false;
    cli.add_int("--dataset-size", &dataset_size, "indices in the dataset", 1, 1000000);
    cli.add_int("--batch-size", &batch_size, "indices per batch", 1, 1000000);
    cli.add_flag("--shuffle", &shuffle, "shuffle every epoch (seed + epoch)", "--no-shuffle");
    cli.add_int("--seed", &seed, "the shuffle's seed, the same on every rank", -1000000000,
                1000000000);
    cli.add_int("--epochs", &epochs, "epochs to sample", 1, 100);
    cli.add_flag("--drop-last", &drop_last, "cut the tail instead of padding");
    if (!cli.parse(argc, argv)) return dist::kExitOk;

    // --8<-- [start:step1_sampler]
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
    // --8<-- [end:step1_sampler]

    bool ok = true;
    for (int epoch = 0; epoch < epochs; ++epoch) {
      // --8<-- [start:step2_shard]
      // ---- Step 2: set_epoch, then this rank's shard. Forget set_epoch and every epoch
      // repeats epoch 0's order.
      sampler.set_epoch(epoch);
      const Indices mine = sampler.indices();
      dist::out() << "epoch " << epoch << " indices: " << join(mine);
      ok = ok && mine == shard_by_hand(n, world, rank, options, epoch);
      // --8<-- [end:step2_shard]

      // --8<-- [start:steps3to5]
      // ---- Step 3: batches of the shard; every rank gets the same number of them
      const dist::BatchSampler batches(sampler, batch_size, /*drop_last=*/false);
      std::string text;
      for (const Indices& b : batches.batches()) text += " [" + join(b, ", ") + "]";
      dist::out() << "epoch " << epoch << " batches (len " << batches.size() << "):" << text;

      // ---- Step 4: all_gather every shard; rank 0 draws who reads what
      const std::vector<Indices> shards = gather_shards(mine);
      if (rank == 0) draw_grid(epoch, shards, n);

      // ---- Step 5: check: each gathered shard is what that rank computes alone (no message
      // was needed to agree), and together they cover the dataset as the closed form says
      for (int r = 0; r < world; ++r) {
        ok = ok && shards[r] == shard_by_hand(n, world, r, options, epoch);
      }
      ok = ok && covers_dataset(shards, n, drop_last);
      // --8<-- [end:steps3to5]
    }

    // ---- Step 6: post D's make_data_sampler and the other samplers (rank 0)
    if (rank == 0) show_other_samplers(n, seed);

    // ---- Step 7: one verdict for the job
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();
    if (!job_ok) {
      dist::out0() << "MISMATCH: a shard differs from the computation by hand (see above)";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: in every epoch, every shard matches the computation by hand, and the "
                 << "shards cover the dataset as the closed form says";
    return dist::kExitOk;
  });
}
