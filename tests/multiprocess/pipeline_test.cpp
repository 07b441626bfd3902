// dist::PipelineStage and the GPipe / 1F1B schedules on real processes (chapter 16): after
// several SGD steps every stage's weights equal, bit for bit, one process's running the unsplit
// model on the same micro-batches (p = 1, 2, 4; m = 1, 4, 8), and one process's on whole batches
// to float32 rounding; each stage's stash peaks at its closed form; the report and its trace
// have every stage's spans; bad input is a dist::ConfigError on every rank before any waits.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/pipeline.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::ScheduleKind;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// 5 Linear layers (8 -> 12 -> 12 -> 12 -> 12 -> 6) with ReLUs between: at 4 stages, 2 + 1 + 1 + 1.
const dist::SequentialSpec kModel = dist::mlp_spec({8, 12, 12, 12, 12, 6}, 7);
constexpr std::int64_t kBatch = 16, kIn = 8, kOut = 6;
constexpr int kSteps = 3;
constexpr double kLr = 0.05;

// A step's batch, the same on every rank and run.
dist::Tensor inputs(int step) {
  dist::Generator g(100 + static_cast<std::uint64_t>(step));
  return dist::randn(kBatch * kIn, g);
}
dist::Tensor targets(int step) {
  dist::Generator g(200 + static_cast<std::uint64_t>(step));
  return dist::randn(kBatch * kOut, g);
}
dist::Tensor labels(int step) {
  dist::Generator g(300 + static_cast<std::uint64_t>(step));
  return dist::randint(0, kOut, kBatch, g);
}

struct Trained {
  std::vector<std::vector<float>> params;  // every parameter of the model, in order
  std::vector<double> losses;              // every step's micro-batch losses, in order
};

std::vector<std::vector<float>> values(const std::vector<dist::Parameter*>& params) {
  std::vector<std::vector<float>> out;
  for (dist::Parameter* p : params) out.push_back(p->data.to_vector<float>());
  return out;
}

// The reference: m micro-batches one after the other (forward, loss, backward: the grads add
// up), the sum divided by m, an SGD step. m = 0: the whole batch at once.
Trained train_one_process(int m, bool cross_entropy) {
  dist::Sequential model(kModel);  // the unsplit model, in one process
  dist::SGD opt(model.parameters(), kLr);
  Trained t;
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const dist::Tensor x = inputs(step);
    const dist::Tensor y = cross_entropy ? labels(step) : targets(step);
    const int parts = m == 0 ? 1 : m;
    const std::int64_t rows = kBatch / parts, per_row = cross_entropy ? 1 : kOut;
    for (int i = 0; i < parts; ++i) {
      const dist::Tensor out = model.forward(x.slice(i * rows * kIn, rows * kIn));
      const dist::Tensor yi = y.slice(i * rows * per_row, rows * per_row);
      if (cross_entropy) {
        dist::CrossEntropy loss = dist::cross_entropy(out, yi, kOut);
        t.losses.push_back(loss.loss);
        model.backward(loss.grad);
      } else {
        dist::MseLoss loss = dist::mse_loss(out, yi);
        t.losses.push_back(loss.loss);
        model.backward(loss.grad);
      }
    }
    if (parts > 1)
      for (dist::Parameter* p : model.parameters()) p->grad /= static_cast<double>(parts);
    opt.step();
  }
  t.params = values(model.parameters());
  return t;
}

std::unique_ptr<dist::PipelineSchedule> make_schedule(ScheduleKind kind, dist::PipelineStage& st,
                                                      int m, const dist::ScheduleOptions& o) {
  if (kind == ScheduleKind::kGPipe) return std::make_unique<dist::ScheduleGPipe>(st, m, o);
  return std::make_unique<dist::Schedule1F1B>(st, m, o);
}

