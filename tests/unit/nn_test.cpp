// dist/nn.h: Linear, mse_loss and SGD against closed forms and finite differences (chapter 08).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dist/nn.h"
#include "dist/optim.h"
#include "errors.h"
#include "nn/nn_math.h"
#include "ranks.h"

namespace {

using dist::Tensor;
using dist::testing::config_error;
using dist::testing::contains;

// W = [[1, 2], [3, 4]], b = [0.5, -1]; the batch x = [[1, 1], [2, -1]].
dist::Linear two_by_two() {
  return dist::Linear(2, 2, {{1, 2, 3, 4}, {0.5f, -1}});
}
const Tensor kX = Tensor::from<float>({1, 1, 2, -1});

TEST(Linear, ForwardIsXTimesWTransposedPlusB) {
  dist::Linear model = two_by_two();
  // Row 1: [1*1 + 1*2 + 0.5, 1*3 + 1*4 - 1] = [3.5, 6]; row 2: [2 - 2 + 0.5, 6 - 4 - 1] = [0.5, 1].
  EXPECT_EQ(model.forward(kX).to_vector<float>(), (std::vector<float>{3.5f, 6, 0.5f, 1}));
}

TEST(Linear, BackwardGivesTheClosedFormGradientsAndAccumulates) {
  dist::Linear model = two_by_two();
  model.forward(kX);
  const Tensor grad_out = Tensor::from<float>({1, 2, -1, 0.5f});
  // dW[j][i] = sum_n g[n][j] x[n][i]; db[j] = sum_n g[n][j]; dx[n][i] = sum_j g[n][j] W[j][i].
  const Tensor grad_x = model.backward(grad_out);
  EXPECT_EQ(model.weight().grad.to_vector<float>(), (std::vector<float>{-1, 2, 3, 1.5f}));
  EXPECT_EQ(model.bias().grad.to_vector<float>(), (std::vector<float>{0, 2.5f}));
  EXPECT_EQ(grad_x.to_vector<float>(), (std::vector<float>{7, 10, 0.5f, 0}));
  model.backward(grad_out);  // a second backward adds, as in torch until zero_grad()
  EXPECT_EQ(model.weight().grad.to_vector<float>(), (std::vector<float>{-2, 4, 6, 3}));
  dist::SGD(model.parameters(), 0.1).zero_grad();
  EXPECT_EQ(model.weight().grad.to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
}

// The gradient that backward computes is the slope of the loss: a central finite difference
// (in double) of mse_loss(forward(x)) with respect to each weight and bias.
TEST(Linear, GradientsMatchFiniteDifferencesOfTheLoss) {
  const std::vector<float> w = {0.3f, -0.7f, 1.1f, 0.2f, -0.4f, 0.9f}, b = {0.05f, -0.15f};
  const Tensor x = Tensor::from<float>({0.5f, -1, 2, 1.5f, 0.25f, -0.75f, -2, 1, 0.125f});
  const Tensor y = Tensor::from<float>({1, -1, 0.5f, 2, -0.5f, 0.25f});
  const auto loss_at = [&](std::vector<float> w2, std::vector<float> b2) {
    dist::Linear m(3, 2, {std::move(w2), std::move(b2)});
    return dist::mse_loss(m.forward(x), y).loss;
  };
  dist::Linear model(3, 2, {w, b});
  model.backward(dist::mse_loss(model.forward(x), y).grad);
  const double h = 1.0 / 1024;  // exact in float32, so w +- h is what the loss sees
  for (std::size_t k = 0; k < w.size(); ++k) {
    auto up = w, down = w;
    up[k] += static_cast<float>(h), down[k] -= static_cast<float>(h);
    const double slope = (loss_at(up, b) - loss_at(down, b)) / (2 * h);
    EXPECT_NEAR(model.weight().grad.item(static_cast<std::int64_t>(k)), slope, 1e-4) << "w" << k;
  }
  for (std::size_t k = 0; k < b.size(); ++k) {
    auto up = b, down = b;
    up[k] += static_cast<float>(h), down[k] -= static_cast<float>(h);
    const double slope = (loss_at(w, up) - loss_at(w, down)) / (2 * h);
    EXPECT_NEAR(model.bias().grad.item(static_cast<std::int64_t>(k)), slope, 1e-4) << "b" << k;
  }
}

// The CPU loops reorder Linear's work to vectorise it; every value must still be the bits that
// nn_math's per-value functions give, which are what the CUDA kernels compute (chapter 09 checks
// CPU and GPU replicas for identical bits). Shapes include 1s and odd sizes. The values make the
// order of each sum show: a product of two floats is exact in double, so ordinary values would
// give the same float whatever the order. Here a ninth of the products are +-2^80, which cancel
// in many sums, leaving the rounding of the 2^40-sized products that each order does its own way.
TEST(Linear, CpuLoopsGiveTheBitsOfTheKernelsArithmetic) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> uniform(1, 2);
  const auto draws = [&](std::int64_t n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& f : v) f = (gen() % 2 ? 1.0f : -1.0f) * (gen() % 3 == 0 ? 0x1p40f : uniform(gen));
    return v;
  };
  const auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (const auto [rows, in, out] : {std::array<std::int64_t, 3>{1, 1, 1},
                                     {3, 7, 5},
                                     {32, 196, 128},
                                     {17, 128, 10},
                                     {2, 33, 1},
                                     {5, 1, 9}}) {
    const std::vector<float> w = draws(in * out), b = draws(out), x = draws(rows * in),
                             g = draws(rows * out), start_gw = draws(in * out),
                             start_gb = draws(out);
    dist::Linear layer(in, out, {w, b});
    // Gradients accumulate: start from non-zero ones, as after an earlier backward.
    layer.parameters()[0]->grad.copy_(Tensor::from(start_gw));
    layer.parameters()[1]->grad.copy_(Tensor::from(start_gb));
    const auto y = layer.forward(Tensor::from(x)).to_vector<float>();
    const auto gx = layer.backward(Tensor::from(g)).to_vector<float>();

    std::vector<float> y_ref(static_cast<std::size_t>(rows * out)), gx_ref(x.size());
    std::vector<float> gw_ref = start_gw, gb_ref = start_gb;
    for (std::int64_t k = 0; k < rows * out; ++k) {
      y_ref[static_cast<std::size_t>(k)] =
          dist::nn_math::linear_out(x.data(), w.data(), b.data(), k, in, out);
    }
    for (std::int64_t k = 0; k < in * out; ++k) {
      auto& v = gw_ref[static_cast<std::size_t>(k)];
      v = dist::nn_math::linear_grad_weight(x.data(), g.data(), v, k, rows, in, out);
    }
    for (std::int64_t j = 0; j < out; ++j) {
      auto& v = gb_ref[static_cast<std::size_t>(j)];
      v = dist::nn_math::linear_grad_bias(g.data(), v, j, rows, out);
    }
    for (std::int64_t k = 0; k < rows * in; ++k) {
      gx_ref[static_cast<std::size_t>(k)] =
          dist::nn_math::linear_grad_input(g.data(), w.data(), k, in, out);
    }
    const std::string shape =
        std::to_string(rows) + "x" + std::to_string(in) + "->" + std::to_string(out);
    EXPECT_TRUE(same_bits(y, y_ref)) << shape;
    EXPECT_TRUE(same_bits(gx, gx_ref)) << shape;
    EXPECT_TRUE(same_bits(layer.parameters()[0]->grad.to_vector<float>(), gw_ref)) << shape;
    EXPECT_TRUE(same_bits(layer.parameters()[1]->grad.to_vector<float>(), gb_ref)) << shape;
  }
}

