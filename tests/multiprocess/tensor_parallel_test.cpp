// dist/tensor_parallel.h on real processes (chapter 15): Megatron's MLP block at TP = 1, 2 and 4,
// with and without sequence parallelism, against one process running the same unsplit model
// (dist::Linear, ReLU, mse_loss, SGD). TP = 1 is bit for bit; so is every column-parallel value
// at any TP; values summed across ranks are held to a bound derived from float32's unit roundoff
// (the header's "Rounding"), carried value by value through the block and the SGD steps. Then:
// one all_reduce per block and direction, its bytes against the Gloo mesh's closed form; the
// memory sequence parallelism saves; bad sizes refused before anything is sent.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "dist/dist.h"
#include "dist/flight_recorder.h"
#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/tensor_parallel.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::Tensor;
using dist::testing::contains;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// Values from a seeded generator, in [-1, 1): the same on every rank.
std::vector<float> draws(std::int64_t n, std::uint64_t seed) {
  dist::Generator g(seed);
  const auto k = dist::randint(0, 1 << 20, n, g).to_vector<std::int64_t>();
  std::vector<float> out;
  for (std::int64_t v : k) out.push_back(static_cast<float>(v / double{1 << 19} - 1.0));
  return out;
}

// The block: 8 rows, 6 -> 16 -> 5 (16 splits at 1, 2, 4; 8 rows too, for sequence parallelism).
constexpr std::int64_t kRows = 8, kIn = 6, kHidden = 16, kOut = 5;
constexpr int kSteps = 3;
constexpr float kLr = 0.1f;
constexpr double kU = 1.0 / (1 << 24);  // float32's unit roundoff, 2^-24

dist::Linear make_fc1() {
  return dist::Linear(kIn, kHidden, {draws(kIn * kHidden, 1), draws(kHidden, 2)});
}
dist::Linear make_fc2() {
  return dist::Linear(kHidden, kOut, {draws(kHidden * kOut, 3), draws(kOut, 4)});
}

// ---- The bound: |TP's value - one process's value|, value by value ------------------------------
//
// A value z = c + Σ_k a_k b_k, whose inputs each side holds to within e(a_k), e(b_k), e(c): the
// two sides differ by at most Σ_k (e(a)|b| + |a|e(b) + e(a)e(b)) + e(c) (the inputs' errors
// carried) plus ρ·(|c| + Σ_k |a_k||b_k|) for their own roundings, with |a|, |b| taken one error
// wide. ρ = (T + 2)·u: one process rounds its sum once (u), T ranks round T partial sums and add
// them in float32 (T·u to first order), and the doubles' own error and the second-order terms fit
// in the last u with room to spare (under 2^-50 of the sum for these sizes). Unsplit values (a
// column-parallel output, a weight gradient) round once on each side: 2u, inside ρ as well.
struct Bounded {
  std::vector<float> v;   // one process's values
  std::vector<double> e;  // how far TP's may be from them
};

// z[r][c] = bias(c) + Σ_k A(r, k) B(k, c), with the bound on each value (see above).
using Entry = std::function<std::pair<double, double>(std::int64_t, std::int64_t)>;
std::vector<double> product_bound(std::int64_t rows, std::int64_t inner, std::int64_t cols,
                                  const Entry& a, const Entry& b, const Entry& bias, double rho) {
  std::vector<double> e(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      auto [cv, ce] = bias(r, c);
      double carried = ce, size = std::fabs(cv) + ce;
      for (std::int64_t k = 0; k < inner; ++k) {
        const auto [av, ae] = a(r, k);
        const auto [bv, be] = b(k, c);
        carried += ae * std::fabs(bv) + std::fabs(av) * be + ae * be;
        size += (std::fabs(av) + ae) * (std::fabs(bv) + be);
      }
      e[static_cast<std::size_t>(r * cols + c)] = carried + rho * size;
    }
  }
  return e;
}

