// dist/amp.h: GradScaler's rules in closed form (growth after growth_interval clean steps,
// backoff on inf or NaN, skipped steps), its misuse and its refusals. amp_replay.py checks every
// scale and unscaled value of many more sequences against a replay of torch 1.13's rules.
#include "dist/amp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "dist/nn.h"
#include "dist/optim.h"
#include "errors.h"

namespace {

using dist::Tensor;
using dist::testing::config_error;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One parameter of two values at 1, trained by SGD with lr 1: a step subtracts the gradient.
struct Model {
  dist::Parameter p{"weight", Tensor::from({1.0f, 1.0f}), Tensor::zeros(2)};
  dist::SGD optimizer{{&p}, 1.0};
};

// One training step whose backward gives `grad` times the scale (as a backward from
// scaler.scale(loss) would); returns whether the optimizer stepped.
bool train_step(dist::GradScaler& scaler, Model& m, std::vector<float> grad) {
  const float s = scaler.scale(Tensor::from({1.0f})).item(0);
  for (float& g : grad) g *= s;
  m.p.grad = Tensor::from(grad);
  const bool stepped = scaler.step(m.optimizer);
  scaler.update();
  return stepped;
}

TEST(GradScaler, StartsAtTorchsDefaults) {
  dist::GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0f);
  EXPECT_EQ(scaler.options().growth_factor, 2.0);
  EXPECT_EQ(scaler.options().backoff_factor, 0.5);
  EXPECT_EQ(scaler.options().growth_interval, 2000);
  EXPECT_EQ(scaler.scale(Tensor::from({0.5f, -3.0f})).to_vector<float>(),
            (std::vector<float>{32768.0f, -196608.0f}));
}

