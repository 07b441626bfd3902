// Chapter 16, exercise 1 — the 1F1B order, written by hand.
//
// Each stage runs its micro-batches' forwards (F) and backwards (B) in an order; the program
// below runs that order with the sends and receives around each step, as dist's schedules do:
// F i receives micro-batch i's activations from the stage before (not on the first stage),
// computes, sends its output on (not on the last); B i receives the gradient from the stage
// after (on the last stage: the loss's), computes, sends its input's gradient back. Write the
// order 1F1B gives stage s of p with m micro-batches: min(p - s - 1, m) forwards to warm up, then
// one forward and one backward in turn while forwards are left, then the backwards left. A stage
// then never holds more than min(p - s, m) micro-batches, and every stage ends with the weights
// one process trains on the same micro-batches, bit for bit. An order that waits for a message
// no stage will send stops at the --timeout.
// Grade it: ./tutorial check 16-ex1        Run it: ./tutorial run 16-ex1 --solution
#include <dist/dist.h>
#include <dist/nn.h>
#include <dist/optim.h>
#include <dist/pipeline.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

struct Step {
  bool forward;  // F (true) or B (false)
  int microbatch;
};

// The 1F1B order of stage s of p, with m micro-batches.
std::vector<Step> one_f_one_b(int p, int s, int m) {
  std::vector<Step> order;
  const int warmup = std::min(p - s - 1, m);
  int f = 0, b = 0;
  for (; f < warmup; ++f) order.push_back({true, f});
  for (; f < m; ++f, ++b) {
    order.push_back({true, f});
    order.push_back({false, b});
  }
  for (; b < m; ++b) order.push_back({false, b});
  return order;
}

constexpr std::int64_t kIn = 8, kOut = 4, kBatch = 12;
const dist::SequentialSpec kModel = dist::mlp_spec({kIn, 16, 16, 16, 16, kOut}, /*seed=*/5);

dist::Tensor inputs(int step) {
  dist::Generator g(100 + static_cast<std::uint64_t>(step));
  return dist::randn(kBatch * kIn, g);
}
dist::Tensor targets(int step) {
  dist::Generator g(200 + static_cast<std::uint64_t>(step));
  return dist::randn(kBatch * kOut, g);
}

// Runs `order` on this stage for one step: the micro-batches' sends and receives around each F
// and B. Returns the most micro-batches the stage held at once.
int run_order(const std::vector<Step>& order, dist::PipelineStage& stage, int step, int m) {
  dist::ProcessGroup& group = stage.group();
  const int s = stage.stage_index();
  const std::int64_t rows = kBatch / m;
  std::vector<dist::Work> sends;
  std::vector<dist::Tensor> sent;  // an isend reads its tensor until its wait()
  std::map<int, dist::Tensor> loss_grads;
  int peak = 0;
  for (const Step& st : order) {
    const int i = st.microbatch;
    if (st.forward) {
      dist::Tensor in = dist::zeros(rows * stage.in_features());
      if (stage.is_first()) {
        in = inputs(step).slice(i * rows * kIn, rows * kIn);
      } else {
        group.irecv(in, s - 1, 2 * i).wait();
      }
      dist::Tensor out = stage.forward_one_chunk(i, in);
      if (stage.is_last()) {
        loss_grads[i] = dist::mse_loss(out, targets(step).slice(i * rows * kOut, rows * kOut)).grad;
      } else {
        sent.push_back(out);
        sends.push_back(group.isend(sent.back(), s + 1, 2 * i));
      }
      peak = std::max(peak, stage.stashed());
    } else {
      dist::Tensor grad = dist::zeros(rows * stage.out_features());
      if (stage.is_last()) {
        grad = loss_grads.at(i);
      } else {
        group.irecv(grad, s + 1, 2 * i + 1).wait();
      }
      dist::Tensor grad_in = stage.backward_one_chunk(i, grad);
      if (!stage.is_first()) {
        sent.push_back(grad_in);
        sends.push_back(group.isend(sent.back(), s - 1, 2 * i + 1));
      }
    }
  }
  for (dist::Work& w : sends) w.wait();
  for (dist::Parameter* p : stage.parameters()) p->grad /= static_cast<double>(m);
  return peak;
}

// The unsplit model trained in one process on the same micro-batches: this stage's part.
std::vector<float> one_process(int steps, int m, dist::LayerRange mine, double lr) {
  dist::Sequential model(kModel);
  dist::SGD sgd(model.parameters(), lr);
  const std::int64_t rows = kBatch / m;
  for (int step = 0; step < steps; ++step) {
    sgd.zero_grad();
    for (int i = 0; i < m; ++i) {
      const dist::Tensor out = model.forward(inputs(step).slice(i * rows * kIn, rows * kIn));
      model.backward(dist::mse_loss(out, targets(step).slice(i * rows * kOut, rows * kOut)).grad);
    }
    for (dist::Parameter* p : model.parameters()) p->grad /= static_cast<double>(m);
    sgd.step();
  }
  std::vector<float> mine_values;
  for (dist::Parameter* p : model.parameters(mine))
    for (float v : p->data.to_vector<float>()) mine_values.push_back(v);
  return mine_values;
}

// FNV-1a over the float32 bits: equal weights, equal fingerprints.
unsigned long long fingerprint(const std::vector<float>& values) {
  unsigned long long h = 1469598103934665603ull;
  for (float v : values) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int k = 0; k < 4; ++k) h = (h ^ ((bits >> (8 * k)) & 0xffu)) * 1099511628211ull;
  }
  return h;
}

std::string hex(unsigned long long h) {
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", h);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    int m = 3, steps = 2;
    double lr = 0.05;
    dist::Cli cli("ch16_pipeline_parallel_ex1",
                  "1F1B by hand: each stage runs the order one_f_one_b() gives it, with the "
                  "sends and receives around each step, and prints its peak stash and weights.");
    cli.add_int("--microbatches", &m, "m: micro-batches a batch of 12 rows is cut into", 1, 12);
    cli.add_int("--steps", &steps, "SGD steps", 1, 100);
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    if (kBatch % m != 0) throw dist::ConfigError("--microbatches must divide 12");
    dist::init_process_group(cli.init_options());
    dist::PipelineStage stage(kModel, dist::default_group());
    const int p = stage.num_stages(), s = stage.stage_index();
    const std::vector<Step> order = one_f_one_b(p, s, m);
    std::string text;
    for (const Step& st : order) text += (st.forward ? " F" : " B") + std::to_string(st.microbatch);
    dist::out() << "order:" << text;
    // Every stage has printed its order before any of them can fail running it: the grader reads
    // all the orders even when one of them is wrong.
    dist::barrier();
    dist::SGD sgd(stage.parameters(), lr);
    int peak = 0;
    for (int step = 0; step < steps; ++step) {
      sgd.zero_grad();
      peak = std::max(peak, run_order(order, stage, step, m));
      sgd.step();
    }
    dist::out() << "peak stash: " << peak;
    std::vector<float> values;
    for (dist::Parameter* param : stage.parameters())
      for (float v : param->data.to_vector<float>()) values.push_back(v);
    dist::out() << "weights: " << hex(fingerprint(values));
    dist::out() << "one process: " << hex(fingerprint(one_process(steps, m, stage.layers(), lr)));
    dist::destroy_process_group();
    return dist::kExitOk;
  });
}
