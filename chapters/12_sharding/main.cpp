// Chapter 12 — sharding: ZeRO's three stages, the last one FSDP, on the ring of chapter 04.
//
// DDP (chapters 08, 09) keeps on every rank the whole model, its whole gradient and the whole
// optimizer state: with Adam, 16 bytes a value on each of W ranks, W copies of the same numbers.
// A ring all_reduce is a reduce_scatter followed by an all_gather, and ZeRO takes it apart there:
// after the reduce_scatter each rank holds the mean gradient of its 1/W of the values only, its
// shard, steps only that (so only its optimizer state exists), and the all_gather brings every
// rank the updated values. Same traffic as DDP, a fraction of the model state. Stage 1 shards the
// optimizer state, stage 2 the gradients too, stage 3 (torch's FSDP) the parameters too: each
// layer is gathered just before its forward and its backward and freed after. This program
// trains chapter 09's Fashion-MNIST data on a wider MLP with Adam at the stage --stage names,
// prints the model state each rank holds and the bytes it sends beside the closed forms, and
// checks that the weights end as DDP's do, bit for bit, by training DDP from the same start in
// the same run, its sums added in the same order as the stage's.
//
// You will learn: ZeRO stages 1-3 and FSDP; a unit of sharding; what a rank holds and sends at
// each stage, and why the weights do not change; prefetch, the overlap of stage 3.
// Builds on: chapter 04 (the ring, reduce_scatter, all_gather), 09 (DDP, buckets, the data).
//
// Run:   ./tutorial run 12       (or: ddprun --standalone --nproc-per-node 2 ch12_sharding)
// Prints, among other lines:
//   [rank 0/2] epoch 2/2: train loss 0.6274, test accuracy 79.10%
//   [rank 0/2] OK: stage 3 ends with DDP's weights, bit for bit (fingerprint f0f4e2f02bd2b2dd); ...
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/sampler.h>
#include <dist/sharded.h>
#include <dist/zero_first.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support.h"

namespace {

using namespace ch12;
using ch09::Images;
using ch09::Indices;

// What one training leaves, to print and to compare with DDP's.
struct Run {
  std::vector<float> weights;   // the whole model at the end, as every rank holds it
  Held held, held_expected;     // after the first step
  std::int64_t peak_whole = 0;  // the most parameter bytes held whole at once during a step
  std::int64_t bytes_per_step = 0, steps = 0;
  std::chrono::steady_clock::duration training_time{};
  std::int64_t trained = 0;         // samples, this rank
  Traffic ddp_traffic;              // stage 0: the closed form for its buckets
  std::int64_t buckets = 0;         // stage 0: DDP's buckets, bytes (not model state)
  std::int64_t peak_allocated = 0;  // every tensor's bytes, at the training steps' high-water mark
};

// Trains from rank 0's initial weights at `stage` (kReference: the run the stages are checked
// against); prints the epochs when `print`. `Parallel` (support.h) sends each of a step's calls
// to DDP (stage 0), to dist::ShardedDataParallel (1-3) or to the reference.
Run train(const Flags& f, int stage, const Images& train_set, const Images& test, bool print) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  const dist::Device device = dist::get_device();
  dist::Generator init_gen(static_cast<std::uint64_t>(f.seed + rank));
  Mlp model(init_gen, device);
  Parallel parallel(model, f, stage);  // every rank now holds rank 0's weights (or its shard)
  dist::Adam adam(parallel.optimized(), f.lr);
  Run run;
  const auto whole_bytes = [&] {
    std::int64_t bytes = 0;
    for (dist::Parameter* p : model.parameters())
      bytes += static_cast<std::int64_t>(p->data.nbytes());
    return bytes;
  };

