// dist/optim.h: Adam against torch 1.13's own bits (adam_torch_bits.h, written by
// adam_torch_bits.py from torch.optim.Adam), its state's life, and its refusals.
#include "dist/optim.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "adam_torch_bits.h"
#include "dist/nn.h"
#include "errors.h"

namespace {

using dist::Tensor;
using dist::testing::config_error;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The first value whose bits differ, as "value i: 0x1.8p+0 instead of torch's 0x1.80002p+0", or "".
std::string first_difference(const Tensor& got, const float* torch_bits, int n) {
  const std::vector<float> values = got.to_vector<float>();
  if (static_cast<int>(values.size()) != n) {
    return std::to_string(values.size()) + " values instead of " + std::to_string(n);
  }
  for (int i = 0; i < n; ++i) {
    if (std::memcmp(&values[i], &torch_bits[i], sizeof(float)) != 0) {
      char text[96];
      std::snprintf(text, sizeof text, "value %d: %a instead of torch's %a", i, values[i],
                    torch_bits[i]);
      return text;
    }
  }
  return "";
}

dist::Parameter parameter(int n) {
  return {"p",
          Tensor::from(std::vector<float>(adam_torch_bits::kParam, adam_torch_bits::kParam + n)),
          Tensor::zeros(n)};
}

Tensor gradient(int step, int n) {
  const float* row = adam_torch_bits::kGrads[step];
  return Tensor::from(std::vector<float>(row, row + n));
}

// Every case: two option sets, weight decay off and on, 3 values (torch's scalar loop) and 17 (its
// vector loop and a scalar tail). After 20 steps the parameter, exp_avg and exp_avg_sq must have
// torch's bits, every one: torch fuses three multiply-adds on the CPU, and computing any of them
// as a multiply then an add changes some bits here.
TEST(Adam, GivesTorchsBitsOverTwentySteps) {
  for (const adam_torch_bits::Case& c : adam_torch_bits::kCases) {
    SCOPED_TRACE("lr " + std::to_string(c.lr) + ", betas (" + std::to_string(c.beta1) + ", " +
                 std::to_string(c.beta2) + "), eps " + std::to_string(c.eps) + ", weight_decay " +
                 std::to_string(c.weight_decay) + ", " + std::to_string(c.n) + " values");
    dist::Parameter p = parameter(c.n);
    dist::Adam optimizer(
        {&p}, c.lr,
        {.beta1 = c.beta1, .beta2 = c.beta2, .eps = c.eps, .weight_decay = c.weight_decay});
    for (int step = 0; step < adam_torch_bits::kSteps; ++step) {
      p.grad = gradient(step, c.n);
      optimizer.step();
    }
    EXPECT_EQ(optimizer.steps(), adam_torch_bits::kSteps);
    EXPECT_EQ(first_difference(p.data, c.param, c.n), "") << "the parameter";
    EXPECT_EQ(first_difference(optimizer.exp_avg()[0], c.exp_avg, c.n), "") << "exp_avg";
    EXPECT_EQ(first_difference(optimizer.exp_avg_sq()[0], c.exp_avg_sq, c.n), "") << "exp_avg_sq";
  }
}

// What Adam means: at the first step m_hat = g and v_hat = g^2, so with eps = 0 every value moves
// by lr against the sign of its gradient, whatever the gradient's size (to float32 rounding).
TEST(Adam, FirstStepMovesEveryValueByTheLearningRate) {
  dist::Parameter p{"p", Tensor::from<float>({1, 1, 1, 1}),
                    Tensor::from<float>({1e-3f, -2, 40, -0.5f})};
  dist::Adam optimizer({&p}, 0.25, {.eps = 0});
  optimizer.step();
  const std::vector<float> expected = {0.75f, 1.25f, 0.75f, 1.25f};
  const std::vector<float> got = p.data.to_vector<float>();
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], expected[i], 1e-6) << i;
}

// torch has no state for a parameter before its first step; then 8 bytes per value: exp_avg and
// exp_avg_sq, float32, zero-filled when made.
TEST(Adam, StateIsEmptyBeforeTheFirstStepThenEightBytesPerValue) {
  dist::Parameter a{"a", Tensor::from<float>({1, 2, 3}), Tensor::from<float>({0.5f, 0, -1})};
  dist::Parameter b{"b", Tensor::from<float>({4, 5}), Tensor::from<float>({1, 1})};
  dist::Adam optimizer({&a, &b});
  EXPECT_EQ(optimizer.steps(), 0);
  EXPECT_EQ(optimizer.state_bytes(), 0);
  ASSERT_EQ(optimizer.exp_avg().size(), 2u);
  ASSERT_EQ(optimizer.exp_avg_sq().size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(optimizer.exp_avg()[k].numel(), 0);
    EXPECT_EQ(optimizer.exp_avg_sq()[k].numel(), 0);
  }
  optimizer.step();
  EXPECT_EQ(optimizer.steps(), 1);
  EXPECT_EQ(optimizer.state_bytes(), 8 * 5);
  EXPECT_EQ(optimizer.exp_avg()[1].numel(), 2);
  // exp_avg = (1 - 0.9) * g from zero; exp_avg_sq = (1 - 0.999) * g^2 (0 where g is 0).
  EXPECT_EQ(optimizer.exp_avg()[0].item(1), 0.0);
  EXPECT_NEAR(optimizer.exp_avg()[0].item(2), -0.1, 1e-7);
  EXPECT_NEAR(optimizer.exp_avg_sq()[0].item(2), 1e-3, 1e-10);
  optimizer.step();
  EXPECT_EQ(optimizer.steps(), 2);
  EXPECT_EQ(optimizer.state_bytes(), 8 * 5);
}