// Two batches in flight through one layer (a pipeline stage's stash, dist/pipeline.h): what each
// forward saved, moved out and back before its backward, gives that batch's gradients, the same
// bits as a layer that ran the batch alone; in float32 and in bfloat16 (its half weights too).
TEST(Linear, SavedStateMovedOutAndBackGivesEachBatchItsOwnBackward) {
  for (dist::DType dtype : {dist::kFloat32, dist::kBFloat16}) {
    const Tensor x2 = Tensor::from<float>({0.25f, -3, 1.5f, 2}).to(dtype);
    const Tensor g1 = Tensor::from<float>({1, 2, -1, 0.5f}).to(dtype);
    const Tensor g2 = Tensor::from<float>({-2, 0.75f, 3, 1}).to(dtype);
    // Weights that bfloat16 rounds, so that a half backward with the wrong weight shows.
    const auto make = [] { return dist::Linear(2, 2, {{0.1f, 0.2f, 0.3f, 0.7f}, {0.5f, -1}}); };
    dist::Linear both = make(), alone1 = make(), alone2 = make();
    both.forward(kX.to(dtype));
    dist::Linear::Saved first = both.take_saved();
    both.forward(x2);
    dist::Linear::Saved second = both.take_saved();
    both.restore_saved(std::move(first));
    const Tensor gx1 = both.backward(g1);
    both.restore_saved(std::move(second));
    const Tensor gx2 = both.backward(g2);
    alone1.forward(kX.to(dtype));
    EXPECT_TRUE(gx1.equal(alone1.backward(g1)));
    alone2.forward(x2);
    EXPECT_TRUE(gx2.equal(alone2.backward(g2)));
    // The accumulated grads: batch 1's, then batch 2's, added in that order.
    alone1.forward(x2);
    alone1.backward(g2);
    EXPECT_TRUE(both.weight().grad.equal(alone1.weight().grad));
    EXPECT_TRUE(both.bias().grad.equal(alone1.bias().grad));
    EXPECT_EQ(both.take_saved().input.numel(), 2 * 2);  // backward leaves the input in place
    EXPECT_EQ(both.take_saved().input.numel(), 0);      // and taking it leaves none
  }
  dist::ReLU relu;
  relu.forward(Tensor::from<float>({-1, 2}));
  Tensor saved = relu.take_saved();
  relu.forward(Tensor::from<float>({3, -4}));
  relu.restore_saved(std::move(saved));
  EXPECT_EQ(relu.backward(Tensor::from<float>({5, 6})).to_vector<float>(),
            (std::vector<float>{0, 6}));
}

