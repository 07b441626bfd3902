// Chapter 16, exercise 2 — the bubble, read from a trace.
//
// A GPipe step runs on every stage; report() gathers each stage's spans ("F3", "B3": start and
// end in seconds since the step began) on every rank, and rank 0 prints them. From them, work out
// what the trace shows: the step's window runs from the first span's start to the last span's
// end, over all stages; a stage's idle time is the window minus the time its spans take; the
// bubble is the idle time of all stages over p windows. Then the closed form: the bubble is
// (p - 1)/(m + p - 1) of a step; find the fewest micro-batches m that bring it under a target.
// Grade it: ./tutorial check 16-ex2        Run it: ./tutorial run 16-ex2 --solution
#include <dist/dist.h>
#include <dist/optim.h>
#include <dist/pipeline.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

struct Bubble {
  std::vector<double> idle_s;  // per stage
  double fraction = 0;         // of p windows
};

// The idle time of each stage and the bubble, from every stage's spans.
Bubble measure(const std::vector<std::vector<dist::PipelineSpan>>& spans) {
  double start = 1e300, end = -1e300;
  for (const auto& stage : spans) {
    for (const dist::PipelineSpan& span : stage) {
      start = std::min(start, span.start_s);
      end = std::max(end, span.end_s);
    }
  }
  const double window = end - start;
  Bubble b;
  double idle = 0;
  for (const auto& stage : spans) {
    double busy = 0;
    for (const dist::PipelineSpan& span : stage) busy += span.end_s - span.start_s;
    b.idle_s.push_back(window - busy);
    idle += window - busy;
  }
  b.fraction = idle / (static_cast<double>(spans.size()) * window);
  return b;
}

// The fewest micro-batches whose closed-form bubble (p - 1)/(m + p - 1) is under `target`.
int microbatches_under(int p, double target) {
  int m = 1;
  while (static_cast<double>(p - 1) / (m + p - 1) >= target) ++m;
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int m = 4, hidden = 128;
    double target = 0.2;
    dist::Cli cli("ch16_pipeline_parallel_ex2",
                  "The bubble read from a trace: one GPipe step of an MLP over the ranks; rank 0 "
                  "prints every stage's spans, each stage's idle time and the bubble, and the "
                  "micro-batches that bring the closed form under --target.");
    cli.add_int("--microbatches", &m, "m: micro-batches of the step (the batch is 16 m rows)", 1,
                256);
    cli.add_int("--hidden", &hidden, "the hidden layers' width", 1, 4096);
    cli.add_double("--target", &target, "the bubble to get under, as a fraction", 1e-3, 1);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int p = dist::get_world_size();
    const dist::SequentialSpec model =
        dist::mlp_spec({16, hidden, hidden, hidden, hidden, hidden, hidden, hidden, 4}, 3);
    dist::PipelineStage stage(model, dist::default_group());
    const std::int64_t batch = 16 * m;
    dist::ScheduleGPipe schedule(stage, m, {.batch_size = batch});
    dist::Generator g(7);
    const dist::Tensor x = dist::randn(batch * 16, g), y = dist::randn(batch * 4, g);
    schedule.step(stage.is_first() ? x : dist::Tensor(), stage.is_last() ? y : dist::Tensor());
    const dist::PipelineReport report = schedule.report();  // a collective: every stage's spans
    if (dist::get_rank() == 0) {
      std::vector<std::vector<dist::PipelineSpan>> spans;
      for (int s = 0; s < p; ++s) {
        spans.push_back(report.stages[static_cast<std::size_t>(s)].spans);
        for (const dist::PipelineSpan& span : spans.back()) {
          char line[96];
          std::snprintf(line, sizeof line, "span: stage %d %s %.9f %.9f", s, span.name.c_str(),
                        span.start_s, span.end_s);
          dist::out0() << line;
        }
      }
      const Bubble b = measure(spans);
      for (int s = 0; s < p; ++s) {
        char line[64];
        std::snprintf(line, sizeof line, "idle: stage %d %.3f us", s,
                      b.idle_s[static_cast<std::size_t>(s)] * 1e6);
        dist::out0() << line;
      }
      char line[64];
      std::snprintf(line, sizeof line, "bubble: %.6f", b.fraction);
      dist::out0() << line;
      dist::out0() << "microbatches for a bubble under " << target << ": "
                   << microbatches_under(p, target);
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