std::pair<double, double> at(const Bounded& m, std::int64_t i) {
  return {m.v[static_cast<std::size_t>(i)], m.e[static_cast<std::size_t>(i)]};
}
const Entry kNone = [](std::int64_t, std::int64_t) { return std::pair<double, double>{0, 0}; };

// One process's Linear forward, backward and SGD step, each value with its bound.
struct BoundedLinear {
  std::int64_t in, out;
  Bounded w, b;
  Bounded forward(const Bounded& x, std::int64_t rows, double rho, const std::vector<float>& v) {
    return {v, product_bound(
                   rows, in, out, [&](auto r, auto k) { return at(x, r * in + k); },
                   [&](auto k, auto c) { return at(w, c * in + k); },
                   [&](auto, auto c) { return at(b, c); }, rho)};
  }
  // d loss / d W, d b (from zero) and d x, for the given one-process values.
  std::tuple<Bounded, Bounded, Bounded> backward(const Bounded& x, const Bounded& g,
                                                 std::int64_t rows, double rho,
                                                 const std::vector<float>& gw,
                                                 const std::vector<float>& gb,
                                                 const std::vector<float>& gx) {
    Bounded dw{gw, product_bound(
                       out, rows, in, [&](auto j, auto n) { return at(g, n * out + j); },
                       [&](auto n, auto i) { return at(x, n * in + i); }, kNone, rho)};
    Bounded db{gb, product_bound(
                       out, rows, 1, [&](auto j, auto n) { return at(g, n * out + j); },
                       [](auto, auto) {
                         return std::pair<double, double>{1, 0};
                       },
                       kNone, rho)};
    Bounded dx{gx, product_bound(
                       rows, out, in, [&](auto n, auto j) { return at(g, n * out + j); },
                       [&](auto j, auto i) { return at(w, j * in + i); }, kNone, rho)};
    return {dw, db, dx};
  }
};

// p -= lr * grad (one rounding on each side): the bound after the step.
void sgd_bound(Bounded& p, const Bounded& grad, const std::vector<float>& after, double rho) {
  for (std::size_t i = 0; i < p.v.size(); ++i) {
    p.e[i] +=
        kLr * grad.e[i] + rho * (std::fabs(after[i]) + kLr * (std::fabs(grad.v[i]) + grad.e[i]));
  }
  p.v = after;
}

Bounded exact(std::vector<float> v) {
  return {v, std::vector<double>(v.size(), 0.0)};
}

// ---- Comparing TP's slices with one process's values
// ---------------------------------------------

// Elements [first, first + count) of each of `rows` rows of width `width`: a rank's slice.
template <typename T>
std::vector<T> columns(const std::vector<T>& m, std::int64_t width, std::int64_t first,
                       std::int64_t count) {
  std::vector<T> out;
  for (std::size_t r = 0; r < m.size() / static_cast<std::size_t>(width); ++r) {
    const auto row = m.begin() + static_cast<std::ptrdiff_t>(r * width + first);
    out.insert(out.end(), row, row + count);
  }
  return out;
}
Bounded columns(const Bounded& m, std::int64_t width, std::int64_t first, std::int64_t count) {
  return {columns(m.v, width, first, count), columns(m.e, width, first, count)};
}
Bounded rows(const Bounded& m, std::int64_t first, std::int64_t count) {  // values, not rows
  return columns(m, static_cast<std::int64_t>(m.v.size()), first, count);
}

// TP's values against one process's: bit for bit when `bitwise`, else within the bound. Prints
// the first value out of place and returns false.
bool matches(const char* what, int step, const std::vector<float>& tp, const Bounded& ref,
             bool bitwise) {
  if (tp.size() != ref.v.size()) {
    std::cout << what << " (step " << step << "): " << tp.size() << " values, expected "
              << ref.v.size() << "\n";
    return false;
  }
  for (std::size_t i = 0; i < tp.size(); ++i) {
    const double diff = std::fabs(double{tp[i]} - ref.v[i]);
    if (bitwise ? tp[i] != ref.v[i] : !(diff <= ref.e[i])) {
      std::printf("%s (step %d) [%zu]: TP %.9g, one process %.9g, differ by %.3g, allowed %.3g\n",
                  what, step, i, tp[i], ref.v[i], diff, bitwise ? 0.0 : ref.e[i]);
      return false;
    }
  }
  return true;
}