// set_lr is what a schedule calls: lr 0 leaves the parameters as they are (the moments still move),
// and the next rate applies from the next step.
TEST(Adam, SetLrChangesTheNextStep) {
  dist::Parameter p{"p", Tensor::from<float>({1, -1}), Tensor::from<float>({0.5f, 0.25f})};
  dist::Parameter q = p;
  dist::Adam frozen({&p}, 0.1);
  dist::Adam reference({&q}, 0.1);
  frozen.set_lr(0);
  EXPECT_EQ(frozen.lr(), 0.0);
  frozen.step();
  reference.step();
  EXPECT_TRUE(p.data.equal(Tensor::from<float>({1, -1})));
  EXPECT_FALSE(q.data.equal(p.data));
  EXPECT_TRUE(frozen.exp_avg()[0].equal(reference.exp_avg()[0]));
  frozen.set_lr(0.1);
  q.data = p.data.clone();  // same parameters, same moments, same step count from here
  frozen.step();
  reference.step();
  EXPECT_TRUE(q.data.equal(p.data));
  EXPECT_TRUE(contains(config_error([&] { frozen.set_lr(-0.5); }),
                       "the learning rate must not be negative"));
}

// What a snapshot relies on: an optimizer given the saved state continues as the first would, and
// one without it takes another step (the bias corrections restart, the moments are zero).
TEST(Adam, LoadedStateContinuesTheSameSteps) {
  dist::Parameter a{"a", Tensor::from<float>({1, 2}), Tensor::from<float>({0.5f, -0.25f})};
  dist::Parameter b = a;
  b.name = "b";
  dist::Adam first({&a}, 0.01);
  first.step();
  first.step();
  dist::Adam resumed({&b}, 0.01);
  b.data = a.data.clone();
  resumed.load_state(first.steps(), first.exp_avg(), first.exp_avg_sq());
  EXPECT_EQ(resumed.steps(), 2);
  a.grad = Tensor::from<float>({-1, 2});  // a new gradient: the moments' history now matters
  b.grad = a.grad.clone();
  first.step();
  resumed.step();
  EXPECT_TRUE(a.data.equal(b.data));
  EXPECT_TRUE(first.exp_avg_sq()[0].equal(resumed.exp_avg_sq()[0]));
  dist::Adam fresh({&b}, 0.01);  // without the state: another step
  b.data = a.data.clone();
  first.step();
  fresh.step();
  EXPECT_FALSE(a.data.equal(b.data));
  EXPECT_TRUE(
      contains(config_error([&] { fresh.load_state(1, {Tensor::zeros(3)}, {Tensor::zeros(2)}); }),
               "the exp_avg of b has 3 values of torch.float32; after 1 steps it must have 2"));
  EXPECT_TRUE(contains(config_error([&] { fresh.load_state(0, {}, {}); }),
                       "got 0 exp_avg and 0 exp_avg_sq tensors for 1 parameters"));
  fresh.load_state(0, {Tensor()}, {Tensor()});  // the state before the first step
  EXPECT_EQ(fresh.steps(), 0);
  EXPECT_EQ(fresh.state_bytes(), 0);
}

TEST(Adam, BadOptionsAndGradientsAreConfigErrorsThatSayWhatToFix) {
  dist::Parameter p{"weight", Tensor::from<float>({1, 2}), Tensor::zeros(2)};
  EXPECT_TRUE(contains(config_error([] { dist::Adam({}); }), "got an empty parameter list"));
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&p}, -1); }),
                       "the learning rate must not be negative"));
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&p}, 1e-3, {.beta1 = 1}); }),
                       "beta1 must be in [0, 1), got 1"));
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&p}, 1e-3, {.beta2 = -0.1}); }),
                       "beta2 must be in [0, 1)"));
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&p}, 1e-3, {.eps = -1}); }),
                       "eps must not be negative"));
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&p}, 1e-3, {.weight_decay = -1}); }),
                       "weight_decay must not be negative"));
  dist::Parameter ints{"steps", Tensor::zeros(2, dist::kInt64), Tensor::zeros(2, dist::kInt64)};
  EXPECT_TRUE(contains(config_error([&] { dist::Adam({&ints}); }),
                       "the parameter steps is torch.int64; Adam updates float32 parameters"));
  dist::Adam optimizer({&p});
  p.grad = Tensor();
  EXPECT_TRUE(contains(config_error([&] { optimizer.step(); }),
                       "the grad of weight has 0 values of torch.float32 on cpu, the parameter 2"));
  EXPECT_EQ(optimizer.steps(), 0);  // refused before anything changed
}

// Any dist::Optimizer works through the interface a training loop and a schedule use.
TEST(Adam, IsADistOptimizer) {
  dist::Parameter p{"p", Tensor::from<float>({1}), Tensor::from<float>({1})};
  dist::Adam adam({&p}, 0.5);
  dist::Optimizer& optimizer = adam;
  optimizer.step();
  EXPECT_NEAR(p.data.item(0), 0.5, 1e-6);
  optimizer.zero_grad();
  EXPECT_EQ(p.grad.item(0), 0.0);
  optimizer.set_lr(0.125);
  EXPECT_EQ(adam.lr(), 0.125);
}

}  // namespace
