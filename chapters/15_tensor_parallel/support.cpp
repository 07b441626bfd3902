#include "support.h"

#include <dist/cli.h>
#include <dist/flight_recorder.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ch15 {

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch15_tensor_parallel",
                "Tensor parallelism (Megatron): process groups and a 2-D mesh, an MLP block split "
                "across the ranks of a \"tp\" group, sequence parallelism, and data parallel x "
                "tensor parallel training, each checked against one process.");
  cli.add_int("--dp", &f.dp, "data-parallel size, the mesh's first dimension (0: world / tp)", 0,
              1024);
  cli.add_int(
      "--tp", &f.tp,
      "tensor-parallel size, the mesh's second dimension (0: 2 on an even world size, else 1)", 0,
      1024);
  cli.add_int("--hidden", &f.hidden, "the block's hidden width (--tp must divide it)", 1, 4096);
  cli.add_int("--batch-size", &f.batch_size, "rows of the global batch (--dp must divide it)", 1,
              4096);
  cli.add_int("--steps", &f.steps, "step 4: training steps", 1, 1000);
  cli.add_double("--lr", &f.lr, "SGD's learning rate", 1e-6, 1);
  cli.add_flag("--sequence-parallel", &f.sequence_parallel,
               "step 3, and the training: rows split outside the block (--tp must divide each "
               "data-parallel rank's rows)");
  cli.add_flag("--throughput", &f.throughput,
               "also print step 4's DP x TP training steps' samples per second: each step "
               "from a barrier, the first (a warm-up), one process's steps and the loss print "
               "left out (for bench/run.py)");
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  return f;
}

void resolve_sizes(Flags& f, int world) {
  if (f.tp == 0) f.tp = world % 2 == 0 ? 2 : 1;
  if (f.dp == 0) f.dp = std::max(1, world / f.tp);
  if (f.hidden % f.tp != 0) {
    throw dist::ConfigError("--tp " + std::to_string(f.tp) + " does not divide --hidden " +
                            std::to_string(f.hidden) +
                            ": each tensor-parallel rank holds hidden / tp of the hidden "
                            "features; choose a --tp that divides it");
  }
  // A mesh that does not tile the world is the mesh's own error (main.cpp, Step 1).
  if (f.dp * f.tp != world) return;
  if (f.batch_size % f.dp != 0 || (f.sequence_parallel && (f.batch_size / f.dp) % f.tp != 0)) {
    throw dist::ConfigError(
        "--batch-size " + std::to_string(f.batch_size) + " gives each of --dp " +
        std::to_string(f.dp) + " data-parallel ranks " + std::to_string(f.batch_size / f.dp) +
        " rows" +
        (f.sequence_parallel
             ? ", which --sequence-parallel splits across --tp " + std::to_string(f.tp)
             : "") +
        ": choose a batch size they divide");
  }
}

Batch batch(std::int64_t first, std::int64_t size) {
  std::vector<float> x, y;
  for (std::int64_t i = first; i < first + size; ++i) {
    std::vector<double> row;
    for (std::int64_t j = 0; j < kIn; ++j) {
      row.push_back(static_cast<double>((7919 * i + 104729 * j) % 2001) / 1000.0 - 1.0);
      x.push_back(static_cast<float>(row.back()));
    }
    for (std::int64_t k = 0; k < kOut; ++k) {
      double sum = 0;
      for (std::int64_t j = 0; j < kIn; ++j) {
        sum += static_cast<double>((3 * k + 5 * j) % 7 - 3) * row[static_cast<std::size_t>(j)];
      }
      y.push_back(static_cast<float>(sum / 4.0));
    }
  }
  return {dist::Tensor::from(x, dist::get_device()), dist::Tensor::from(y, dist::get_device())};
}

namespace {

std::vector<float> values(std::int64_t rows, std::int64_t cols, int a, int b, int m, double div) {
  std::vector<float> w;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      w.push_back(static_cast<float>(static_cast<double>((a * r + b * c) % m - m / 2) / div));
    }
  }
  return w;
}

}  // namespace

dist::Linear make_fc1(std::int64_t hidden) {
  return dist::Linear(kIn, hidden,
                      {values(hidden, kIn, 31, 17, 23, 20.0), values(1, hidden, 0, 5, 11, 50.0)},
                      dist::get_device());
}

dist::Linear make_fc2(std::int64_t hidden) {
  return dist::Linear(hidden, kOut,
                      {values(kOut, hidden, 13, 7, 19, 20.0), values(1, kOut, 0, 3, 7, 50.0)},
                      dist::get_device());
}