// The same training, pipelined over the default group; this stage's parameters and, on the last
// stage, the losses. Checks each step's stash against the closed forms on the way.
Trained train_pipelined(ScheduleKind kind, int m, bool cross_entropy, bool* stash_ok,
                        dist::ProcessGroup& group = dist::default_group()) {
  dist::PipelineStage stage(kModel, group);
  auto schedule = make_schedule(
      kind, stage, m,
      {.batch_size = kBatch,
       .loss = cross_entropy ? dist::PipelineLoss::kCrossEntropy : dist::PipelineLoss::kMse});
  dist::SGD opt(stage.parameters(), kLr);
  Trained t;
  const int p = stage.num_stages(), s = stage.stage_index();
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    const auto losses = schedule->step(stage.is_first() ? inputs(step) : dist::Tensor(),
                                       !stage.is_last() ? dist::Tensor()
                                       : cross_entropy  ? labels(step)
                                                        : targets(step));
    t.losses.insert(t.losses.end(), losses.begin(), losses.end());
    opt.step();
    const dist::StageStats& stats = schedule->stats();
    const int want = dist::peak_stash_closed_form(kind, p, s, m);
    const std::int64_t want_bytes = want * stage.stash_bytes_closed_form(kBatch / m);
    // What the step holds besides the stash (measured: 3 activations of one micro-batch at the
    // widest layer, 12, while a backward runs: the gradient that came in, the layer's copy of
    // it, the one it makes), with room for one more.
    const std::int64_t slack = 4 * (kBatch / m) * 12 * 4;
    const bool ok = stats.peak_stash == want && stats.peak_stash_bytes == want_bytes &&
                    stats.peak_memory_bytes >= want_bytes &&
                    stats.peak_memory_bytes <= want_bytes + slack && stage.stashed() == 0;
    if (!ok || std::getenv("PIPELINE_TEST_VERBOSE") != nullptr) {
      std::printf(
          "stage %d step %d: peak stash %d (closed form %d), %lld bytes (closed form "
          "%lld), peak memory %lld bytes\n",
          s, step, stats.peak_stash, want, static_cast<long long>(stats.peak_stash_bytes),
          static_cast<long long>(want_bytes), static_cast<long long>(stats.peak_memory_bytes));
      *stash_ok = false;
    }
  }
  t.params = values(stage.parameters());
  return t;
}

// The reference's parameters that stage `s` holds: those of the Linear layers in its range.
std::vector<std::vector<float>> stage_part(const Trained& whole, int p, int s) {
  const auto range = dist::split_stages(kModel, p)[static_cast<std::size_t>(s)];
  int before = 0, inside = 0;
  for (int i = 0; i < range.end; ++i) {
    if (kModel.layers[static_cast<std::size_t>(i)].kind != dist::LayerSpec::Kind::kLinear) continue;
    (i < range.begin ? before : inside) += 1;
  }
  return {whole.params.begin() + 2 * before, whole.params.begin() + 2 * (before + inside)};
}

// The largest difference over the largest value: float32 rounding is about 1e-7 of it.
double worst_relative(const std::vector<std::vector<float>>& a,
                      const std::vector<std::vector<float>>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    for (std::size_t k = 0; k < a[i].size() && k < b[i].size(); ++k) {
      diff = std::max(diff, std::abs(static_cast<double>(a[i][k]) - b[i][k]));
      scale = std::max(scale, std::abs(static_cast<double>(b[i][k])));
    }
  }
  return a.size() == b.size() ? diff / scale : 1e9;
}

class PipelineWorlds : public ::testing::TestWithParam<int> {};

TEST_P(PipelineWorlds, TrainToOneProcesssWeightsBitForBitWithTheSameMicroBatches) {
  const int p = GetParam();
  expect_all_ok(run_group(p, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    for (int m : {1, 4, 8}) {
      const Trained micro = train_one_process(m, false);
      const Trained whole = train_one_process(0, false);
      for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
        const char* name = kind == ScheduleKind::kGPipe ? "GPipe" : "1F1B";
        bool stash_ok = true;
        const Trained piped = train_pipelined(kind, m, false, &stash_ok);
        const auto want = stage_part(micro, p, rank);
        const bool bitwise = piped.params == want;
        const bool losses = rank != p - 1 || piped.losses == micro.losses;
        const double rel = worst_relative(piped.params, stage_part(whole, p, rank));
        std::printf(
            "p=%d m=%d %s stage %d: %s one process's micro-batched weights, losses %s; "
            "whole batch: worst relative difference %.3g\n",
            p, m, name, rank, bitwise ? "equal to" : "DIFFERENT from",
            losses ? "equal" : "DIFFERENT", rel);
        ok = ok && bitwise && losses && stash_ok && rel <= 1e-5;
      }
    }
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(Stages, PipelineWorlds, ::testing::Values(1, 2, 4),
                         [](const auto& p) { return "p" + std::to_string(p.param); });

TEST(Pipeline, CrossEntropyOnTheLastStageTrainsAsOneProcess) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [&](int rank) {
    const Trained micro = train_one_process(4, true);
    bool stash_ok = true;
    const Trained piped = train_pipelined(ScheduleKind::k1F1B, 4, true, &stash_ok);
    const bool ok = piped.params == stage_part(micro, 2, rank) &&
                    (rank == 0 || piped.losses == micro.losses) && stash_ok;
    return ok ? 0 : 1;
  }));
}