TEST(MseLoss, IsTheMeanSquareAndItsGradientIsTwoDiffOverN) {
  const dist::MseLoss l =
      dist::mse_loss(Tensor::from<float>({1, 2, 3, 4}), Tensor::from<float>({0, 2, 5, 3}));
  EXPECT_DOUBLE_EQ(l.loss, (1.0 + 0 + 4 + 1) / 4);
  EXPECT_EQ(l.grad.to_vector<float>(), (std::vector<float>{0.5f, 0, -1, 0.5f}));
}

TEST(Sgd, StepsAgainstTheGradientByTheLearningRate) {
  dist::Linear model(1, 1, {{2}, {1}});
  model.forward(Tensor::from<float>({1, 3}));
  model.backward(Tensor::from<float>({0.5f, 0.5f}));  // dW = 2, db = 1
  dist::SGD(model.parameters(), 0.25).step();
  EXPECT_EQ(model.weight().data.item(0), 1.5);
  EXPECT_EQ(model.bias().data.item(0), 0.75);
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Momentum with a constant gradient g has a closed form: the buffer is g at the first step, then
// m * buf + g, so with m = 1/2 the steps are g, 1.5 g, 1.75 g (every value exact in float32).
TEST(Sgd, MomentumStartsFromTheGradientThenAddsTheDecayedBuffer) {
  dist::Linear model(1, 1, {{0}, {0}});
  dist::SGD optimizer(model.parameters(), 0.25, {.momentum = 0.5});
  EXPECT_EQ(optimizer.momentum_buffers()[0].numel(), 0);   // torch: no state before a step
  const float expected_w[] = {-0.25f, -0.625f, -1.0625f};  // minus 0.25 * (1, 1.5, 1.75)
  for (float w : expected_w) {
    optimizer.zero_grad();
    model.forward(Tensor::from<float>({1}));
    model.backward(Tensor::from<float>({1}));  // dW = 1, db = 1 at every step
    optimizer.step();
    EXPECT_EQ(model.weight().data.item(0), w);
  }
  EXPECT_EQ(optimizer.momentum_buffers()[0].item(0), 1.75);
}

// torch 1.13's own numbers: a Parameter [1, -2, 0.5] stepped with the gradients below by
//   opt = torch.optim.SGD([p], lr=LR, momentum=M, dampening=D, nesterov=N)
//   for g in grads: p.grad = torch.tensor(g); opt.step()
// printed as float.hex(), parameters and opt.state[p]["momentum_buffer"]. The buffers are torch's
// bits. The parameters agree to float32 rounding: torch's param.add_(buf, alpha=-lr) fuses the
// multiply and the add on this CPU (one rounding), dist::SGD rounds the product first (chapter
// 08's SGD, and the CUDA kernels', which are built without fused multiply-adds): within one
// float32 step at 2 (2.4e-7), the values being below 2.
TEST(Sgd, MomentumDampeningAndNesterovGiveTorchsBits) {
  const std::vector<std::vector<float>> grads = {
      {0.3f, -0.7f, 1.1f}, {0.2f, 0.4f, -0.6f}, {-0.1f, 0.25f, 0.9f}, {0.05f, -0.3f, 0.2f}};
  const struct {
    double lr;
    dist::SGDOptions options;
    std::vector<float> param, buffer;
  } cases[] = {
      {0.1,
       {.momentum = 0.9},
       {0x1.b69834p-1f, -0x1.e29a8p+0f, 0x1.7e329cp-4f},
       {0x1.5ce078p-2f, -0x1.0b923ap-2f, 0x1.536e2ep+0f}},
      {0.05,
       {.momentum = 0.5, .dampening = 0.25},
       {0x1.ecccccp-1f, -0x1.f6a3d6p+0f, 0x1.833334p-2f},
       {0x1.333334p-4f, -0x1.266668p-3f, 0x1.066666p-1f}},
      {0.1,
       {.momentum = 0.9, .nesterov = true},
       {0x1.a6e524p-1f, -0x1.dc954ap+0f, -0x1.aa53dp-6f},
       {0x1.5ce078p-2f, -0x1.0b923ap-2f, 0x1.536e2ep+0f}},
  };
  for (const auto& c : cases) {
    dist::Parameter p{"p", Tensor::from<float>({1, -2, 0.5f}), Tensor::zeros(3)};
    dist::SGD optimizer({&p}, c.lr, c.options);
    for (const std::vector<float>& g : grads) {
      p.grad = Tensor::from(g);
      optimizer.step();
    }
    const std::vector<float> param = p.data.to_vector<float>();
    for (std::size_t i = 0; i < param.size(); ++i) {
      EXPECT_NEAR(param[i], c.param[i], 2.4e-7);
    }
    EXPECT_TRUE(bits_equal(optimizer.momentum_buffers()[0].to_vector<float>(), c.buffer))
        << "momentum " << c.options.momentum;
  }
}

// What a snapshot relies on: an optimizer given the saved buffers continues as the first would.
TEST(Sgd, LoadedMomentumBuffersContinueTheSameSteps) {
  dist::Parameter a{"a", Tensor::from<float>({1, 2}), Tensor::from<float>({0.5f, -0.25f})};
  dist::Parameter b = a;
  b.name = "b";
  dist::SGD first({&a}, 0.1, {.momentum = 0.9});
  first.step();
  first.step();
  dist::SGD resumed({&b}, 0.1, {.momentum = 0.9});
  b.data = a.data.clone();
  resumed.load_momentum_buffers(first.momentum_buffers());
  first.step();
  resumed.step();
  EXPECT_TRUE(bits_equal(a.data.to_vector<float>(), b.data.to_vector<float>()));
  dist::SGD fresh({&b}, 0.1, {.momentum = 0.9});  // without the buffers: another step
  b.data = Tensor::from<float>({1, 2});
  fresh.step();
  EXPECT_FALSE(bits_equal(a.data.to_vector<float>(), b.data.to_vector<float>()));
  EXPECT_TRUE(contains(config_error([&] { fresh.load_momentum_buffers({Tensor::zeros(3)}); }),
                       "the buffer of b has 3 values of torch.float32, the parameter 2"));
  EXPECT_TRUE(contains(config_error([&] { fresh.load_momentum_buffers({}); }),
                       "got 0 buffers for 1 parameters"));
  EXPECT_TRUE(contains(config_error([&] { dist::SGD({&b}, 0.1, {.nesterov = true}); }),
                       "Nesterov momentum requires a momentum and zero dampening"));
}

// torch 1.13's own numbers, printed by (torch.optim.Adam in place of SGD prints the same)
//   opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=BASE)
//   s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=T, eta_min=ETA)
//   for _ in range(N): opt.step(); s.step(); print(repr(opt.param_groups[0]["lr"]))
// Past T the rate climbs back up, and every value is torch's double to the bit (the recursion
// torch uses is not the closed form: 385 of the 501 rates of T = 500 differ from it in the last
// bits, see CosineAnnealingLR.FollowsTheClosedFormToRoundingOnly).
TEST(CosineAnnealingLR, GivesTorchsLearningRatesToTheBit) {
  const struct {
    double base, eta_min;
    std::int64_t t_max;
    std::vector<double> torch;
  } cases[] = {
      {0.1,
       0,
       4,
       {0.08535533905932738, 0.05, 0.014644660940672627, 0.0, 0.014644660940672622,
        0.05000000000000001, 0.0853553390593274, 0.10000000000000003, 0.0853553390593274,
        0.05000000000000003}},
      {0.3,
       0.01,
       5,
       {0.27230746418436735, 0.19980746418436734, 0.1101925358156326, 0.03769253581563263, 0.01,
        0.037692535815632616, 0.11019253581563264, 0.19980746418436743, 0.27230746418436746,
        0.3000000000000001, 0.2723074641843676, 0.19980746418436748}},
  };
  for (const auto& c : cases) {
    dist::Linear model(1, 1, {{0}, {0}});
    dist::SGD sgd(model.parameters(), c.base);
    dist::Adam adam(model.parameters(), c.base);
    for (dist::Optimizer* optimizer : std::vector<dist::Optimizer*>{&sgd, &adam}) {
      const char* which = optimizer == &sgd ? "SGD" : "Adam";
      dist::CosineAnnealingLR schedule(*optimizer, c.t_max, c.eta_min);
      EXPECT_EQ(schedule.lr(), c.base);
      for (std::size_t k = 0; k < c.torch.size(); ++k) {
        optimizer->step();
        schedule.step();
        EXPECT_EQ(schedule.last_epoch(), static_cast<std::int64_t>(k + 1));
        EXPECT_EQ(optimizer->lr(), c.torch[k])
            << which << ", T_max " << c.t_max << ", step " << k + 1;
      }
    }
  }
}

TEST(CosineAnnealingLR, FollowsTheClosedFormToRoundingOnly) {
  dist::Linear model(1, 1, {{0}, {0}});
  dist::SGD optimizer(model.parameters(), 0.1);
  dist::CosineAnnealingLR schedule(optimizer, 500);
  int differ = 0;
  for (int t = 1; t <= 500; ++t) {
    schedule.step();
    const double closed = 0.1 * (1 + std::cos(3.141592653589793 * t / 500)) / 2;
    EXPECT_NEAR(optimizer.lr(), closed, 1e-15) << "step " << t;
    differ += optimizer.lr() != closed;
  }
  EXPECT_EQ(optimizer.lr(), 0.0);  // torch: 0.0 at T_max
  EXPECT_EQ(differ, 385);          // torch: 385 of the 501 rates (the first is lr_0 in both)
}

TEST(CosineAnnealingLR, NeedsAtLeastOneStep) {
  dist::Linear model(1, 1, {{0}, {0}});
  dist::SGD optimizer(model.parameters(), 0.1);
  EXPECT_TRUE(contains(config_error([&] { dist::CosineAnnealingLR(optimizer, 0); }),
                       "t_max is the number of steps"));
}

TEST(Nn, BadShapesAndTypesAreConfigErrorsThatSayWhatToFix) {
  EXPECT_TRUE(contains(config_error([] {
                         dist::Linear(2, 2, {{1, 2, 3}, {0, 0}});
                       }),
                       "Linear(2, 2) needs 4 initial weights and 2 biases, got 3 and 2"));
  EXPECT_TRUE(contains(config_error([] { dist::Linear(0, 1, {{}, {0}}); }), "at least 1"));
  dist::Linear model = two_by_two();
  EXPECT_TRUE(contains(config_error([&] {
                         model.forward(Tensor::from<float>({1, 2, 3}));
                       }),
                       "3 input values are not whole rows of in_features = 2"));
  EXPECT_TRUE(contains(config_error([&] {
                         model.forward(Tensor::from<double>({1, 2}));
                       }),
                       "must be float32"));
  model.forward(kX);
  EXPECT_TRUE(contains(config_error([&] { model.backward(Tensor::from<float>({1})); }),
                       "call forward before backward, on the same batch"));
  EXPECT_TRUE(contains(config_error([] {
                         dist::mse_loss(Tensor::from<float>({1, 2}), Tensor::from<float>({1}));
                       }),
                       "the input has 2 values and the target 1"));
  EXPECT_TRUE(contains(config_error([&] { dist::SGD(model.parameters(), 0); }),
                       "learning rate must be positive"));
}

}  // namespace

