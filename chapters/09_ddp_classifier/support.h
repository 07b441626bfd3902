// Chapter 09's support code: what the training run needs but the lesson does not teach, so that
// main.cpp reads as the run itself. The flags; checkpoints; rank 0's progress bar; number
// formatting; --comm-hook. The data set, the initial weights and the batches are in
// fashion_data.h.
#pragma once

#include <dist/comm_hooks.h>
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>

#include "fashion_data.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ch09 {

constexpr std::int64_t kHidden = 128;

// Every flag, with its default. --help lists them.
struct Flags {
  int train_samples = 8000, test_samples = 2000, batch_size = 32, epochs = 4, seed = 0;
  int accumulate = 1, stop_after = 0;
  int powersgd_rank = 1, powersgd_start_iter = 10;  // torch's start_powerSGD_iter is 1,000
  double lr = 0.1, bucket_mb = 0.005, min_accuracy = 0;
  bool overlap = true, sync_bn = true, resume = false, throughput = false;
  std::string data_dir = "data", checkpoint, trace_dir;
  std::string comm_hook;  // "": DDP's own averaging; allreduce, fp16, bf16 or powersgd
  dist::InitOptions init;

  // True when every flag that changes what is computed has its default (the ones that do not:
  // the bucket size and overlap, checkpoints and --resume, traces, paths, --throughput,
  // --min-accuracy, --comm-hook allreduce, which averages as DDP does), and the run goes to its
  // last epoch.
  bool default_run() const;
  // The epochs this run trains: all of them, or up to --stop-after.
  int last_epoch() const { return stop_after > 0 && stop_after < epochs ? stop_after : epochs; }
};

// The flags from argv, or nothing after --help. Every path the run will write is checked first,
// so that a typo is an error naming the flag (exit 2), not a failure after the training.
std::optional<Flags> parse_flags(int argc, char** argv);

// --comm-hook NAME: registers that hook of dist/comm_hooks.h on `ddp` (torch's
// ddp.register_comm_hook), or none. PowerSGD's state (--powersgd-rank, --powersgd-start-iter) is
// made in `powersgd`, which must outlive `ddp`. Returns "; comm hook NAME" for the DDP line, or "".
std::string register_comm_hook(const Flags& f, dist::DistributedDataParallel& ddp,
                               std::optional<dist::PowerSGDState>& powersgd);

// ---- Checkpoints: "DDPCKPT2", the epochs planned and the epochs done, then each tensor of
// `state` as (count, float32 values), written with dist::write_file_atomically. The plan is part
// of the run: the learning rate anneals over all its epochs.
void save_checkpoint(const std::string& path, const std::vector<dist::Tensor*>& state,
                     std::int64_t epochs_planned, std::int64_t epochs_done);
// Reads a checkpoint into `state` (the same tensors, in the same order); returns the epochs done.
// A file that is not one, is cut short, holds a model of another size, or was written by a run
// planned for other than `epochs_planned` epochs is an error saying so.
std::int64_t load_checkpoint(const std::string& path, const std::vector<dist::Tensor*>& state,
                             std::int64_t epochs_planned);

// True on every rank when every rank's fingerprint (dist::fingerprint) is this rank's: an
// all_gather of the 64-bit values. A collective.
bool same_on_every_rank(const std::string& fingerprint, dist::Device device);

// ---- Printing

// Rank 0's progress bar, on a terminal only (redrawn in place on stderr); nothing in a pipe.
void progress(int epoch, int epochs, std::size_t step, std::size_t steps, double loss);
std::string rate(double lr);  // "0.08536": 4 significant digits
// The last line: "MISMATCH: ..." (then kExitFailure on rank 0) or "OK: ...": the exit status.
// `floor` is the accuracy required (0: none). After destroy_process_group.
int verdict(int rank, bool job_ok, bool identical, bool once, bool reached, double floor);

}  // namespace ch09