// ---- Equality with one process
// --------------------------------------------------------------------

class TensorParallelMlp : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// kSteps steps of SGD on the same batches: TP's outputs, gradients (weights, biases, input) and
// weights after each step against one process's. Sequence parallel: each rank's n/T rows of
// the input and the output; the test gathers the output to take mse_loss over every row, as one
// process does.
TEST_P(TensorParallelMlp, MatchesOneProcessValueByValue) {
  const auto [tp, sequence_parallel] = GetParam();
  expect_all_ok(run_group(tp, {.timeout = 30s}, [&](int rank) {
    dist::ProcessGroup& group = dist::default_group();
    const double rho = (tp + 2) * kU;
    const bool bitwise = tp == 1;
    dist::Linear fc1 = make_fc1(), fc2 = make_fc2();
    dist::ParallelMLP mlp(fc1, fc2, group, {.sequence_parallel = sequence_parallel});
    dist::ReLU relu;
    dist::SGD one_opt(
        {fc1.parameters()[0], fc1.parameters()[1], fc2.parameters()[0], fc2.parameters()[1]}, kLr);
    dist::SGD tp_opt(mlp.parameters(), kLr);
    BoundedLinear b1{kIn, kHidden, exact(fc1.weight().data.to_vector<float>()),
                     exact(fc1.bias().data.to_vector<float>())};
    BoundedLinear b2{kHidden, kOut, exact(fc2.weight().data.to_vector<float>()),
                     exact(fc2.bias().data.to_vector<float>())};
    const std::int64_t h = kHidden / tp, h0 = rank * h, local_rows = kRows / tp;
    const std::int64_t r0 = sequence_parallel ? rank * local_rows : 0;
    const std::int64_t n = sequence_parallel ? local_rows : kRows;
    bool ok = true;
    // The largest bound, and the largest difference, relative to its tensor's largest value.
    double widest = 0, farthest = 0;
    for (int step = 0; step < kSteps; ++step) {
      const Tensor x = Tensor::from(draws(kRows * kIn, 100 + step));
      const Tensor y = Tensor::from(draws(kRows * kOut, 200 + step));
      // One process, keeping every value the bound needs.
      one_opt.zero_grad();
      const Tensor p1 = fc1.forward(x), a1 = relu.forward(p1), out = fc2.forward(a1);
      const dist::MseLoss loss = dist::mse_loss(out, y);
      const Tensor ga1 = fc2.backward(loss.grad), gp1 = relu.backward(ga1), gx = fc1.backward(gp1);
      // Tensor parallel.
      tp_opt.zero_grad();
      const Tensor tp_x =
          sequence_parallel ? dist::scatter_to_sequence_parallel_region(x, kIn, group) : x;
      const Tensor tp_out = mlp.forward(tp_x);
      Tensor grad_out;
      if (sequence_parallel) {
        Tensor whole(kRows * kOut, dist::kFloat32);
        group.all_gather_into_tensor(whole, tp_out);
        grad_out =
            dist::scatter_to_sequence_parallel_region(dist::mse_loss(whole, y).grad, kOut, group);
      } else {
        grad_out = dist::mse_loss(tp_out, y).grad;
      }
      const Tensor tp_gx = mlp.backward(grad_out);

      // The bounds, through the same chain.
      const Bounded bx = exact(x.to_vector<float>());
      const Bounded bp1 = b1.forward(bx, kRows, rho, p1.to_vector<float>());
      Bounded ba1{a1.to_vector<float>(), bp1.e};  // ReLU: 1-Lipschitz
      const Bounded bout = b2.forward(ba1, kRows, rho, out.to_vector<float>());
      Bounded bg{loss.grad.to_vector<float>(), {}};
      const double scale = 2.0 / (kRows * kOut);
      for (std::size_t i = 0; i < bg.v.size(); ++i) {
        bg.e.push_back(scale * bout.e[i] +
                       rho * scale *
                           (std::fabs(bout.v[i]) + bout.e[i] + std::fabs(y.to_vector<float>()[i])));
      }
      auto [dw2, db2, dga1] =
          b2.backward(ba1, bg, kRows, rho, fc2.weight().grad.to_vector<float>(),
                      fc2.bias().grad.to_vector<float>(), ga1.to_vector<float>());
      // ReLU's backward passes the gradient where p1 > 0: where TP's p1 may have the other sign,
      // the whole gradient is in doubt.
      Bounded bgp1{gp1.to_vector<float>(), {}};
      for (std::size_t i = 0; i < bgp1.v.size(); ++i) {
        const bool in_doubt = std::fabs(bp1.v[i]) <= bp1.e[i];
        bgp1.e.push_back(in_doubt ? std::fabs(dga1.v[i]) + dga1.e[i]
                                  : (bp1.v[i] > 0 ? dga1.e[i] : 0.0));
      }
      auto [dw1, db1, dx] = b1.backward(bx, bgp1, kRows, rho, fc1.weight().grad.to_vector<float>(),
                                        fc1.bias().grad.to_vector<float>(), gx.to_vector<float>());

      const auto check = [&](const char* what, const Tensor& t, const Bounded& ref) {
        const std::vector<float> got = t.to_vector<float>();
        double largest = 0, bound = 0, diff = 0;
        for (std::size_t i = 0; i < ref.v.size() && i < got.size(); ++i) {
          largest = std::max(largest, std::fabs(double{ref.v[i]}));
          bound = std::max(bound, ref.e[i]);
          diff = std::max(diff, std::fabs(double{got[i]} - ref.v[i]));
        }
        if (largest > 0) widest = std::max(widest, bound / largest);
        if (largest > 0) farthest = std::max(farthest, diff / largest);
        ok = matches(what, step, got, ref, bitwise) && ok;
      };
      check("output", tp_out, rows(bout, r0 * kOut, n * kOut));
      check("d loss / d x", tp_gx, rows(dx, r0 * kIn, n * kIn));
      check("fc1.weight.grad", mlp.fc1().weight().grad, rows(dw1, h0 * kIn, h * kIn));
      check("fc1.bias.grad", mlp.fc1().bias().grad, rows(db1, h0, h));
      check("fc2.weight.grad", mlp.fc2().weight().grad, columns(dw2, kHidden, h0, h));
      check("fc2.bias.grad", mlp.fc2().bias().grad, db2);

      one_opt.step();
      tp_opt.step();
      sgd_bound(b1.w, dw1, fc1.weight().data.to_vector<float>(), rho);
      sgd_bound(b1.b, db1, fc1.bias().data.to_vector<float>(), rho);
      sgd_bound(b2.w, dw2, fc2.weight().data.to_vector<float>(), rho);
      sgd_bound(b2.b, db2, fc2.bias().data.to_vector<float>(), rho);
      check("fc1.weight after the step", mlp.fc1().weight().data, rows(b1.w, h0 * kIn, h * kIn));
      check("fc1.bias after the step", mlp.fc1().bias().data, rows(b1.b, h0, h));
      check("fc2.weight after the step", mlp.fc2().weight().data, columns(b2.w, kHidden, h0, h));
      check("fc2.bias after the step", mlp.fc2().bias().data, b2.b);
    }
    // The bound grows with each step (it adds worst cases), but stays a small multiple of
    // float32's rounding: a wrong slice or a missing reduction is off by the values themselves.
    std::cout << "rank " << rank << ": differences up to " << farthest << ", bounds up to "
              << widest << " of each tensor's largest value\n";
    return ok && widest < 1e-3 ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(Sizes, TensorParallelMlp,
                         ::testing::Combine(::testing::Values(1, 2, 4), ::testing::Bool()),
                         [](const auto& p) {
                           return "Tp" + std::to_string(std::get<0>(p.param)) +
                                  (std::get<1>(p.param) ? "SequenceParallel" : "");
                         });

}  // namespace
