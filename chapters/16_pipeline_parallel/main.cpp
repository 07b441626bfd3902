// Chapter 16 — pipeline parallel: the model cut by depth into stages, one per rank.
//
// Data parallelism (chapters 08-12) keeps a whole model on every rank; tensor parallelism
// (chapter 15) splits each layer. Pipeline parallelism cuts the model between layers instead:
// stage s holds a run of consecutive layers, sends its activations to stage s + 1 and receives
// their gradient back. One batch would keep one stage busy at a time, so it is cut into m
// micro-batches that follow each other through the stages. GPipe runs every forward, then every
// backward; 1F1B starts backwards as soon as it can, and so holds fewer micro-batches at once.
// This program cuts an MLP over the ranks, runs both schedules, and checks what each stage holds
// and the weights it ends with against one process training the unsplit model. With --dp N the
// ranks are N replicas of the pipeline (DP x PP), each on its own rows, gradients averaged.
//
// You will learn: how a model is cut into stages; the order GPipe and 1F1B run micro-batches in;
// the bubble (p - 1)/(m + p - 1) and how to see it in a trace; the activations held at the
// peak, m against p - s; why the pipelined weights equal one process's, bit for bit.
// Builds on: chapter 04 (collectives), 08 (Linear, SGD), 09 (a timeline), 15 (model parallel).
//
// Run:   ./tutorial run 16       (or: ddprun --standalone --nproc-per-node 4
// ch16_pipeline_parallel) Prints, among other lines:
//   [rank 0/4] 1F1B  order: F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7
//   [rank 0/4] OK: every stage's layers, stash peaks and weights are their closed forms and one
//   process's
#include <dist/device_mesh.h>
#include <dist/dist.h>
#include <dist/optim.h>
#include <dist/pipeline.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support.h"

