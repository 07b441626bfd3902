// Chapter 11 — fault_tolerance: a job that survives a crash and ends with the same bits.
//
// A rank of a long job dies: a machine reboots, a process runs out of memory, someone kills it.
// With torchrun --max-restarts N (ddprun's flag too) the launcher then stops every rank and starts
// them all again; what the new attempt knows is what the old one wrote down. This chapter is
// chapter 08's training, with momentum (so the optimizer has state) and a random jitter per rank
// (so each rank's generator has state too), made fault tolerant as part 4 of PyTorch's DDP
// tutorial series does (multigpu_torchrun.py): write a snapshot now and then, load it at start.
// Here the snapshot is taken every few steps, mid-epoch, holds everything the loop changes, and
// every machine keeps a copy, so the job resumes at the exact sample whether or not the machines
// share a disk, and ends with the bits of a run that never crashed.
//
// You will learn: what a snapshot must hold (model, optimizer, position, every rank's generator)
// and why leaving out any of it changes the result; how ranks on machines with their own disks
// agree on one snapshot; why every rank restarts when one dies; what a restart costs (the work
// since the last snapshot, and a new rendezvous).
// Builds on: chapter 06 (per-rank generators), chapter 07 (set_epoch, a resumed sampler),
// chapter 08 (DDP), chapter 09 (checkpoints written atomically).
// Support code (the flags, the data, the snapshot's file layout, its broadcast) is in support.h.
//
// Run:   ./tutorial run 11
//        (or: ddprun --standalone --nproc-per-node 2 --max-restarts 1 ch11_fault_tolerance
//             --crash-at-step 45)
// Prints, among other lines:
//   [rank 1/2] crashing on purpose before step 45 (attempt 0)
//   [rank 0/2] attempt 1: resumed from ch11_snapshot.bin at step 40 (epoch 2, step 8 of 16),
//              rank 0's copy
//   [rank 0/2] OK: the replicas are bit-identical, and the job resumed at its snapshot's step
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sampler.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "support.h"

namespace {

using Indices = std::vector<std::int64_t>;

// Every rank calls this (all_gather is a collective). The model and the optimizer are the same on
// every rank (DDP); the generators are not, so they are all-gathered, and each machine's local
// rank 0 writes the whole snapshot to its own --snapshot path: a copy per machine, even with no
// shared disk. Atomically: a crash while writing leaves the last snapshot whole.
void take_snapshot(const ch11::Flags& f, std::int64_t steps_done, dist::Linear& model,
                   const dist::SGD& optimizer, const dist::Generator& jitter) {
  std::vector<dist::Tensor> generators;
  dist::all_gather(generators, jitter.get_state().to(dist::get_device()));
  if (dist::get_local_rank() != 0) return;
  ch11::Snapshot s{.steps_done = steps_done,
                   .parameters = {},
                   .momentum_buffers = optimizer.momentum_buffers(),
                   .generators = generators};
  for (const dist::Parameter* p : model.parameters()) s.parameters.push_back(p->data);
  ch11::write_snapshot(f.snapshot, f, dist::get_world_size(), s);
}

// Every rank calls this (collectives). The ranks agree on the newest copy any machine holds (the
// most steps done), and the lowest rank that holds it sends it to all; each takes back what the
// loop had changed. Returns the steps already done (the loop goes on from there) and whose copy
// it was; nothing when no machine holds a snapshot.
struct Resumed {
  std::int64_t steps_done;
  int from_rank;
};
std::optional<Resumed> resume(const ch11::Flags& f, dist::Linear& model, dist::SGD& optimizer,
                              dist::Generator& jitter) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const std::optional<ch11::Snapshot> mine = ch11::read_local_copy(f, world);
  const std::int64_t newest = ch11::max_over_ranks(mine ? mine->steps_done : -1);
  if (newest < 0) return std::nullopt;
  const auto holder =
      static_cast<int>(ch11::min_over_ranks(mine && mine->steps_done == newest ? rank : world));
  const ch11::Snapshot s = ch11::broadcast_snapshot(mine, holder, f, world);
  const std::vector<dist::Parameter*> params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i]->data = s.parameters[i].to(params[i]->data.device());
  }
  optimizer.load_momentum_buffers(s.momentum_buffers);
  jitter.set_state(s.generators[dist::get_rank()]);  // this rank's own stream, where it was
  return Resumed{s.steps_done, holder};
}