  dist::DistributedSampler sampler(train_set.size(), {.seed = f.seed});
  const dist::BatchSampler batch_sampler(sampler, f.batch_size, /*drop_last=*/false);
  for (int epoch = 0; epoch < f.epochs; ++epoch) {
    sampler.set_epoch(epoch);
    const auto batches = batch_sampler.batches();
    const auto started = std::chrono::steady_clock::now();
    dist::reset_peak_memory_stats(device);  // from here: the model as held, activations, messages
    const std::int64_t sent_before = parallel.bytes_sent();
    double loss_sum = 0;
    for (const Indices& batch : batches) {
      adam.zero_grad();
      auto [x, y] = ch09::batch_tensors(train_set, batch, device, nullptr);
      dist::Tensor h = x;
      for (std::size_t u = 0; u < kLayers; ++u) {  // forward, layer by layer
        parallel.before_forward(u);
        run.peak_whole = std::max(run.peak_whole, whole_bytes());
        h = model.layers[u].forward(h);
        if (u + 1 < kLayers) h = model.relus[u].forward(h);
        parallel.after_forward(u);
      }
      const dist::CrossEntropy loss = dist::cross_entropy(h, y, ch09::kClasses);
      dist::Tensor g = loss.grad;
      for (std::size_t u = kLayers; u-- > 0;) {  // backward, from the last layer
        parallel.before_backward(u);
        run.peak_whole = std::max(run.peak_whole, whole_bytes());
        if (u + 1 < kLayers) g = model.relus[u].backward(g);
        g = model.layers[u].backward(g);
        parallel.after_backward(u);
      }
      parallel.finish_gradient_sync();  // every gradient (or shard of one): the ranks' mean
      adam.step();                      // DDP: the whole model; stages 1-3: this rank's shards
      parallel.after_step();
      if (run.steps++ == 0 && stage != kReference) {
        run.held = measured(model, parallel.sharded.get(), adam);
        run.held_expected = expected(stage, world);
        if (parallel.ddp) {
          run.ddp_traffic = ddp_traffic(*parallel.ddp, world);
          run.buckets = bucket_bytes(*parallel.ddp);
        }
      }
      loss_sum += loss.loss;
    }
    run.training_time += std::chrono::steady_clock::now() - started;
    run.peak_allocated = std::max(run.peak_allocated, dist::max_memory_allocated(device));
    run.bytes_per_step += parallel.bytes_sent() - sent_before;
    for (const Indices& b : batches) run.trained += static_cast<std::int64_t>(b.size());

    dist::Tensor mean_loss =
        dist::full(1, loss_sum / static_cast<double>(batches.size()), dist::kFloat64, device);
    dist::all_reduce(mean_loss);
    const auto [correct, counted] = evaluate(test, device, [&](const dist::Tensor& x) {
      dist::Tensor h = x;
      for (std::size_t u = 0; u < kLayers; ++u) {
        parallel.before_forward(u);  // stage 3: a gather, so every rank runs as many forwards
        h = model.layers[u].forward(h);
        if (u + 1 < kLayers) h = model.relus[u].forward(h);
        parallel.after_forward(u);
      }
      return h;
    });
    if (print) {
      dist::out0() << "epoch " << epoch + 1 << "/" << f.epochs << ": train loss "
                   << ch09::fixed4(mean_loss.item(0) / world) << ", test accuracy "
                   << ch09::percent(correct, counted);
    }
  }
  run.bytes_per_step /= std::max<std::int64_t>(run.steps, 1);
  for (std::size_t u = 0; u < kLayers; ++u) {  // stage 3: each layer whole again, to read it
    parallel.before_forward(u);
    for (dist::Parameter* p : model.layers[u].parameters()) {
      for (float v : p->data.to_vector<float>()) run.weights.push_back(v);
    }
    parallel.after_forward(u);
  }
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const Flags& f = *parsed;

    // ---- Step 1: join; rank 0 prepares chapter 09's data while the others wait
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size();
    const std::string data = ch09::prepared_path(f.data_dir, f.train_samples, f.test_samples);
    const auto [train_set, test] = dist::zero_first([&] {
      if (!std::filesystem::exists(data)) ch09::prepare(data, f.train_samples, f.test_samples);
      return ch09::load(data, f.train_samples, f.test_samples);
    });
    std::int64_t psi = 0;
    for (std::int64_t n : unit_numels()) psi += n;
    dist::out0() << "Fashion-MNIST, 14x14: " << train_set.size() << " training and " << test.size()
                 << " test images, " << world << (world == 1 ? " rank" : " ranks") << ", batch "
                 << f.batch_size << " per rank";
    dist::out0() << "MLP 196-512-512-512-10: Ψ = " << grouped(psi)
                 << " values in 4 layers, Adam (lr " << f.lr << "); " << stage_name(f.stage)
                 << (f.stage == 3 ? (f.prefetch ? ", with prefetch" : ", without prefetch") : "");

    // ---- Step 2: train at the stage asked for
    const Run run = train(f, f.stage, train_set, test, /*print=*/true);
    if (f.throughput) {
      dist::report_throughput(run.training_time, run.trained * world);
      dist::out0() << "peak tensor memory: " << grouped(run.peak_allocated)
                   << " bytes on rank 0 (dist::max_memory_allocated: the model as held, "
                   << "activations, messages in flight)";
    }