Traffic measure(dist::ProcessGroup& group, const std::function<void()>& body) {
  const dist::FlightRecorder* recorder = dist::flight::recorder();
  std::uint64_t last = 0;
  bool any = false;
  if (recorder != nullptr) {
    for (const auto& e : recorder->entries()) last = e.record, any = true;
  }
  const std::int64_t before = group.bytes_sent();
  body();
  Traffic t{{}, group.bytes_sent() - before, recorder != nullptr};
  if (recorder != nullptr) {
    for (const auto& e : recorder->entries()) {
      if (!any || e.record > last) t.calls.emplace_back(e.call.op);
    }
  }
  return t;
}

Agreement compare_output(const dist::Tensor& tp_out, const dist::Tensor& one_out,
                         const dist::Tensor& hidden_activations, const dist::Linear& fc2, int tp) {
  const std::vector<float> got = tp_out.cpu().to_vector<float>();
  const std::vector<float> want = one_out.cpu().to_vector<float>();
  const std::vector<float> a = hidden_activations.cpu().to_vector<float>();
  const std::vector<float> w = fc2.weight().data.cpu().to_vector<float>();
  const std::vector<float> b = fc2.bias().data.cpu().to_vector<float>();
  const std::int64_t hidden = fc2.in_features(),
                     rows = static_cast<std::int64_t>(want.size()) / kOut;
  const double u = std::ldexp(1.0, -24);
  Agreement agree;
  agree.within = got.size() == want.size();
  for (std::int64_t r = 0; agree.within && r < rows; ++r) {
    for (std::int64_t c = 0; c < kOut; ++c) {
      double s = std::fabs(b[static_cast<std::size_t>(c)]);
      for (std::int64_t k = 0; k < hidden; ++k) {
        s += std::fabs(a[static_cast<std::size_t>(r * hidden + k)] *
                       static_cast<double>(w[static_cast<std::size_t>(c * hidden + k)]));
      }
      const std::size_t i = static_cast<std::size_t>(r * kOut + c);
      const double bound = tp == 1 ? 0.0 : (tp + 1) * u * s + std::ldexp(s, -50);
      const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
      agree.largest_difference = std::max(agree.largest_difference, diff);
      agree.largest_bound = std::max(agree.largest_bound, bound);
      agree.within = agree.within && diff <= bound;
    }
  }
  return agree;
}

namespace {

using Floats = std::vector<float>;

// This tp rank's slices of the whole model, as dist/tensor_parallel.h cuts them: fc1's rows
// [first, first + part) of W and b; fc2's columns [first, first + part) of W; fc2's bias whole
// (what the row layer's parameters() lists) and, for its partial sums, on tp rank 0 only.
struct Slices {
  Floats w1, b1, w2, b2, b2_partial;
};

Slices cut(const dist::Linear& fc1, const dist::Linear& fc2, int t, int tp) {
  const std::int64_t hidden = fc1.out_features(), part = hidden / tp, first = t * part;
  const Floats w1 = fc1.weight().data.to_vector<float>(), b1 = fc1.bias().data.to_vector<float>();
  const Floats w2 = fc2.weight().data.to_vector<float>(), b2 = fc2.bias().data.to_vector<float>();
  Slices s;
  s.w1.assign(w1.begin() + first * kIn, w1.begin() + (first + part) * kIn);
  s.b1.assign(b1.begin() + first, b1.begin() + first + part);
  for (std::int64_t k = 0; k < kOut; ++k) {
    const auto row = w2.begin() + k * hidden + first;
    s.w2.insert(s.w2.end(), row, row + part);
  }
  s.b2 = b2;
  s.b2_partial = t == 0 ? b2 : Floats(b2.size(), 0.0f);
  return s;
}

// The T parts of a tensor gathered over `group`, in rank order (all_gather_into_tensor).
dist::Tensor gather(dist::ProcessGroup& group, const dist::Tensor& part) {
  dist::Tensor all(part.numel() * group.size(), dist::kFloat32, part.device());
  group.all_gather_into_tensor(all, part);
  return all;
}

// Rank t's share of `full`'s rows (n rows of `features`): rows [t·n/T, (t+1)·n/T).
dist::Tensor my_rows(const dist::Tensor& full, int t, int tp) {
  const Floats all = full.to_vector<float>();
  const std::size_t share = all.size() / static_cast<std::size_t>(tp);
  return dist::Tensor::from(Floats(all.begin() + static_cast<std::ptrdiff_t>(t * share),
                                   all.begin() + static_cast<std::ptrdiff_t>((t + 1) * share)),
                            full.device());
}

}  // namespace

SameOrderDpTp::SameOrderDpTp(std::int64_t hidden, dist::ProcessGroup& tp, dist::ProcessGroup& dp,
                             bool sequence_parallel, double lr)
    : fc1_(make_fc1(hidden)),
      fc2_(make_fc2(hidden)),
      tp_(&tp),
      dp_(&dp),
      sequence_parallel_(sequence_parallel),
      sgd_({fc1_.parameters()[0], fc1_.parameters()[1], fc2_.parameters()[0], fc2_.parameters()[1]},
           lr) {}

