#include "support.h"

#include <dist/cli.h>
#include <dist/optim.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ch13 {

std::optional<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  dist::Cli cli("ch13_ddp_in_practice",
                "DDP in practice: a branch used on some steps (find_unused_parameters), ranks "
                "with different numbers of batches (Join), compressed gradients (communication "
                "hooks: fp16, bf16, PowerSGD) and gradient_as_bucket_view, each checked against "
                "its closed form or a single-process replay.");
  cli.add_int("--steps", &f.steps, "training steps in steps 1 and 3", 3, 1000);
  cli.add_int("--batch-size", &f.batch_size, "samples per batch on each rank", 1, 1024);
  cli.add_int("--hidden", &f.hidden, "the trunk's width", 1, 512);
  cli.add_int("--batches", &f.batches, "step 2: rank 0's number of batches", 1, 1000);
  cli.add_int("--fewer", &f.fewer,
              "step 2: each rank has this many batches fewer than the one before (at least 1)", 0,
              1000);
  cli.add_int("--max-rank", &f.max_rank, "step 3: PowerSGD runs at rank 1 to this", 1, 8);
  cli.add_double("--lr", &f.lr, "SGD's learning rate", 1e-6, 1);
  if (!cli.parse(argc, argv)) return std::nullopt;
  f.init = cli.init_options();
  return f;
}

namespace {

// rows x cols values ((a r + b c) mod m - m/2) / 16: multiples of 1/16, exact in float32.
std::vector<float> weights(std::int64_t rows, std::int64_t cols, int a, int b, int m) {
  std::vector<float> w;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c)
      w.push_back(static_cast<float>((a * r + b * c) % m - m / 2) / 16.0f);
  }
  return w;
}

void add_grads(std::vector<dist::Parameter*>& into, const std::vector<dist::Parameter*>& from) {
  into.insert(into.end(), from.begin(), from.end());
}

}  // namespace

Batch batch(int step, int rank, int size) {
  std::vector<float> x, y;
  for (int i = 0; i < size; ++i) {
    for (int j = 0; j < kIn; ++j) {
      x.push_back(static_cast<float>((step * 7 + rank * 5 + i * 3 + j * 2) % 11 - 5) / 8.0f);
    }
    for (int o = 0; o < kOut; ++o) {
      y.push_back(static_cast<float>((step + rank * 3 + i + o) % 5 - 2) / 4.0f);
    }
  }
  return {dist::Tensor::from(x), dist::Tensor::from(y)};
}

Net::Net(std::int64_t hidden)
    : trunk(kIn, hidden,
            {weights(hidden, kIn, 5, 3, 9),
             std::vector<float>(static_cast<std::size_t>(hidden), 0.0f)}),
      a(hidden, kOut, {weights(kOut, hidden, 3, 7, 5), std::vector<float>(kOut, 0.0625f)}),
      b(hidden, kOut, {weights(kOut, hidden, 7, 2, 7), std::vector<float>(kOut, -0.125f)}) {}

dist::Tensor Net::forward(const dist::Tensor& x, bool branch) {
  used_b = branch;
  const dist::Tensor h = relu.forward(trunk.forward(x));
  dist::Tensor out = a.forward(h);
  if (branch) out += b.forward(h);
  return out;
}

std::vector<dist::Parameter*> Net::backward(const dist::Tensor& grad_out) {
  std::vector<dist::Parameter*> ready;
  dist::Tensor grad_h = a.backward(grad_out);
  add_grads(ready, a.parameters());
  if (used_b) {
    grad_h += b.backward(grad_out);
    add_grads(ready, b.parameters());
  }
  trunk.backward(relu.backward(grad_h));
  add_grads(ready, trunk.parameters());
  return ready;
}

std::vector<dist::Parameter*> Net::parameters() {
  std::vector<dist::Parameter*> p = trunk.parameters();
  add_grads(p, a.parameters());
  add_grads(p, b.parameters());
  return p;
}

std::vector<dist::Parameter*> Net::branch() {
  return b.parameters();
}

StepResult forward_backward(Net& net, const Flags& f, int step, int rank, bool branch) {
  const Batch data = batch(step, rank, f.batch_size);
  const dist::MseLoss loss = dist::mse_loss(net.forward(data.x, branch), data.y);
  return {loss.loss, net.backward(loss.grad)};
}

std::vector<float> replay(const Flags& f, int world, int steps,
                          const std::function<bool(int, int)>& trains,
                          const std::function<bool(int, int)>& branch) {
  Net net(f.hidden);
  std::vector<dist::Parameter*> params = net.parameters();
  dist::SGD sgd(params, f.lr);
  for (int step = 0; step < steps; ++step) {
    std::vector<dist::Tensor> sum;
    for (const dist::Parameter* p : params) sum.push_back(dist::Tensor::zeros(p->data.numel()));
    for (int rank = 0; rank < world; ++rank) {
      if (!trains(step, rank)) continue;  // a joined rank: zeros
      sgd.zero_grad();
      forward_backward(net, f, step, rank, branch(step, rank));
      for (std::size_t k = 0; k < params.size(); ++k) {
        dist::Tensor g = params[k]->grad;
        g /= world;  // as DDP divides before the all_reduce sums
        sum[k] += g;
      }
    }
    for (std::size_t k = 0; k < params.size(); ++k) params[k]->grad.copy_(sum[k]);
    sgd.step();
  }
  return values(params);
}

std::vector<float> values(const std::vector<dist::Parameter*>& params) {
  std::vector<float> v;
  for (const dist::Parameter* p : params) {
    for (float x : p->data.to_vector<float>()) v.push_back(x);
  }
  return v;
}

double largest_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double largest = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs(static_cast<double>(a[i]) - b[i]);
    if (d > 0)
      largest = std::max(largest, d / std::max(std::abs(static_cast<double>(a[i])), 1e-30));
  }
  return largest;
}

bool same_on_every_rank(const std::vector<float>& mine) {
  dist::Tensor zero = dist::Tensor::from(mine);
  dist::broadcast(zero, 0);
  return dist::all_ranks_ok(zero.to_vector<float>() == mine);
}

std::int64_t powersgd_values(const std::vector<dist::Parameter*>& params, int r) {
  std::int64_t total = 0;
  for (const dist::Parameter* p : params) {
    const std::vector<std::int64_t> sizes = p->sizes();
    const std::int64_t n = sizes.front(), m = p->data.numel() / n;
    const bool compressed = sizes.size() > 1 && (n + m) * r * 2 < n * m;
    total += compressed ? (n + m) * r : n * m;
  }
  return total;
}

std::string fixed6(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6f", value);
  return text;
}

}  // namespace ch13