    // ---- Step 3: what a rank holds of the model state and sends, beside the closed forms
    const bool half_ok = print_tables(f.stage, world, f.mixed_precision);
    const Held& h = run.held;
    const Held want = run.held_expected, zero = ideal(f.stage, world);
    dist::out0() << "this run (stage " << f.stage << ", W=" << world << "), on each rank after a "
                 << "step: parameters " << grouped(h.parameters) << " + gradients "
                 << grouped(h.gradients) << " + Adam state " << grouped(h.state) << " = "
                 << grouped(h.total()) << " bytes (" << mib(h.total()) << ")";
    const std::int64_t extra = want.total() - zero.total();  // stages 1, 2: the shards' copies
    dist::out0() << "  closed form " << grouped(zero.total())
                 << (extra > 0 ? " + the shards' copies " + grouped(extra) : "")
                 << (extra > 0 ? " = " + grouped(want.total()) : "")
                 << (h.total() == want.total() && h.parameters == want.parameters ? ": equal"
                                                                                  : ": DIFFERENT")
                 << (f.stage == 0 ? "; DDP's buckets beside it, not model state: " +
                                        grouped(run.buckets) + " bytes"
                                  : "");
    std::int64_t largest = 0;
    for (std::int64_t n : unit_numels()) largest = std::max(largest, 4 * n);
    const std::int64_t whole_want = f.stage == 3 ? largest : 4 * psi;
    dist::out0() << "parameters whole at once during a step: " << grouped(run.peak_whole)
                 << " bytes (" << (f.stage == 3 ? "the largest layer" : "the whole model") << ": "
                 << grouped(whole_want) << ")";
    // The ring moves (W-1)/W of each value twice (reduce_scatter, all_gather); stage 3 gathers
    // twice. DDP: by bucket (support.h's ddp_traffic).
    const std::int64_t passes = f.stage == 3 ? 3 : 2;
    const std::int64_t bytes_want = f.stage == 0 ? run.ddp_traffic.bytes
                                                 : dist::ShardedDataParallel::expected_bytes_sent(
                                                       f.stage, unit_numels(), world);
    const std::int64_t slack = run.ddp_traffic.slack;
    dist::out0() << "bytes sent per rank per step: " << grouped(run.bytes_per_step) << " ("
                 << passes << "Ψ(W-1)/W values, 4 bytes each: "
                 << grouped(4 * passes * psi * (world - 1) / world)
                 << (f.stage == 0 ? "; by bucket: " : "; with each layer's padding: ")
                 << grouped(bytes_want) << ")";

    // ---- Step 4: the same weights as DDP, trained from the same start in this run
    // An elementwise optimizer makes the same bits from the same gradients, and float32 sums the
    // same bits from the same numbers in the same order: so DDP whose all_reduce of each layer is
    // the stages' reduce_scatter, then an all_gather (SameOrderDdp, support.h), must end with the
    // same bits at every world size and --lr. No tolerance to choose.
    std::optional<Compared> difference;
    if (f.check && f.stage != 0) {
      const Run reference = train(f, kReference, train_set, test, /*print=*/false);
      difference = compare(run.weights, reference.weights);
    }
    const bool same = !difference || difference->same();
    const bool memory_ok = h.parameters == want.parameters && h.gradients == want.gradients &&
                           h.state == want.state && run.peak_whole == whole_want;
    const bool bytes_ok =
        run.bytes_per_step >= bytes_want - slack && run.bytes_per_step <= bytes_want + slack;
    const bool job_ok = dist::all_ranks_ok(same && memory_ok && bytes_ok && half_ok);
    dist::destroy_process_group();
    const std::string print = fingerprint(run.weights);
    if (!job_ok) {
      dist::out0() << "MISMATCH: the weights as DDP's " << (same ? "yes" : "no")
                   << (same ? "" : " (" + describe(*difference, run.weights.size()) + ")")
                   << ", model state as its closed form " << (memory_ok ? "yes" : "no")
                   << ", traffic as its closed form " << (bytes_ok && half_ok ? "yes" : "no");
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: "
                 << (!difference ? "weights not compared (--no-check or stage 0), fingerprint " +
                                       print + "; "
                                 : "stage " + std::to_string(f.stage) +
                                       " ends with DDP's weights, bit for bit (fingerprint " +
                                       print + "); ")
                 << "model state and traffic are their closed forms";
    return dist::kExitOk;
  });
}