// A crash, as a real one happens: no goodbye to the other ranks, no destructors, no flush.
[[noreturn]] void crash(std::int64_t step, int attempt) {
  dist::out() << "crashing on purpose before step " << step << " (attempt " << attempt << ")";
  std::_Exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<ch11::Flags> parsed = ch11::parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const ch11::Flags& f = *parsed;

    // ---- Step 1: join the group, and learn which attempt this is
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const int attempt = ch11::restart_count();  // TORCHELASTIC_RESTART_COUNT: 0, 1, ...
    const int crash_rank = f.crash_rank < 0 ? world - 1 : f.crash_rank;
    const dist::Device device = dist::get_device();
    const ch11::Dataset data = ch11::make_dataset(f.samples, f.seed);

    // ---- Step 2: everything the loop changes: the model, the optimizer (momentum is state),
    // this rank's jitter generator, the position. The sampler is rebuilt from the epoch.
    dist::Linear model(1, 1, ch11::initial_weights(f.seed, rank), device);
    dist::SGD optimizer(model.parameters(), f.lr, {.momentum = f.momentum});
    dist::Generator jitter(ch11::jitter_seed(f.seed, rank));
    dist::DistributedSampler sampler(f.samples, {.seed = f.seed});
    const std::int64_t steps_per_epoch = (sampler.num_samples() + f.batch_size - 1) / f.batch_size;
    const std::int64_t total_steps = steps_per_epoch * f.epochs;

    // ---- Step 3: resume from the newest snapshot any machine holds, if there is one
    const std::optional<Resumed> resumed = resume(f, model, optimizer, jitter);
    std::int64_t done = resumed ? resumed->steps_done : 0;
    if (resumed) {
      const ch11::Position at = ch11::position(done, steps_per_epoch);
      dist::out0() << "attempt " << attempt << ": resumed from " << f.snapshot << " at step "
                   << done << " (epoch " << at.epoch << ", step " << at.step << " of "
                   << steps_per_epoch << "), rank " << resumed->from_rank << "'s copy";
    } else {
      dist::out0() << "attempt " << attempt << ": no snapshot at " << f.snapshot
                   << ", starting at step 0 of " << total_steps;
    }
    const std::int64_t resumed_at = done;

    // ---- Step 4: wrap it: rank 0's weights everywhere (after a resume, they are already equal)
    dist::DistributedDataParallel ddp(model.parameters());

    // ---- Step 5: train from the exact sample the snapshot left off at
    for (ch11::Position at = ch11::position(done, steps_per_epoch); at.epoch < f.epochs;
         at = {at.epoch + 1, 0}) {
      sampler.set_epoch(at.epoch);  // the epoch's shuffle, as the uninterrupted run had it
      const std::vector<Indices> batches =
          dist::BatchSampler(sampler, f.batch_size, false).batches();
      for (std::int64_t step = at.step; step < steps_per_epoch; ++step, ++done) {
        if (attempt == 0 && done == f.crash_at_step && rank == crash_rank) crash(done, attempt);
        auto [x, y] = ch11::jittered_batch(data, batches[step], jitter, device);
        optimizer.zero_grad();
        const dist::MseLoss loss = dist::mse_loss(model.forward(x), y);
        model.backward(loss.grad);
        ddp.average_gradients();
        optimizer.step();
        if ((done + 1) % f.snapshot_every == 0) {
          take_snapshot(f, done + 1, model, optimizer, jitter);
        }
        if (f.step_delay_ms > 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(f.step_delay_ms));
        }
      }
    }

    // ---- Step 6: the final weights, bit for bit: the same with or without a crash
    dist::out() << "final: " << ch11::weights_text(model);
    std::vector<dist::Tensor> buffers = optimizer.momentum_buffers();  // a copy to hash
    std::vector<dist::Tensor*> state;
    for (dist::Tensor& b : buffers) state.push_back(&b);
    dist::out0() << "fingerprint of the model and the optimizer: "
                 << dist::fingerprint(model.parameters(), state);
    dist::out0() << "loss on all " << f.samples << " samples: " << ch11::full_loss(model, data);

    // ---- Step 7: check what a rank can check alone, then close the job and its snapshot
    std::vector<dist::Tensor> everyone;
    bool identical = true;
    for (const dist::Parameter* p : model.parameters()) {
      dist::all_gather(everyone, p->data);
      for (const dist::Tensor& t : everyone) identical = identical && t.equal(p->data);
    }
    const bool ok = dist::all_ranks_ok(identical && done == total_steps);
    // The job is done: the next job starts from the beginning, not from this one's end.
    if (dist::get_local_rank() == 0) std::filesystem::remove(f.snapshot);  // every machine's copy
    if (rank == 0) {
      if (ok) {
        dist::out0() << "OK: the replicas are bit-identical, and the job resumed at its "
                        "snapshot's step ("
                     << resumed_at << ")";
      } else {
        dist::out0() << "MISMATCH: the replicas differ, or the job did not reach its last step";
      }
    }
    dist::destroy_process_group();
    return ok || rank != 0 ? dist::kExitOk : dist::kExitFailure;
  });
}