TEST(GradScaler, GrowsAfterGrowthIntervalCleanStepsAndBacksOffOnInfOrNaN) {
  dist::GradScaler scaler({.init_scale = 1024, .growth_interval = 3});
  Model m;
  // Three clean steps: the third grows the scale, and resets the count.
  EXPECT_TRUE(train_step(scaler, m, {0.25f, 0.5f}));
  EXPECT_EQ(scaler.get_scale(), 1024.0f);
  EXPECT_EQ(scaler.growth_tracker(), 1);
  EXPECT_TRUE(train_step(scaler, m, {0.25f, 0.5f}));
  EXPECT_TRUE(train_step(scaler, m, {0.25f, 0.5f}));
  EXPECT_EQ(scaler.get_scale(), 2048.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // The optimizer saw the real gradients: 1 - 3 * 0.25 and 1 - 3 * 0.5.
  EXPECT_EQ(m.p.data.to_vector<float>(), (std::vector<float>{0.25f, -0.5f}));
  // An inf: skipped, the scale halves, the count restarts.
  EXPECT_TRUE(train_step(scaler, m, {0.25f, 0.5f}));
  EXPECT_EQ(scaler.growth_tracker(), 1);
  EXPECT_FALSE(train_step(scaler, m, {kInf, 0.5f}));
  EXPECT_TRUE(scaler.found_inf());
  EXPECT_EQ(scaler.get_scale(), 1024.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // A NaN as well, and the weights did not move on either skipped step.
  EXPECT_FALSE(train_step(scaler, m, {0.0f, kNaN}));
  EXPECT_EQ(scaler.get_scale(), 512.0f);
  EXPECT_EQ(m.p.data.to_vector<float>(), (std::vector<float>{0.0f, -1.0f}));
}

TEST(GradScaler, FindsAGradientThatOverflowsOnlyOnceScaled) {
  // 1e34 is a finite float32; times 2^16 it is not (float32 ends near 3.4e38).
  dist::GradScaler scaler;
  Model m;
  EXPECT_FALSE(train_step(scaler, m, {1e34f, 0.0f}));
  EXPECT_EQ(scaler.get_scale(), 32768.0f);
}

TEST(GradScaler, UnscalesWithTheReciprocalRoundedOnce) {
  // scale 3: inv_scale = float32(1/3), each value times it in float32, as torch computes it.
  dist::GradScaler scaler({.init_scale = 3});
  Model m;
  m.p.grad = Tensor::from({0.3f, 5.0f});
  scaler.unscale_(m.optimizer);
  const float inv = static_cast<float>(1.0 / 3.0);
  EXPECT_EQ(m.p.grad.to_vector<float>(), (std::vector<float>{0.3f * inv, 5.0f * inv}));
  // So that the test tells the rounded reciprocal from a division by the scale:
  EXPECT_NE(0.3f * inv, 0.3f / 3.0f);
  EXPECT_NE(5.0f * inv, 5.0f / 3.0f);
}

TEST(GradScaler, ChecksTheScaledValuesAsTorchDoes) {
  // torch's kernel looks at each value before it multiplies: with a scale below 1, a finite
  // scaled value can unscale to inf and still count as finite. So does this scaler.
  dist::GradScaler scaler({.init_scale = 0.25});
  Model m;
  m.p.grad = Tensor::from({1e38f, 1.0f});
  scaler.unscale_(m.optimizer);
  EXPECT_FALSE(scaler.found_inf());
  EXPECT_EQ(m.p.grad.to_vector<float>(), (std::vector<float>{kInf, 4.0f}));
}

TEST(GradScaler, RefusesCallsOutOfOrder) {
  dist::GradScaler scaler;
  Model m;
  EXPECT_THROW(scaler.update(), dist::Error);  // nothing recorded yet
  scaler.unscale_(m.optimizer);
  EXPECT_THROW(scaler.unscale_(m.optimizer), dist::Error);  // twice in one step
  scaler.step(m.optimizer);
  EXPECT_THROW(scaler.step(m.optimizer), dist::Error);
  EXPECT_THROW(scaler.unscale_(m.optimizer), dist::Error);  // after step
  scaler.update();
  EXPECT_NO_THROW(scaler.step(m.optimizer));  // a new step
}

TEST(GradScaler, RefusesOptionsOutOfRangeNamingThem) {
  const auto refuses = [](dist::GradScalerOptions o, const std::string& name,
                          const std::string& value) {
    const std::string message = config_error([&] { dist::GradScaler scaler(o); });
    EXPECT_TRUE(contains(message, name) && contains(message, value)) << message;
  };
  refuses({.init_scale = 0}, "init_scale", "got 0");
  refuses({.init_scale = -2}, "init_scale", "got -2");
  refuses({.init_scale = std::nan("")}, "init_scale", "nan");
  refuses({.init_scale = HUGE_VAL}, "init_scale", "inf");
  refuses({.init_scale = 1e39}, "init_scale", "1e+39");
  refuses({.init_scale = 1e-46}, "init_scale", "rounds to 0");
  refuses({.growth_factor = 1}, "growth_factor", "got 1");
  refuses({.growth_factor = HUGE_VAL}, "growth_factor", "inf");
  refuses({.backoff_factor = 1}, "backoff_factor", "got 1");
  refuses({.backoff_factor = 0}, "backoff_factor", "got 0");
  refuses({.growth_interval = 0}, "growth_interval", "got 0");
  refuses({.growth_interval = std::int64_t{1} << 31}, "growth_interval", "2147483648");
}

TEST(GradScaler, RefusesAGrowthThatOverflowsFloat32AndKeepsItsScale) {
  // torch 1.13 would set the scale to inf here; torch >= 2.1 keeps 2^127 silently.
  dist::GradScaler scaler({.init_scale = 0x1p127, .growth_interval = 1});
  Model m;
  m.p.grad = Tensor::from({0.0f, 0.0f});
  scaler.step(m.optimizer);
  const std::string message = config_error([&] { scaler.update(); });
  EXPECT_TRUE(contains(message, "1.7014118346046923e+38") && contains(message, "overflows"))
      << message;
  EXPECT_EQ(scaler.get_scale(), 0x1p127f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, RefusesABackoffToZero) {
  // The smallest float32 subnormal, halved: 0. torch 1.13 would then unscale 0 * inf = NaN.
  dist::GradScaler scaler({.init_scale = 0x1p-149});
  Model m;
  m.p.grad = Tensor::from({kNaN, 0.0f});
  EXPECT_FALSE(scaler.step(m.optimizer));
  const std::string message = config_error([&] { scaler.update(); });
  EXPECT_TRUE(contains(message, "reaches 0")) << message;
}

TEST(GradScaler, RefusesFloat16GradientsAsTorchDoes) {
  // The optimizer steps float32 master weights; torch's unscale_ refuses float16 gradients
  // ("Attempting to unscale FP16 gradients.").
  dist::GradScaler scaler;
  dist::Parameter p{"weight", Tensor::zeros(2, dist::kFloat16), Tensor::zeros(2, dist::kFloat16)};
  dist::SGD optimizer({&p}, 1.0);
  const std::string message = config_error([&] { scaler.unscale_(optimizer); });
  EXPECT_TRUE(contains(message, "gradient of weight") && contains(message, "torch.float16"))
      << message;
}

TEST(GradScaler, RefusesGradientsThatAreNotFloatingPoint) {
  dist::GradScaler scaler;
  dist::Parameter p{"counts", Tensor::zeros(2, dist::kInt32), Tensor::zeros(2, dist::kInt32)};
  dist::SGD optimizer({&p}, 1.0);
  const std::string message = config_error([&] { scaler.unscale_(optimizer); });
  EXPECT_TRUE(contains(message, "gradient of counts") && contains(message, "torch.int32"))
      << message;
}

}  // namespace

namespace {

// The half-precision layers (dist/nn.h) that mixed-precision training runs;
// mixed_precision_parity.py compares them with torch 1.13.

TEST(MixedPrecision, LinearComputesInTheInputsDtypeAndKeepsFloat32MasterWeights) {
  // Weight 1 + 2^-9 is not a bfloat16: the layer computes with its bfloat16 copy, 1.
  dist::Linear layer(1, 1, {.weight = {1.0f + 0x1p-9f}, .bias = {0.0f}});
  const Tensor out = layer.forward(Tensor::from({3.0f}).to(dist::kBFloat16));
  EXPECT_EQ(out.dtype(), dist::kBFloat16);
  EXPECT_EQ(out.to(dist::kFloat32).item(0), 3.0f);
  EXPECT_EQ(layer.weight().data.dtype(), dist::kFloat32);
  EXPECT_EQ(layer.weight().data.item(0), 1.0f + 0x1p-9f);  // the master weight is untouched
  // A float32 gradient is rounded to bfloat16 first: 1 + 2^-9 becomes 1; d loss / d W = 1 * 3.
  const Tensor gx = layer.backward(Tensor::from({1.0f + 0x1p-9f}));
  EXPECT_EQ(gx.dtype(), dist::kBFloat16);
  EXPECT_EQ(layer.weight().grad.dtype(), dist::kFloat32);
  EXPECT_EQ(layer.weight().grad.item(0), 3.0f);
  EXPECT_EQ(layer.bias().grad.item(0), 1.0f);
}

TEST(MixedPrecision, Float16GradientsOverflowToInfForTheScalerToFind) {
  // 70000 is past float16's largest, 65504: the weight's gradient is inf, and a GradScaler skips
  // the step.
  dist::Linear layer(1, 1, {.weight = {1.0f}, .bias = {0.0f}});
  layer.forward(Tensor::from({2.0f}).to(dist::kFloat16));
  layer.backward(Tensor::from({40000.0f}));
  EXPECT_TRUE(std::isinf(layer.weight().grad.item(0)));
  dist::SGD optimizer(layer.parameters(), 0.1);
  dist::GradScaler scaler;
  EXPECT_FALSE(scaler.step(optimizer));
}

TEST(MixedPrecision, ReluKeepsTheDtypeAndCrossEntropyRunsInFloat32) {
  dist::ReLU relu;
  const Tensor x = Tensor::from({-1.5f, 0.1f}).to(dist::kBFloat16);
  const Tensor y = relu.forward(x);
  EXPECT_EQ(y.dtype(), dist::kBFloat16);
  EXPECT_EQ(y.to(dist::kFloat32).to_vector<float>(),
            (std::vector<float>{0.0f, static_cast<float>(x.to(dist::kFloat32).item(1))}));
  const Tensor logits = Tensor::from({0.1f, 2.0f, -1.0f}).to(dist::kFloat16);
  const dist::CrossEntropy half = dist::cross_entropy(logits, Tensor::from<std::int64_t>({1}), 3);
  const dist::CrossEntropy wide =
      dist::cross_entropy(logits.to(dist::kFloat32), Tensor::from<std::int64_t>({1}), 3);
  EXPECT_EQ(half.grad.dtype(), dist::kFloat32);
  EXPECT_EQ(half.loss, wide.loss);
  EXPECT_TRUE(half.grad.equal(wide.grad));
}

TEST(MixedPrecision, LinearRefusesAGradientOfTheOtherHalfDtype) {
  dist::Linear layer(1, 1, {.weight = {1.0f}, .bias = {0.0f}});
  layer.forward(Tensor::from({2.0f}).to(dist::kBFloat16));
  const std::string message =
      config_error([&] { layer.backward(Tensor::from({1.0f}).to(dist::kFloat16)); });
  EXPECT_TRUE(contains(message, "torch.bfloat16") && contains(message, "torch.float16")) << message;
}

}  // namespace