namespace {

TEST(ReLU, KeepsPositiveValuesAndTheirGradients) {
  dist::ReLU relu;
  EXPECT_EQ(relu.forward(Tensor::from<float>({-1, 0, 2.5f, -0.5f})).to_vector<float>(),
            (std::vector<float>{0, 0, 2.5f, 0}));
  EXPECT_EQ(relu.backward(Tensor::from<float>({1, 2, 3, 4})).to_vector<float>(),
            (std::vector<float>{0, 0, 3, 0}));
}

// Two rows of three classes. Row 0: logits (0, ln 2, 0), label 1: softmax (1/4, 1/2, 1/4), loss
// ln 2. Row 1: logits (1, 1, 1), label 2: softmax 1/3 each, loss ln 3, argmax 0 (the first).
TEST(CrossEntropy, IsTheMeanNegativeLogSoftmaxAndItsGradient) {
  const auto ln2 = static_cast<float>(std::log(2.0));
  const dist::CrossEntropy ce = dist::cross_entropy(Tensor::from<float>({0, ln2, 0, 1, 1, 1}),
                                                    Tensor::from<std::int64_t>({1, 2}), 3);
  EXPECT_NEAR(ce.loss, (std::log(2.0) + std::log(3.0)) / 2, 1e-7);
  EXPECT_EQ(ce.correct, 1);
  const std::vector<float> g = ce.grad.to_vector<float>();
  const std::vector<double> want = {0.25 / 2, -0.5 / 2, 0.25 / 2, 1 / 6.0, 1 / 6.0, -2 / 6.0};
  for (std::size_t k = 0; k < want.size(); ++k) EXPECT_NEAR(g[k], want[k], 1e-7) << k;
  EXPECT_TRUE(contains(
      config_error([] {
        dist::cross_entropy(Tensor::from<float>({0, 0}), Tensor::from<std::int64_t>({2}), 2);
      }),
      "label 2 is outside [0, 1]"));
}

// Training mode: each feature normalised by the batch's mean and biased variance; the running
// statistics move by momentum 0.1 towards the mean and the unbiased variance.
TEST(BatchNorm1d, NormalisesEachFeatureWithTheBatchStatistics) {
  dist::BatchNorm1d bn(2);
  // Feature 0: 1, 3 (mean 2, var 1); feature 1: 10, 10, (mean 10, var 0).
  const std::vector<float> out = bn.forward(Tensor::from<float>({1, 10, 3, 10})).to_vector<float>();
  const double s = 1 / std::sqrt(1 + 1e-5);
  EXPECT_NEAR(out[0], -s, 1e-6);
  EXPECT_NEAR(out[2], s, 1e-6);
  EXPECT_NEAR(out[1], 0, 1e-6);
  EXPECT_NEAR(bn.running_mean().item(0), 0.2, 1e-7);
  EXPECT_NEAR(bn.running_mean().item(1), 1.0, 1e-6);
  EXPECT_NEAR(bn.running_var().item(0), 0.9 + 0.1 * 2, 1e-6);  // unbiased: 1 * 2 / (2 - 1)
  EXPECT_NEAR(bn.running_var().item(1), 0.9, 1e-6);
  bn.train(false);  // evaluation uses the running statistics
  const std::vector<float> eval = bn.forward(Tensor::from<float>({0.2f, 1})).to_vector<float>();
  EXPECT_NEAR(eval[0], 0, 1e-6);
  EXPECT_NEAR(eval[1], 0, 1e-6);
  EXPECT_TRUE(contains(config_error([] {
                         dist::BatchNorm1d(3).forward(Tensor::from<float>({1, 2, 3}));
                       }),
                       "needs more than 1 row"));
}

// backward is the derivative of forward: finite differences (in double) of
// L = sum(out * c) with respect to every input, weight and bias, in training mode.
TEST(BatchNorm1d, GradientsMatchFiniteDifferences) {
  const std::vector<float> x = {0.5f, -1, 2, 1.5f, 0.25f, -0.75f, -2, 1, 0.125f, 3, -0.5f, 0.75f};
  const std::vector<float> c = {1, -2, 0.5f, 0.25f, 1.5f, -1, 2, 0.75f, -0.5f, 1, -1.25f, 0.5f};
  const auto loss = [&](const std::vector<float>& input, float w0, float b1) {
    dist::BatchNorm1d bn(3);
    bn.parameters()[0]->data.set(0, w0);
    bn.parameters()[1]->data.set(1, b1);
    const std::vector<float> out = bn.forward(Tensor::from(input)).to_vector<float>();
    double l = 0;
    for (std::size_t k = 0; k < out.size(); ++k) l += double{out[k]} * c[k];
    return l;
  };
  dist::BatchNorm1d bn(3);
  bn.parameters()[0]->data.set(0, 1.5);
  bn.parameters()[1]->data.set(1, -0.5);
  bn.forward(Tensor::from(x));
  const std::vector<float> gx = bn.backward(Tensor::from(c)).to_vector<float>();
  const float h = 1.0f / 256;
  for (std::size_t k = 0; k < x.size(); ++k) {
    auto up = x, down = x;
    up[k] += h, down[k] -= h;
    EXPECT_NEAR(gx[k], (loss(up, 1.5f, -0.5f) - loss(down, 1.5f, -0.5f)) / (2 * h), 2e-3) << k;
  }
  EXPECT_NEAR(bn.weight().grad.item(0),
              (loss(x, 1.5f + h, -0.5f) - loss(x, 1.5f - h, -0.5f)) / (2 * h), 1e-3);
  EXPECT_NEAR(bn.bias().grad.item(1),
              (loss(x, 1.5f, -0.5f + h) - loss(x, 1.5f, -0.5f - h)) / (2 * h), 1e-3);
}

}  // namespace

namespace {

// An evaluation between a training forward and its backward (as an epoch-end check can be) must
// not change the gradient: backward uses the training batch's statistics.
TEST(BatchNorm1d, AnEvaluationInBetweenDoesNotChangeTheGradient) {
  const Tensor x = Tensor::from<float>({1, 5, 3, -2, 0.5f, 4}),
               g = Tensor::from<float>({1, -1, 2, 0.5f, -3, 1});
  dist::BatchNorm1d plain(2), interrupted(2);
  plain.forward(x);
  const Tensor want = plain.backward(g);
  interrupted.forward(x);
  interrupted.train(false);
  interrupted.forward(Tensor::from<float>({100, -100}));
  interrupted.train(true);
  EXPECT_TRUE(interrupted.backward(g).equal(want));
}

}  // namespace