namespace {

using namespace ch16;
using dist::ScheduleKind;

const char* name(ScheduleKind kind) {
  return kind == ScheduleKind::kGPipe ? "GPipe" : "1F1B";
}

// What one schedule's training left on this stage.
struct Run {
  ScheduleKind kind;
  Trained trained;     // this stage's parameters; on the last stage, the losses
  int peak_stash = 0;  // micro-batches stashed at once, at most, over every step
  std::int64_t peak_stash_bytes = 0;
  std::optional<dist::PipelineReport> report;  // the last step's, with --trace
};

// Trains this stage for --steps with one schedule, from the model's initial weights. The stages
// are the mesh's "pp" group; with --dp N, each of N such pipelines (replicas) takes its own rows.
Run train_pipelined(ScheduleKind kind, const dist::SequentialSpec& spec, const Flags& f,
                    dist::DeviceMesh& mesh) {
  // The stage's layers, its messages and its stash live on this rank's device: the CPU under
  // Gloo, its GPU under NCCL.
  dist::PipelineStage stage(spec, mesh.group("pp"), dist::get_device());
  dist::ProcessGroup& dp = mesh.group("dp");      // this stage in every replica
  const std::int64_t rows = f.batch_size / f.dp;  // a replica's rows of each batch
  const dist::ScheduleOptions options{.batch_size = rows, .loss = dist::PipelineLoss::kMse};
  std::unique_ptr<dist::PipelineSchedule> schedule;
  if (kind == ScheduleKind::kGPipe) {
    schedule = std::make_unique<dist::ScheduleGPipe>(stage, f.microbatches, options);
  } else {
    schedule = std::make_unique<dist::Schedule1F1B>(stage, f.microbatches, options);
  }
  dist::SGD sgd(stage.parameters(), f.lr);
  Run run{.kind = kind};
  auto timed = std::chrono::steady_clock::duration::zero();  // the steps alone (--throughput)
  for (int step = 0; step < f.steps; ++step) {
    // Replica d's rows: [d B/N, (d + 1) B/N) of the step's batch.
    const std::int64_t first = std::int64_t{step} * f.batch_size + mesh.coordinate("dp") * rows;
    // The batch enters on the first stage, the targets on the last; the others pass {}.
    const dist::Device device = dist::get_device();
    const dist::Tensor x = stage.is_first() ? inputs(first, rows).to(device) : dist::Tensor();
    const dist::Tensor y = stage.is_last() ? targets(first, rows).to(device) : dist::Tensor();
    const auto start = std::chrono::steady_clock::now();
    sgd.zero_grad();
    const std::vector<double> losses = schedule->step(x, y);  // begins with a barrier
    // Each stage steps its own layers: nothing to all_reduce along the pipeline. Across replicas,
    // DDP's mean: every stage all_reduces its gradients with the same stage of the others, / N.
    if (f.dp > 1) average_gradients(stage.parameters(), dp);
    sgd.step();
    if (step > 0 || f.steps == 1) timed += std::chrono::steady_clock::now() - start;  // 0: warm-up
    double sum = 0;
    for (double loss : losses) sum += loss;
    // The batch's loss: the replicas' means averaged over the last stages' "dp" group.
    if (stage.is_last()) run.trained.losses.push_back(mean_over(dp, sum / f.microbatches));
    run.peak_stash = std::max(run.peak_stash, schedule->stats().peak_stash);
    run.peak_stash_bytes = std::max(run.peak_stash_bytes, schedule->stats().peak_stash_bytes);
  }
  if (f.throughput)
    dist::report_throughput(timed, std::int64_t{std::max(f.steps - 1, 1)} * f.batch_size);
  if (!f.trace_dir.empty()) run.report = schedule->report();  // a collective: every stage calls it
  run.trained.params = values(stage.parameters());
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::optional<Flags> parsed = parse_flags(argc, argv);
    if (!parsed) return dist::kExitOk;  // --help
    const Flags& f = *parsed;
    dist::init_process_group(f.init);
    const int rank = dist::get_rank(), world = dist::get_world_size(), m = f.microbatches;
    const dist::SequentialSpec spec = model_spec(f);
    // The ranks as N replicas (--dp) of a pipeline of world/N stages: a row of the mesh is one
    // replica's "pp" group, a column a "dp" group (one stage of every replica). A --dp that does
    // not divide the world is the mesh's ConfigError, before any rank connects.
    std::optional<dist::DeviceMesh> mesh =
        dist::init_device_mesh({{"dp", f.dp}, {"pp", std::max(1, world / f.dp)}});
    const int s = mesh->coordinate("pp"), p = mesh->size("pp");  // this stage, of p
    if (f.dp > 1) print_replicas(*mesh, f);

    // ---- Step 1: the model cut into p stages, one per rank
    // split_stages is the cut every rank computes alike: a ConfigError here (more stages than
    // Linear layers) stops every rank before any of them waits on another.
    const std::vector<dist::LayerRange> cut = dist::split_stages(spec, p);
    const dist::LayerRange mine = cut[static_cast<std::size_t>(s)];
    dist::out0() << "MLP " << widths(spec) << " (" << f.layers << " Linear layers) cut into " << p
                 << (p == 1 ? " stage" : " stages") << "; a batch of " << f.batch_size << " rows"
                 << (f.dp > 1 ? " (" + std::to_string(f.batch_size / f.dp) + " per replica)" : "")
                 << " in " << m << " micro-batches of " << f.batch_size / f.dp / m;
    dist::out() << "stage " << s << ": layers " << mine.begin << ".." << mine.end - 1 << ": "
                << describe_layers(spec, mine);
    // Closed form: ceil(L/p) Linear layers on the first L mod p stages, floor(L/p) on the others.
    int linear_here = 0;
    for (int i = mine.begin; i < mine.end; ++i)
      linear_here +=
          spec.layers[static_cast<std::size_t>(i)].kind == dist::LayerSpec::Kind::kLinear;
    const bool cut_ok = linear_here == f.layers / p + (s < f.layers % p ? 1 : 0);

    // The mistake: the last stage built from another width receives activations of a size it
    // does not expect. The p2p layer names both ranks and both sizes, and both stages stop.
    Flags built = f;
    if (f.mistake == "mismatched-widths" && s == p - 1) built.hidden = f.hidden + 1;
    const dist::SequentialSpec stage_spec = model_spec(built);

    // ---- Step 2: the two schedules: the order each stage runs its micro-batches in
    std::vector<ScheduleKind> kinds;
    if (f.schedule != "1f1b") kinds.push_back(ScheduleKind::kGPipe);
    if (f.schedule != "gpipe") kinds.push_back(ScheduleKind::k1F1B);
    for (ScheduleKind kind : kinds) {
      std::string order;
      for (const dist::PipelineAction& a : dist::pipeline_order(kind, p, s, m))
        order += " " + a.str();
      dist::out() << name(kind) << (kind == ScheduleKind::k1F1B ? " " : "") << " order:" << order;
    }
    std::vector<Run> runs;
    for (ScheduleKind kind : kinds) runs.push_back(train_pipelined(kind, stage_spec, f, *mesh));

    // ---- Step 3: what each stage holds at its peak, and the bubble
    bool stash_ok = true;
    for (const Run& run : runs) {
      const int want = dist::peak_stash_closed_form(run.kind, p, s, m);
      dist::out() << name(run.kind) << ": at most " << run.peak_stash << " micro-batch"
                  << (run.peak_stash == 1 ? "" : "es") << " stashed, "
                  << grouped(run.peak_stash_bytes) << " bytes (closed form "
                  << (run.kind == ScheduleKind::kGPipe ? "m = " : "min(p - s, m) = ") << want
                  << ")";
      stash_ok = stash_ok && run.peak_stash == want;
    }
    dist::out0() << "bubble, closed form: (p - 1)/(m + p - 1) = " << p - 1 << "/" << m + p - 1
                 << " = " << percent(dist::bubble_fraction_closed_form(p, m))
                 << " of each step idle on every stage, with either schedule";
    if (!f.trace_dir.empty() && rank == 0) {
      std::filesystem::create_directories(f.trace_dir);
      for (const Run& run : runs) {
        const std::string path =
            f.trace_dir + "/" + (run.kind == ScheduleKind::kGPipe ? "gpipe" : "1f1b") + ".json";
        run.report->write_trace(path);
        std::string idle;
        for (int t = 0; t < p; ++t)
          idle += (t ? ", " : "") + grouped(static_cast<std::int64_t>(run.report->idle_s(t) * 1e6));
        dist::out0() << name(run.kind) << ": bubble measured "
                     << percent(run.report->bubble_fraction())
                     << " of the last step (idle µs per stage: " << idle << "); trace " << path;
      }
    }

    // ---- Step 4: training: the weights equal one process's with the same micro-batches
    // Every rank trains the unsplit model alone (it is small) and compares its own layers. With
    // --dp N that process is this rank's replica: its rows, its m micro-batches, then every
    // layer's gradients all_reduced over this rank's "dp" group and divided by N, as the stages
    // do. Each all_reduce has the same size and group order on every "dp" group, so it adds the
    // replicas in the pipeline's own order: the weights are equal bit for bit, for any lr.
    const int replica = mesh->coordinate("dp");
    const Trained reference = train_one_process(spec, f, replica, &mesh->group("dp"));
    bool weights_ok = true;
    for (const Run& run : runs) {
      weights_ok = weights_ok && same_bits(run.trained.params, stage_part(reference, spec, mine)) &&
                   (s != p - 1 || same_bits(run.trained.losses, reference.losses));
      if (s != p - 1 || replica != 0) continue;
      std::string losses;
      for (double loss : run.trained.losses) losses += (losses.empty() ? "" : ", ") + loss6(loss);
      dist::out() << name(run.kind) << ": loss per step " << losses;
    }
    const bool every_weight_ok = dist::all_ranks_ok(weights_ok);
    dist::out0() << "after " << f.steps << " steps, every stage's weights"
                 << (kinds.size() == 2 ? " (either schedule)" : "")
                 << (f.dp == 1 ? " equal one process's" : " equal one process per replica's")
                 << " with the same " << m << " micro-batches"
                 << (f.dp == 1 ? "" : ", averaged over \"dp\"")
                 << ", bit for bit: " << (every_weight_ok ? "yes" : "NO");
    if (f.dp > 1) {
      // Information, not a check: one process on the whole batch (the N x m micro-batches one
      // after the other) sums the same gradients in another order, so its float32 roundings
      // differ, and a large lr magnifies the difference step after step (support.h).
      Flags whole = f;
      whole.dp = 1;
      whole.microbatches = f.dp * m;
      const Trained one = train_one_process(spec, whole);
      double worst = 0;
      for (const Run& run : runs) {
        worst =
            std::max(worst, largest_difference(run.trained.params, stage_part(one, spec, mine)));
        if (s == p - 1) worst = std::max(worst, largest_difference(run.trained.losses, one.losses));
      }
      dist::out0() << "largest difference from one process on the whole batch (" << f.dp << " x "
                   << m << " = " << f.dp * m << " micro-batches): " << sci(max_over_ranks(worst))
                   << " of max(1, |value|), any rank";
    }

    const bool job_ok = dist::all_ranks_ok(cut_ok && stash_ok) && every_weight_ok;
    mesh.reset();  // its groups, before the default group
    dist::destroy_process_group();
    if (!job_ok) {
      const auto yes = [](bool b) { return b ? "yes" : "NO"; };
      dist::out0() << "MISMATCH: as their closed forms or one process's: the cut " << yes(cut_ok)
                   << ", the stash peaks " << yes(stash_ok) << ", the weights and losses "
                   << yes(weights_ok) << " (rank 0's; a rank may differ)";
      return rank == 0 ? dist::kExitFailure : dist::kExitOk;
    }
    dist::out0() << "OK: every stage's layers, stash peaks and weights are their closed forms and "
                    "one process's";
    return dist::kExitOk;
  });
}
