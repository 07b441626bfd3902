// Chapter 09 — ddp_classifier: a real training run with DistributedDataParallel, end to end.
//
// Post A trains ResNet50 on CIFAR-10 with DDP, and every rank calls CIFAR10(download=True): on a
// first run W processes download into one directory at once. This chapter is that flow at a size
// that trains in seconds on two CPU cores: a two-layer classifier with SyncBatchNorm on
// Fashion-MNIST (Debian's dataset-fashion-mnist, 28x28 pictures of clothes, shrunk to 14x14),
// with the data prepared once, gradient buckets that overlap backward, rank 0's BatchNorm buffers
// on every rank, a learning rate that anneals, no_sync() accumulation, an evaluation that counts
// each test image once, and checkpoints that resume to the same bits (files: support.h/.cpp).
//
// You will learn: how chapters 04-08 make one training run; buckets and overlap; SyncBatchNorm
// and broadcast_buffers; a learning-rate schedule; no_sync(); evaluation without the padding.
// Builds on: chapter 05 (rank 0 first), 06 (per-rank seeds), 07 (samplers), 08 (DDP).
//
// Run:   ./tutorial run 09       (or: ddprun --standalone --nproc-per-node 2 ch09_ddp_classifier)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 0/2] epoch 1/4: lr 0.1 to 0.08536, train loss 0.8326, test accuracy 77.15%
//   [rank 0/2] OK: the replicas are bit-identical, every test image was counted once, and ...
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/trace.h>
#include <dist/zero_first.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support.h"

namespace {

using namespace ch09;
using Counts = std::pair<std::int64_t, std::int64_t>;  // (correct, counted) test images

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
  // Trained by no one, but part of the model: BatchNorm's running statistics (torch's buffers).
  std::vector<dist::Tensor*> buffers() { return {&bn.running_mean(), &bn.running_var()}; }
  std::vector<dist::Tensor*> state() {  // what a checkpoint holds: buffers, then parameters
    std::vector<dist::Tensor*> all = buffers();
    for (dist::Parameter* p : parameters()) all.push_back(&p->data);
    return all;
  }
  dist::Tensor forward(const dist::Tensor& x) {
    return fc2.forward(relu.forward(bn.forward(fc1.forward(x))));
  }
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
};