// Two pipelines of 2 stages on 4 ranks, each on a group of its own (new_group(ranks)): stage s
// is the group's rank s, whatever its global rank; both train to one process's weights.
TEST(Pipeline, RunsOnAGroupOfSomeRanks) {
  expect_all_ok(run_group(4, {.timeout = 30s}, [&](int rank) {
    std::unique_ptr<dist::ProcessGroup> first = dist::new_group({0, 1});
    std::unique_ptr<dist::ProcessGroup> second = dist::new_group({2, 3});
    dist::ProcessGroup& pp = rank < 2 ? *first : *second;
    const Trained micro = train_one_process(4, false);
    bool stash_ok = true;
    const Trained piped = train_pipelined(ScheduleKind::k1F1B, 4, false, &stash_ok, pp);
    const bool ok = pp.rank() == rank % 2 && piped.params == stage_part(micro, 2, rank % 2) &&
                    (rank % 2 == 0 || piped.losses == micro.losses) && stash_ok;
    second.reset();
    first.reset();
    return ok ? 0 : 1;
  }));
}

// At p = 4, m = 8: GPipe's stage 0 holds 8 micro-batches at its peak, 1F1B's 4 (measured by
// the tensors' bytes, so the difference shows in max_memory_allocated); every stage's report
// has its 2m spans in schedule order, inside the window, one after the other; the trace has a
// lane per stage.
TEST(Pipeline, ReportHasEveryStagesSpansAndTheTraceALanePerStage) {
  const std::string dir = ::testing::TempDir() + "pipeline_trace_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  expect_all_ok(run_group(4, {.timeout = 30s}, [&](int rank) {
    bool ok = true;
    std::int64_t peak[2] = {0, 0};
    for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
      dist::PipelineStage stage(kModel, dist::default_group());
      auto schedule = make_schedule(kind, stage, 8, {.batch_size = kBatch});
      schedule->step(rank == 0 ? inputs(0) : dist::Tensor(),
                     rank == 3 ? targets(0) : dist::Tensor());
      const dist::PipelineReport r = schedule->report();
      peak[kind == ScheduleKind::kGPipe ? 0 : 1] = r.stages[0].peak_memory_bytes;
      ok = ok && r.stages.size() == 4 && r.window_s() > 0;
      for (int s = 0; s < 4; ++s) {
        const auto order = dist::pipeline_order(kind, 4, s, 8);
        const auto& spans = r.stages[static_cast<std::size_t>(s)].spans;
        ok = ok && spans.size() == 16;
        double busy = 0, last_end = r.window_start_s;
        for (std::size_t k = 0; k < spans.size() && ok; ++k) {
          ok = spans[k].name == order[k].str() && spans[k].start_s >= last_end &&
               spans[k].end_s >= spans[k].start_s && spans[k].end_s <= r.window_end_s;
          busy += spans[k].end_s - spans[k].start_s;
          last_end = spans[k].end_s;
        }
        ok = ok && std::abs(busy - r.stages[static_cast<std::size_t>(s)].busy_s) < 1e-9 &&
             r.idle_s(s) >= 0;
      }
      const double bubble = r.bubble_fraction();
      ok = ok && bubble >= 0 && bubble < 1 && r.bubble_closed_form() == 3.0 / 11.0;
      std::printf("%s: bubble %.3f (closed form %.3f)\n",
                  kind == ScheduleKind::kGPipe ? "GPipe" : "1F1B", bubble, r.bubble_closed_form());
      if (rank == 0) {
        const std::string path =
            dir + (kind == ScheduleKind::kGPipe ? "/gpipe.json" : "/1f1b.json");
        r.write_trace(path);
        const std::string json = r.trace_json();
        for (const char* part : {"\"stage 0\"", "\"stage 3\"", "\"F7\"", "\"B7\""})
          ok = ok && contains(json, part);
        ok = ok && std::filesystem::file_size(path) > 0;
      }
    }
    // 8 - 4 micro-batches of stage 0's stash (2 Linear + 2 ReLU inputs: 8 + 12 + 12 + 12 wide, 2
    // rows each), at least, between GPipe's peak and 1F1B's.
    const std::int64_t per_microbatch = 2 * (8 + 12 + 12 + 12) * 4;
    if (rank == 0) ok = ok && peak[0] - peak[1] >= 4 * per_microbatch - 2 * 12 * 4 * 4;
    return ok ? 0 : 1;
  }));
  std::filesystem::remove_all(dir);
}

