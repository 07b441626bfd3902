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
#include <memory>
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

// ---- Comparing TP's slices with one process's values --------------------------------------------

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

// ---- Equality with one process ------------------------------------------------------------------

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
      // mse_loss's gradient, 2 (out - y) / numel: TP's out is off by bout.e, and each side rounds.
      Bounded bg{loss.grad.to_vector<float>(), {}};
      const std::vector<float> yv = y.to_vector<float>();
      const double scale = 2.0 / (kRows * kOut);
      for (std::size_t i = 0; i < bg.v.size(); ++i) {
        const double size = std::fabs(bout.v[i]) + bout.e[i] + std::fabs(yv[i]);
        bg.e.push_back(scale * bout.e[i] + rho * scale * size);
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

// ---- What is bit for bit at any TP --------------------------------------------------------------

// Given the same input and the same gradient as one process, every value computed by one rank
// alone is one process's, bit for bit: the column layer's output, d loss / d W and d b; the row
// layer's d loss / d W, d b and d loss / d x (its columns). Only the sums across ranks round
// differently (the test above).
TEST(TensorParallelPieces, ValuesOneRankComputesAreOneProcesssBitForBit) {
  for (int tp : {2, 4}) {
    expect_all_ok(run_group(tp, {.timeout = 30s}, [&](int rank) {
      dist::ProcessGroup& group = dist::default_group();
      dist::Linear fc1 = make_fc1(), fc2 = make_fc2();
      dist::ColumnParallelLinear column(fc1, group);
      dist::RowParallelLinear row(fc2, group);
      const std::int64_t h = kHidden / tp, h0 = rank * h;
      const Tensor x = Tensor::from(draws(kRows * kIn, 7));
      const Tensor a = Tensor::from(draws(kRows * kHidden, 8));  // the row layer's whole input
      const Tensor g1 = Tensor::from(draws(kRows * kHidden, 9)),
                   g2 = Tensor::from(draws(kRows * kOut, 10));
      const auto same = [&](const char* what, const Tensor& t, const std::vector<float>& want) {
        if (t.to_vector<float>() == want) return true;
        std::cout << "rank " << rank << ": " << what << " differs from one process's\n";
        return false;
      };
      bool ok = same("column output", column.forward(x),
                     columns(fc1.forward(x).to_vector<float>(), kHidden, h0, h));
      fc1.backward(g1);
      column.backward(Tensor::from(columns(g1.to_vector<float>(), kHidden, h0, h)));
      ok = same("column weight grad", column.weight().grad,
                columns(fc1.weight().grad.to_vector<float>(), kIn * kHidden, h0 * kIn, h * kIn)) &&
           ok;
      ok = same("column bias grad", column.bias().grad,
                columns(fc1.bias().grad.to_vector<float>(), kHidden, h0, h)) &&
           ok;
      fc2.forward(a);
      row.forward(Tensor::from(columns(a.to_vector<float>(), kHidden, h0, h)));
      const Tensor gx = fc2.backward(g2);
      ok = same("row d loss / d x", row.backward(g2),
                columns(gx.to_vector<float>(), kHidden, h0, h)) &&
           ok;
      ok = same("row weight grad", row.weight().grad,
                columns(fc2.weight().grad.to_vector<float>(), kHidden, h0, h)) &&
           ok;
      ok = same("row bias grad", row.bias().grad, fc2.bias().grad.to_vector<float>()) && ok;
      return ok ? 0 : 1;
    }));
  }
}

// ---- Communication: one all_reduce per block and direction --------------------------------------

// The calls the group recorded (the flight recorder) and the bytes it sent, for one forward and one
// backward of the block: without sequence parallelism one all_reduce of rows x out values forward
// and one of rows x in backward; Gloo's mesh sends a tensor of n float32 values to each of the
// T - 1 others while n <= 32,778 (gloo_mesh.h): 4n(T - 1) bytes. With sequence parallelism, an
// all_gather and a reduce_scatter each way (and none else), 4(n/T)(T - 1) bytes each for n values
// whole: the input gathered and its gradient reduce-scattered, the output reduce-scattered and its
// gradient gathered.
TEST(TensorParallelTraffic, OneAllReducePerBlockAndDirectionAndTheBytesOfTheClosedForm) {
  for (const bool sequence_parallel : {false, true}) {
    for (int tp : {2, 4}) {
      const std::string dir = ::testing::TempDir() + "/tp_flight_" + std::to_string(getpid());
      auto results = run_group(
          tp, {.timeout = 30s},
          [&](int rank) {
            // The layers' own group (a mesh's "tp" group, in chapter 15): nothing goes through
            // the default group.
            const std::unique_ptr<dist::ProcessGroup> tp_group = dist::new_group();
            dist::ProcessGroup& group = *tp_group;
            const std::int64_t default_sent = dist::default_group().bytes_sent();
            dist::Linear fc1 = make_fc1(), fc2 = make_fc2();
            dist::ParallelMLP mlp(fc1, fc2, group, {.sequence_parallel = sequence_parallel});
            const Tensor x = Tensor::from(draws(kRows * kIn, 5));
            const Tensor input =
                sequence_parallel ? dist::scatter_to_sequence_parallel_region(x, kIn, group) : x;
            const Tensor grad = Tensor::from(draws(input.numel() / kIn * kOut, 6));
            if (dist::flight::recorder() == nullptr) return 2;  // DIST_TRACE_DIR not read
            const auto calls = [] {
              std::vector<std::string> names;
              for (const auto& e : dist::flight::recorder()->entries()) names.push_back(e.call.op);
              return names;
            };
            using Names = std::vector<std::string>;
            const auto count = [](const Names& names, std::size_t from, std::size_t to) {
              return Names(names.begin() + static_cast<std::ptrdiff_t>(from),
                           names.begin() + static_cast<std::ptrdiff_t>(to));
            };
            const std::size_t before = calls().size();
            const std::int64_t sent0 = group.bytes_sent();
            const Tensor out = mlp.forward(input);
            const std::size_t after_forward = calls().size();
            const std::int64_t sent1 = group.bytes_sent();
            mlp.backward(grad);
            const Names names = calls();
            const std::int64_t sent2 = group.bytes_sent();
            const Names forward = count(names, before, after_forward);
            const Names backward = count(names, after_forward, names.size());
            // Each way: f's call and g's call (sequence parallel), or the one all_reduce.
            const Names want = sequence_parallel
                                   ? Names{"all_gather_into_tensor", "reduce_scatter_tensor"}
                                   : Names{"all_reduce"};
            const std::int64_t t = tp, e = 4, part = kRows / t;
            const std::int64_t want1 =
                sequence_parallel ? e * part * (kIn + kOut) * (t - 1) : e * kRows * kOut * (t - 1);
            const std::int64_t want2 =
                sequence_parallel ? e * part * (kOut + kIn) * (t - 1) : e * kRows * kIn * (t - 1);
            std::cout << "rank " << rank << ": forward " << forward.size() << " calls, "
                      << sent1 - sent0 << " bytes (closed form " << want1 << "); backward "
                      << backward.size() << " calls, " << sent2 - sent1 << " bytes (closed form "
                      << want2 << ")\n";
            const bool calls_ok = forward == want && backward == want;
            const bool own_group = dist::default_group().bytes_sent() == default_sent;
            return calls_ok && own_group && sent1 - sent0 == want1 && sent2 - sent1 == want2 ? 0
                                                                                             : 1;
          },
          {.env = {{"DIST_TRACE_DIR", dir}}});
      std::filesystem::remove_all(dir);
      expect_all_ok(results);
    }
  }
}

// ---- Memory: what sequence parallelism saves ----------------------------------------------------

// Bytes the forward leaves held on a rank (dist::memory_allocated), the block's input included:
// the input, the column layer's copy of its whole input, ReLU's input and the row layer's input
// (n rows of hidden/T each), and the output. Sequence parallelism holds the input and the output
// as n/T rows: it saves 4(n - n/T)(in + out) bytes. (The peak, max_memory_allocated, also counts
// the gathered and partial tensors while they live.)
TEST(TensorParallelMemory, SequenceParallelHoldsTheBlocksInputAndOutputAsRowsOverT) {
  for (int tp : {2, 4}) {
    expect_all_ok(run_group(tp, {.timeout = 30s}, [&](int rank) {
      dist::ProcessGroup& group = dist::default_group();
      const std::int64_t n = kRows, t = tp, e = 4;
      std::int64_t held[2] = {0, 0};
      for (const bool sequence_parallel : {false, true}) {
        dist::Linear fc1 = make_fc1(), fc2 = make_fc2();
        dist::ParallelMLP mlp(fc1, fc2, group, {.sequence_parallel = sequence_parallel});
        const Tensor x = Tensor::from(draws(kRows * kIn, 5));
        const std::int64_t before = dist::memory_allocated();
        dist::reset_peak_memory_stats();
        const Tensor input =
            sequence_parallel ? dist::scatter_to_sequence_parallel_region(x, kIn, group) : x;
        const Tensor out = mlp.forward(input);
        held[sequence_parallel] = dist::memory_allocated() - before;
        const std::int64_t rows = sequence_parallel ? n / t : n;
        const std::int64_t closed =
            e * (rows * kIn + n * kIn + 2 * n * (kHidden / t) + rows * kOut);
        std::cout << "rank " << rank
                  << (sequence_parallel ? " sequence parallel" : " tensor parallel")
                  << ": the forward holds " << held[sequence_parallel] << " bytes (closed form "
                  << closed << "), peak " << dist::max_memory_allocated() - before << "\n";
        if (held[sequence_parallel] != closed) return 1;
      }
      const std::int64_t saved = e * (n - n / t) * (kIn + kOut);
      std::cout << "rank " << rank << ": sequence parallelism saves " << held[0] - held[1]
                << " bytes, 4(n - n/T)(in + out) = " << saved << "\n";
      return held[0] - held[1] == saved ? 0 : 1;
    }));
  }
}

// ---- Bad input ----------------------------------------------------------------------------------

// Each refused with a dist::ConfigError naming the sizes, on every rank, before anything is sent:
// the group's byte counts stay where they were, and the group goes on working.
TEST(TensorParallelBadInput, IsRefusedNamingTheSizesBeforeAnyRankSends) {
  auto results = run_group(4, {.timeout = 30s}, [&](int rank) {
    dist::ProcessGroup& group = dist::default_group();
    const auto full = [](std::int64_t in, std::int64_t out) {
      return dist::LinearInit{draws(in * out, 1), draws(out, 2)};
    };
    dist::Linear fc1 = make_fc1(), fc2 = make_fc2();
    dist::RowParallelLinear row(fc2, group, {.sequence_parallel = true});
    const std::vector<std::pair<std::string, std::function<void()>>> cases = {
        {"ranks do not divide out_features 6",
         [&] { dist::ColumnParallelLinear(4, 6, full(4, 6), group); }},
        {"ranks do not divide in_features 6",
         [&] { dist::RowParallelLinear(6, 4, full(6, 4), group); }},
        {"whole layer's 32 weights (out x in) and 8 biases, got 24 and 8",
         [&] {
           dist::ColumnParallelLinear(4, 8, {draws(24, 1), draws(8, 2)}, group);
         }},
        {"splits the 6 rows across the tensor-parallel group's 4 ranks",
         [&] {
           dist::scatter_to_sequence_parallel_region(Tensor::from(draws(6 * kIn, 3)), kIn, group);
         }},
        {"splits the 6 rows across the tensor-parallel group's 4 ranks",
         [&] { row.forward(Tensor::from(draws(6 * (kHidden / 4), 3))); }},
        {"fc1 gives 16 features but fc2 takes 6",
         [&] { dist::ParallelMLP(fc1, make_fc1(), group); }},
    };
    int refused = 0;
    for (const auto& [want, call] : cases) {
      try {
        call();
        std::cout << "rank " << rank << ": not refused: " << want << "\n";
      } catch (const dist::ConfigError& error) {
        std::cout << "rank " << rank << ": " << error.what() << "\n";
        refused += contains(error.what(), want) ? 1 : 0;
      }
    }
    const bool nothing_sent = group.bytes_sent() == 0 && group.header_bytes_sent() == 0;
    Tensor one = dist::full(1, 1.0);
    group.all_reduce(one, dist::ReduceOp::SUM);
    return refused == static_cast<int>(cases.size()) && nothing_sent &&
                   one.to_vector<float>()[0] == 4.0f
               ? 0
               : 1;
  });
  expect_all_ok(results);
}

}  // namespace