double SameOrderDpTp::step(const Batch& mine) {
  const int tp = tp_->size(), t = tp_->rank();
  const std::int64_t hidden = fc1_.out_features(), part = hidden / tp;
  const dist::Device device = mine.x.device();
  const Slices s = cut(fc1_, fc2_, t, tp);
  dist::Linear column(kIn, part, {s.w1, s.b1}, device),
      row(part, kOut, {s.w2, s.b2_partial}, device);
  dist::ReLU relu;
  // Forward: the column layer's input whole (sequence parallel: this rank's rows, gathered).
  const dist::Tensor x = sequence_parallel_ ? gather(*tp_, my_rows(mine.x, t, tp)) : mine.x;
  dist::Tensor partial = row.forward(relu.forward(column.forward(x)));
  dist::MseLoss loss;
  dist::Tensor grad_out;
  if (!sequence_parallel_) {
    tp_->all_reduce(partial, dist::ReduceOp::SUM);  // g
    loss = dist::mse_loss(partial, mine.y);
    grad_out = loss.grad;
  } else {
    dist::Tensor out(partial.numel() / tp, dist::kFloat32, device);
    tp_->reduce_scatter_tensor(out, partial, dist::ReduceOp::SUM);  // g: this rank's rows
    loss = dist::mse_loss(gather(*tp_, out), mine.y);               // the loss on every row
    grad_out = gather(*tp_, my_rows(loss.grad, t, tp));             // g's backward
  }
  // Backward: d loss / d x summed over "tp" as f does (compared, though no parameter needs it).
  dist::Tensor grad_x = column.backward(relu.backward(row.backward(grad_out)));
  if (!sequence_parallel_) {
    tp_->all_reduce(grad_x, dist::ReduceOp::SUM);
    grad_x_ = grad_x;
  } else {
    grad_x_ = dist::Tensor(grad_x.numel() / tp, dist::kFloat32, device);
    tp_->reduce_scatter_tensor(grad_x_, grad_x, dist::ReduceOp::SUM);
  }
  // The slices' gradients averaged over "dp" in the library's order, as average_gradients does.
  std::vector<dist::Tensor> grads{column.parameters()[0]->grad, column.parameters()[1]->grad,
                                  row.parameters()[0]->grad, row.parameters()[1]->grad};
  for (dist::Tensor& g : grads) {
    dp_->all_reduce(g, dist::ReduceOp::SUM);
    g /= dp_->size();
  }
  // The whole model's gradients: fc1's rows are contiguous, so the gathered slices are W1 and b1;
  // fc2's gathered slices are T blocks of kOut x part, put back as columns; fc2's bias gradient
  // is whole (every tp rank computes it from the same rows) and the same on every rank.
  std::vector<dist::Parameter*> whole = sgd_.parameters();
  whole[0]->grad = gather(*tp_, grads[0]);
  whole[1]->grad = gather(*tp_, grads[1]);
  const Floats blocks = gather(*tp_, grads[2]).to_vector<float>();
  Floats w2(blocks.size());
  for (int r = 0; r < tp; ++r) {
    for (std::int64_t k = 0; k < kOut; ++k) {
      for (std::int64_t j = 0; j < part; ++j) {
        w2[static_cast<std::size_t>(k * hidden + r * part + j)] =
            blocks[static_cast<std::size_t>((r * kOut + k) * part + j)];
      }
    }
  }
  whole[2]->grad = dist::Tensor::from(w2, device);
  whole[3]->grad = grads[3];
  sgd_.step();
  return loss.loss;
}

bool SameOrderDpTp::same_bits(const std::vector<dist::Parameter*>& slices,
                              const dist::Tensor& grad_x) const {
  const Slices s = cut(fc1_, fc2_, tp_->rank(), tp_->size());
  const std::vector<const Floats*> want{&s.w1, &s.b1, &s.w2, &s.b2};
  bool same = slices.size() == want.size() &&
              ch15::same_bits(grad_x.to_vector<float>(), grad_x_.to_vector<float>());
  for (std::size_t i = 0; same && i < want.size(); ++i) {
    same = ch15::same_bits(slices[i]->data.to_vector<float>(), *want[i]);
  }
  return same;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

std::string members(const std::vector<int>& ranks) {
  std::string s = "[";
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s + "]";
}

std::string calls_text(const Traffic& t) {
  if (!t.counted) return "calls not counted (DIST_TRACE_DIR unset)";
  std::string s;
  for (std::size_t i = 0; i < t.calls.size(); ++i) s += (i ? " + " : "") + t.calls[i];
  return t.calls.empty() ? "no call" : s;
}

std::string sci(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1e", value);
  return text;
}

std::string fixed6(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", value);
  return text;
}

}  // namespace ch15