TEST(PipelineErrors, MicroBatchesThatDoNotDivideTheBatchStopEveryRankAtOnce) {
  const auto results = run_group(2, {.timeout = 30s}, [&](int) {
    dist::PipelineStage stage(kModel, dist::default_group());
    try {
      dist::ScheduleGPipe schedule(stage, 3, {.batch_size = kBatch});
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "n_microbatches = 3 does not divide batch_size = 16"))
        << describe(results);
  }
}

TEST(PipelineErrors, MoreStagesThanLinearLayersStopEveryRankAtOnce) {
  const auto results = run_group(4, {.timeout = 30s}, [&](int) {
    try {
      dist::PipelineStage stage(dist::mlp_spec({8, 8, 8, 4}, 1), dist::default_group());
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 2) << describe(results);
    EXPECT_TRUE(contains(r.output, "4 stages for a model of 3 Linear layers")) << describe(results);
  }
}

// A wrong input on stage 0 is refused there before it sends anything; stage 1, waiting at the
// step's barrier, fails when stage 0's process is gone (a dist::Error, not a hang).
TEST(PipelineErrors, AWrongInputIsRefusedOnItsStage) {
  const auto results = run_group(2, {.timeout = 10s}, [&](int rank) {
    dist::PipelineStage stage(kModel, dist::default_group());
    dist::Schedule1F1B schedule(stage, 4, {.batch_size = kBatch});
    try {
      schedule.step(rank == 0 ? dist::Tensor::zeros(kBatch * kIn - 1) : dist::Tensor(),
                    rank == 1 ? targets(0) : dist::Tensor());
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output,
                       "stage 0's input must be 16 rows of 8 float32 values "
                       "(128), got 127 torch.float32 values"))
      << describe(results);
  EXPECT_NE(results[1].exit_code, 0) << describe(results);
  EXPECT_NE(results[1].exit_code, -1) << describe(results);  // not killed at the deadline
}

// Stages built from models that disagree at the cut: stage 0 sends rows of 12, stage 1 expects
// rows of 10. The p2p layer's checked header catches it on the receiver, naming both ranks and
// both sizes, and closes the group, so stage 0 fails at once too (its irecv of the gradient, or
// its isend); the pipeline passes those errors on untouched (a dist::Error, not a ConfigError).
TEST(PipelineErrors, AMessageOfTheWrongSizeFailsBothStagesWithTheP2PError) {
  const auto results = run_group(2, {.timeout = 20s}, [&](int rank) {
    dist::PipelineStage stage(dist::mlp_spec({8, 12, rank == 0 ? 12 : 10, 6}, 1),
                              dist::default_group());
    dist::ScheduleGPipe schedule(stage, 1, {.batch_size = kBatch});
    try {
      schedule.step(rank == 0 ? inputs(0) : dist::Tensor(),
                    rank == 1 ? targets(0) : dist::Tensor());
    } catch (const dist::ConfigError& e) {
      std::fprintf(stderr, "config error: %s\n", e.what());
      return 3;
    } catch (const dist::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return 0;
  });
  EXPECT_EQ(results[1].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[1].output,
                       "expected 160 float32 elements; rank 0 sent 192 float32 elements"))
      << describe(results);
  EXPECT_EQ(results[0].exit_code, 2) << describe(results);
  EXPECT_TRUE(contains(results[0].output, "failed on rank 0: rank 1 closed its connection"))
      << describe(results);
}

}  // namespace
