// Chapter 11's support code: the flags, the data, the snapshot file's layout, and printing. None
// of it is about restarting; main.cpp is the lesson.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>

#include "../08_ddp_linear/post_b_data.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch11 {

// The flags of ch11_fault_tolerance, at their defaults.
struct Flags {
  int samples = 256, batch_size = 8, epochs = 4, seed = 0;
  double lr = 0.01, momentum = 0.9;
  std::string snapshot = "ch11_snapshot.bin";
  int snapshot_every = 10;  // steps between snapshots
  int crash_at_step = -1;   // -1: no crash
  int crash_rank = -1;      // -1: the last rank
  int step_delay_ms = 0;    // a pause per step, to kill a rank by hand
  dist::InitOptions init;   // --backend, --init-method, --timeout
};
// The parsed flags, or nothing after --help (the program then exits 0).
std::optional<Flags> parse_flags(int argc, char** argv);

// Which attempt this is: TORCHELASTIC_RESTART_COUNT, which ddprun and torchrun set (0 on the
// first attempt, 1 after the first restart, ...); 0 when no launcher set it.
int restart_count();

// Chapter 08's data, y = 3x + 2 + noise (x uniform in [-2, 2), noise in [-0.1, 0.1)), the same
// on every rank, and each rank's own initial weights (rank 0's win: DDP broadcasts them): the
// very code chapter 08 runs (../08_ddp_linear/post_b_data.cpp), so both start from the same bits.
using ch08::Dataset;
using ch08::initial_weights;
using ch08::make_dataset;

// The augmentation: each sample's x moved by up to +-0.05, drawn from the rank's own generator
// (seeded seed + 1000 + rank: chapter 06's one stream per rank), one draw per sample. Its state
// after a step depends on every draw before it: that is why the snapshot saves it.
std::uint64_t jitter_seed(int seed, int rank);
std::pair<dist::Tensor, dist::Tensor> jittered_batch(const Dataset& d,
                                                     const std::vector<std::int64_t>& batch,
                                                     dist::Generator& jitter, dist::Device device);

// ---- The snapshot: everything the training loop changes, so that a new attempt can go on from
// there as if nothing had happened. The run's flags that shape the numbers are saved with it: a
// snapshot of another run (another world size, seed, batch size, ...) is refused, by name.
struct Snapshot {
  std::int64_t steps_done = 0;                 // the position: the next step is steps_done
  std::vector<dist::Tensor> parameters;        // the model (every rank holds the same)
  std::vector<dist::Tensor> momentum_buffers;  // the optimizer's state (the same on every rank)
  std::vector<dist::Tensor> generators;        // every rank's generator state, by rank
};
// "DISTSNAP", the run's shape (world size, samples, batch size, epochs, seed, lr, momentum),
// steps_done, then each tensor as (dtype, count, values); written by dist::write_file_atomically.
void write_snapshot(const std::string& path, const Flags& f, int world, const Snapshot& s);
// Reads a snapshot written by a run with these flags at this world size, or throws
// dist::ConfigError saying what differs or what is damaged.
Snapshot read_snapshot(const std::string& path, const Flags& f, int world);

// ---- Where the copies are: every machine's local rank 0 keeps one, in its own --snapshot path.
// Every rank calls each of the four below: they are collectives.
// This machine's copy: read by local rank 0, nothing on the other ranks or when there is no file.
// A copy that belongs to another run stops every rank: the rank that read it throws its
// dist::ConfigError, the others one that names that rank.
std::optional<Snapshot> read_local_copy(const Flags& f, int world);
// Rank `holder`'s snapshot (`mine` there, ignored elsewhere) on every rank: its bytes, broadcast.
Snapshot broadcast_snapshot(const std::optional<Snapshot>& mine, int holder, const Flags& f,
                            int world);
// One number, reduced over all ranks: the largest or the smallest any rank holds.
std::int64_t max_over_ranks(std::int64_t mine);
std::int64_t min_over_ranks(std::int64_t mine);

// The position of `steps_done` in epochs: epoch steps_done / steps_per_epoch, at step
// steps_done % steps_per_epoch of it.
struct Position {
  std::int64_t epoch, step;
};
Position position(std::int64_t steps_done, std::int64_t steps_per_epoch);

// "w = 0x1.7fff4ep+1 (2.999985), b = ...": the bits, which tests compare, and the value.
std::string weights_text(const dist::Linear& model);
// MSE of the model on all samples, in double (rank 0 prints it).
double full_loss(const dist::Linear& model, const Dataset& d);

}  // namespace ch11
