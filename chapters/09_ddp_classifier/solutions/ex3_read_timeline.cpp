// Chapter 09, exercise 3 — read a timeline: did each bucket's all_reduce overlap backward?
//
// DDP starts all-reducing a bucket as soon as backward has finished every gradient in it, on a
// thread of its own, while backward goes on with the layers below: that is the overlap. The
// program trains a three-layer model for a few steps with a dist::Timeline, writes each rank's
// trace (as the chapter's --trace does), reads it back, and reports per bucket how long its
// all_reduces ran and how much of that ran during backward, from the spans' intersections.
// The buckets of the first layer's gradients (fc1) are ready only when backward ends: nothing of
// them overlaps. Try --bucket-mb 25: one bucket, and no overlap at all.
// Grade it: ./tutorial check 09-ex3        Run it: ./tutorial run 09-ex3 --solution
#include <dist/ddp.h>
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/trace.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "trace_spans.h"

namespace {

using ch09::TraceSpan;
constexpr std::int64_t kIn = 784, kHidden = 256, kMiddle = 64, kOut = 10, kBatch = 64;
const std::string kNames[] = {"fc1.weight", "fc1.bias",   "fc2.weight",
                              "fc2.bias",   "fc3.weight", "fc3.bias"};  // DDP's order

// Weights from a formula, about the size nn.Linear's initialisation gives (1/sqrt(in)).
dist::LinearInit weights(std::int64_t in, std::int64_t out) {
  dist::LinearInit init;
  for (std::int64_t i = 0; i < in * out; ++i) {
    init.weight.push_back(static_cast<float>((i * 37 % 101) - 50) / 50.0f /
                          std::sqrt(static_cast<float>(in)));
  }
  init.bias.assign(static_cast<std::size_t>(out), 0.0f);
  return init;
}

// This step's batch on this rank: inputs in [0, 1) and targets, from formulas.
std::pair<dist::Tensor, dist::Tensor> batch(int rank, int step) {
  std::vector<float> x, y;
  for (std::int64_t n = 0; n < kBatch; ++n) {
    for (std::int64_t i = 0; i < kIn; ++i) {
      x.push_back(static_cast<float>((n * 13 + i * 7 + step * 5 + rank * 3) % 17) / 17.0f);
    }
    for (std::int64_t o = 0; o < kOut; ++o) y.push_back(o == (n + step + rank) % kOut);
  }
  return {dist::Tensor::from(x), dist::Tensor::from(y)};
}

// How long span a ran while span b did, in microseconds (0 when they never met).
long long overlap_us(const TraceSpan& a, const TraceSpan& b) {
  return std::max(0LL, std::min(a.end_us, b.end_us) - std::max(a.start_us, b.start_us));
}

// How much of the all_reduce span ran during backward (the spans named "backward ...").
long long during_backward_us(const TraceSpan& all_reduce, const std::vector<TraceSpan>& spans) {
  long long total = 0;
  for (const TraceSpan& s : spans) {
    if (s.name.rfind("backward", 0) == 0) total += overlap_us(all_reduce, s);
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int steps = 5;
    double bucket_mb = 0.005;
    std::string trace_dir = "data/trace09-ex3";
    dist::Cli cli("ch09_ddp_classifier_ex3",
                  "Trace a few DDP steps, then say per bucket how much of its all_reduce ran "
                  "during backward.");
    cli.add_int("--steps", &steps, "training steps to trace", 1, 100);
    cli.add_double("--bucket-mb", &bucket_mb, "DDP's bucket_cap_mb", 1e-6, 1000);
    cli.add_string("--trace-dir", &trace_dir, "where each rank writes rankR.json");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    dist::init_process_group(cli.init_options());
    const int rank = dist::get_rank();

    // ---- Train a few steps with a timeline: backward layer by layer, as the chapter does
    dist::Timeline timeline(rank);
    timeline.name_this_thread("main");
    dist::Linear fc1(kIn, kHidden, weights(kIn, kHidden)),
        fc2(kHidden, kMiddle, weights(kHidden, kMiddle)),
        fc3(kMiddle, kOut, weights(kMiddle, kOut));
    dist::ReLU relu1, relu2;
    std::vector<dist::Parameter*> parameters;
    for (dist::Linear* layer : {&fc1, &fc2, &fc3}) {
      for (dist::Parameter* p : layer->parameters()) parameters.push_back(p);
    }
    dist::DistributedDataParallel ddp(parameters,
                                      {.bucket_cap_mb = bucket_mb, .timeline = &timeline});
    dist::SGD optimizer(parameters, 0.01);
    for (int step = 0; step < steps; ++step) {
      auto [x, y] = batch(rank, step);
      dist::MseLoss loss;
      {
        const dist::Timeline::Span s(&timeline, "forward");
        loss = dist::mse_loss(
            fc3.forward(relu2.forward(fc2.forward(relu1.forward(fc1.forward(x))))), y);
      }
      dist::Tensor g;
      {
        const dist::Timeline::Span s(&timeline, "backward fc3");
        g = relu2.backward(fc3.backward(loss.grad));
      }
      ddp.grads_ready(fc3.parameters());
      {
        const dist::Timeline::Span s(&timeline, "backward fc2");
        g = relu1.backward(fc2.backward(g));
      }
      ddp.grads_ready(fc2.parameters());
      {
        const dist::Timeline::Span s(&timeline, "backward fc1");
        fc1.backward(g);
      }
      ddp.grads_ready(fc1.parameters());
      ddp.finish_gradient_sync();
      optimizer.step();
      optimizer.zero_grad();
    }
    dist::out0() << "DDP: " << ddp.buckets().size() << " gradient bucket"
                 << (ddp.buckets().size() == 1 ? "" : "s") << " of at most " << bucket_mb
                 << " MiB, " << steps << " steps traced";
    std::filesystem::create_directories(trace_dir);
    const std::string path = trace_dir + "/rank" + std::to_string(rank) + ".json";
    timeline.write(path);

    // ---- Read the trace back: per bucket, its all_reduces and how much of them ran in backward
    const std::vector<TraceSpan> spans = ch09::read_trace(path);
    for (std::size_t b = 0; b < ddp.buckets().size(); ++b) {
      const std::string name = "all_reduce bucket " + std::to_string(b) + " ";
      long long count = 0, total_us = 0, overlapped_us = 0, overlapped_steps = 0;
      for (const TraceSpan& s : spans) {
        if (s.name.rfind(name, 0) != 0) continue;
        const long long during = during_backward_us(s, spans);
        ++count;
        total_us += s.end_us - s.start_us;
        overlapped_us += during;
        overlapped_steps += during > 0;
      }
      std::string holds;  // the parameters packed in the bucket, by name
      for (std::size_t k : ddp.buckets()[b].params) {
        holds += (holds.empty() ? "" : ", ") + kNames[k];
      }
      dist::out() << "bucket " << b << " (" << holds << "): " << count << " all_reduces, "
                  << total_us << " us, " << overlapped_us << " us of it during backward, in "
                  << overlapped_steps << " of " << count << " steps";
    }
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