// Every rank evaluates its shard of the test set with the same model: before the first
// evaluation forward DDP copies rank 0's BatchNorm buffers to every rank, as torch's does. The
// sampler's padding (positions rank + k * W >= n) is left out, so that each test image counts
// exactly once; one all_reduce adds up (correct, counted).
Counts evaluate(Classifier& model, dist::DistributedDataParallel& ddp, const Images& test,
                dist::Device device) {
  model.bn.train(false);
  ddp.before_forward(/*training=*/false);  // a collective: every rank, even one with no images
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const Indices mine = dist::DistributedSampler(test.size(), {.shuffle = false}).indices();
  Indices kept;
  for (std::size_t k = 0; k < mine.size(); ++k) {
    if (rank + static_cast<std::int64_t>(k) * world < test.size()) kept.push_back(mine[k]);
  }
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

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const Flags& f = *parsed;

    // ---- Step 1: join; rank 0 prepares the data while the others wait, then all read it
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const dist::Device device = dist::get_device();
    dist::Timeline timeline(rank);
    dist::Timeline* t = f.trace_dir.empty() ? nullptr : &timeline;
    if (t != nullptr) timeline.name_this_thread("main");
    const std::string data = prepared_path(f.data_dir, f.train_samples, f.test_samples);
    const auto [train, test] = dist::zero_first([&] {  // post C's torch_distributed_zero_first
      if (!std::filesystem::exists(data)) {
        prepare(data, f.train_samples, f.test_samples);  // rank 0; says "prepared PATH" on stderr
      }
      return load(data, f.train_samples, f.test_samples);  // the others find the whole file
    });
    dist::out0() << "Fashion-MNIST, 14x14: " << train.size() << " training and " << test.size()
                 << " test images, " << world << (world == 1 ? " rank" : " ranks") << ", batch "
                 << f.batch_size << " per rank";

    // ---- Step 2: the model (its own seed per rank), then DDP: rank 0's weights and buffers
    dist::Generator init_gen(static_cast<std::uint64_t>(f.seed + rank));
    // SyncBatchNorm all_reduces on the default group, from the main thread; DDP's buckets go to
    // the same group's queue (async_op), and SyncBatchNorm's calls wait for the buckets queued
    // before them, so every rank makes the same calls in the same order.
    Classifier model(init_gen, device, f.sync_bn ? &dist::default_group() : nullptr);
    int first_epoch = 0;
    if (f.resume) {
      first_epoch = static_cast<int>(load_checkpoint(f.checkpoint, model.state(), f.epochs));
    }
    // NCCL forbids two threads issuing operations on one GPU at once, even on two communicators:
    // with NCCL and SyncBatchNorm, the buckets stay on the main thread (no overlap).
    const bool nccl_sync_bn = f.sync_bn && dist::get_backend() == "nccl";
    std::optional<dist::PowerSGDState> powersgd;  // --comm-hook powersgd: outlives ddp
    auto ddp = std::make_unique<dist::DistributedDataParallel>(
        model.parameters(), dist::DdpOptions{.bucket_cap_mb = f.bucket_mb,
                                             .overlap = f.overlap && !nccl_sync_bn,
                                             .timeline = t,
                                             .buffers = model.buffers()});  // broadcast_buffers
    const std::string hook = register_comm_hook(f, *ddp, powersgd);         // --comm-hook: or none
    dist::out0() << "DDP: " << ddp->buckets().size() << " gradient buckets of at most "
                 << f.bucket_mb << " MiB, " << (ddp->overlapping() ? "overlapping" : "after")
                 << " backward; BatchNorm " << (f.sync_bn ? "synchronised, " : "per rank, ")
                 << "buffers broadcast from rank 0"
                 << (f.resume ? "; resumed after epoch " + std::to_string(first_epoch) : "")
                 << hook;

    // ---- Step 3: SGD, its learning rate falling along a cosine to 0 at the run's last step
    dist::DistributedSampler sampler(train.size(), {.seed = f.seed});
    const dist::BatchSampler batch_sampler(sampler, f.batch_size, /*drop_last=*/false);
    const std::int64_t steps_per_epoch = (batch_sampler.size() + f.accumulate - 1) / f.accumulate;
    dist::SGD optimizer(model.parameters(), f.lr);
    dist::CosineAnnealingLR schedule(optimizer, f.epochs * steps_per_epoch);        // torch's T_max
    while (schedule.last_epoch() < first_epoch * steps_per_epoch) schedule.step();  // resumed

    // ---- Step 4: train; every `accumulate` batches make one step
    std::optional<Counts> evaluated;                                   // the last epoch's
    auto training_time = std::chrono::steady_clock::duration::zero();  // steps only (--throughput)
    std::int64_t trained = 0;                                          // samples, this rank
    std::int64_t step_bytes = 0;  // the gradients' bytes this rank sent in the last step
    for (int epoch = first_epoch; epoch < f.last_epoch(); ++epoch) {  // --stop-after: earlier
      const auto epoch_started = std::chrono::steady_clock::now();
      const double first_lr = optimizer.lr();
      sampler.set_epoch(epoch);
      // Per rank and per epoch, so a resumed run draws what the uninterrupted one drew.
      dist::Generator flips(static_cast<std::uint64_t>(f.seed) * 1000003 + epoch * 1009 + rank + 1);
      const auto batches = batch_sampler.batches();  // a new pass: set_epoch's shuffle
      double loss_sum = 0;
      for (std::size_t step = 0; step < batches.size(); ++step) {
        const std::int64_t sent = ddp->bytes_sent();
        // --8<-- [start:train_step]
        const bool sync = (step + 1) % f.accumulate == 0 || step + 1 == batches.size();
        std::optional<dist::DistributedDataParallel::NoSync> local;
        if (!sync) local.emplace(*ddp);  // torch: with ddp.no_sync():
        auto [x, y] = batch_tensors(train, batches[step], device, &flips);
        dist::CrossEntropy loss;
        {
          const dist::Timeline::Span s(t, "forward");
          ddp->before_forward();  // torch's DDP.forward: rank 0's buffers first, when due
          loss = dist::cross_entropy(model.forward(x), y, kClasses);
        }
        // Each loss counts 1/K of the step: the step is then the mean over its K batches. The
        // epoch's last group may hold fewer than K; it is the mean over those.
        const std::size_t group = std::min<std::size_t>(
            f.accumulate, batches.size() - step / f.accumulate * f.accumulate);
        if (group > 1) loss.grad *= 1.0 / static_cast<double>(group);
        model.backward(loss.grad, *ddp, t);
        if (sync) {
          const dist::Timeline::Span s(t, "optimizer step");
          optimizer.step();
          optimizer.zero_grad();
          schedule.step();
        }
        // --8<-- [end:train_step]
        if (sync) step_bytes = ddp->bytes_sent() - sent;
        loss_sum += loss.loss;
        progress(epoch, f.epochs, step, batches.size(), loss_sum / static_cast<double>(step + 1));
      }
      training_time += std::chrono::steady_clock::now() - epoch_started;
      for (const auto& b : batches) trained += static_cast<std::int64_t>(b.size());

      // ---- Step 5: evaluate on the held-out images; rank 0 checkpoints
      dist::Tensor mean_loss = dist::full(1, loss_sum / batches.size(), dist::kFloat64, device);
      dist::all_reduce(mean_loss);
      evaluated = evaluate(model, *ddp, test, device);
      dist::out0() << "epoch " << epoch + 1 << "/" << f.epochs << ": lr " << rate(first_lr)
                   << " to " << rate(optimizer.lr()) << ", train loss "
                   << fixed4(mean_loss.item(0) / world) << ", test accuracy "
                   << percent(evaluated->first, evaluated->second);
      if (!f.checkpoint.empty() && rank == 0) {
        save_checkpoint(f.checkpoint, model.state(), f.epochs, epoch + 1);  // all hold the same
      }
    }
    if (f.throughput) dist::report_throughput(training_time, trained * world);  // equal shards

    // ---- Step 6: the verdict. For any flags, DDP's promises: the same bits on every rank
    // (parameters, buffers), each test image counted once. The accuracy only where it is known.
    const auto [correct, counted] = evaluated ? *evaluated : evaluate(model, *ddp, test, device);
    const std::string print = dist::fingerprint(model.parameters(), model.buffers());
    dist::out() << "replica fingerprint " << print;
    const bool identical = same_on_every_rank(print, device);  // an all_gather of the prints
    dist::out0() << "held-out accuracy " << percent(correct, counted) << " on " << counted
                 << " test images";
    if (!hook.empty()) dist::out0() << "gradient bytes sent in the last step: " << step_bytes;
    if (t != nullptr) timeline.write(f.trace_dir + "/rank" + std::to_string(rank) + ".json");
    const bool known = f.default_run() && world <= 4;  // where the README measured the floor
    const double floor = known ? std::max(0.75, f.min_accuracy) : f.min_accuracy;
    const bool once = counted == test.size();
    const bool reached = static_cast<double>(correct) >= floor * static_cast<double>(counted);
    const bool job_ok = dist::all_ranks_ok(identical && once && reached);
    ddp.reset();  // its gradient group goes before the default group
    dist::destroy_process_group();
    return verdict(rank, job_ok, identical, once, reached, floor);
  });
}
