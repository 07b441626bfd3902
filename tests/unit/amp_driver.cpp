// The C++ half of amp_replay.py: reads one case per line from stdin and prints one line per case.
// A case is a GradScaler's options followed by its steps:
//   INIT GROWTH BACKOFF INTERVAL G G ...
// where each G is one step's gradient, float32 values separated by ',' ("inf", "-inf" and "nan"
// allowed), on one parameter. Each step runs model.backward's part by hand (the gradient set to
// G times scale(1), that is scaled as a backward from scaler.scale(loss) would scale it), then
// scaler.step(optimizer) and scaler.update(), and prints one record:
//   SCALE/FOUND/STEPPED/UNSCALED/NEXT/TRACKER
// SCALE and NEXT: the scale before and after update() as float32 bits in hex; FOUND and STEPPED:
// 0 or 1; UNSCALED: the gradient after unscale_, each value's bits in hex (nan for a NaN, whose
// payload neither side fixes), ','-separated; TRACKER: growth_tracker() after update(). The
// optimizer is a stand-in that counts its steps, so that STEPPED is what the optimizer saw. A
// ConfigError ends the case with the record "error:" followed by the first word after
// "GradScaler" in its message that names what failed (init_scale, growth_factor, ... or
// overflow / zero for update()).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "dist/amp.h"
#include "dist/check.h"
#include "dist/optim.h"
#include "parity_driver.h"

namespace {

// An optimizer that only counts its steps.
class CountingOptimizer : public dist::Optimizer {
 public:
  explicit CountingOptimizer(dist::Parameter* p) : params_{p} {}
  void zero_grad() override {}
  void step() override { ++steps; }
  double lr() const override { return 0; }
  void set_lr(double) override {}
  const std::vector<dist::Parameter*>& parameters() const override { return params_; }
  int steps = 0;

 private:
  std::vector<dist::Parameter*> params_;
};

std::string bits(float value) {
  if (std::isnan(value)) return "nan";
  char text[16];
  std::snprintf(text, sizeof text, "%08x", std::bit_cast<std::uint32_t>(value));
  return text;
}

std::vector<float> parse_step(const std::string& token) {
  std::vector<float> values;
  std::istringstream in(token);
  std::string value;
  while (std::getline(in, value, ',')) {
    values.push_back(static_cast<float>(parity::parse<double>(value, "amp_driver")));
  }
  return values;
}

// What a ConfigError was about: the option it names, or what update() hit.
std::string error_word(const std::string& message) {
  for (const char* word : {"init_scale", "growth_factor", "backoff_factor", "growth_interval"}) {
    if (message.rfind(std::string("GradScaler: ") + word, 0) == 0) return word;
  }
  if (message.find("overflows float32") != std::string::npos) return "overflow";
  if (message.find("reaches 0") != std::string::npos) return "zero";
  return "other";
}

std::string run_case(const std::string& line) {
  std::istringstream in(line);
  std::string init, growth, backoff, interval;
  in >> init >> growth >> backoff >> interval;
  std::string out;
  try {
    dist::GradScaler scaler(
        {.init_scale = parity::parse<double>(init, "amp_driver"),
         .growth_factor = parity::parse<double>(growth, "amp_driver"),
         .backoff_factor = parity::parse<double>(backoff, "amp_driver"),
         .growth_interval = parity::parse<std::int64_t>(interval, "amp_driver")});
    dist::Parameter p;
    p.name = "weight";
    CountingOptimizer optimizer(&p);
    std::string token;
    while (in >> token) {
      const std::vector<float> g = parse_step(token);
      p.grad = dist::Tensor::from(g);
      // The backward of a linear function of the loss: the gradient scales with the loss's.
      const float s = scaler.scale(dist::Tensor::from({1.0f})).item(0);
      for (std::size_t i = 0; i < g.size(); ++i) p.grad.set(static_cast<std::int64_t>(i), g[i] * s);
      const float before = scaler.get_scale();
      const int steps_before = optimizer.steps;
      scaler.step(optimizer);
      std::string unscaled;
      for (float v : p.grad.to_vector<float>()) unscaled += (unscaled.empty() ? "" : ",") + bits(v);
      const bool found = scaler.found_inf();
      const bool stepped = optimizer.steps != steps_before;
      if (!out.empty()) out += " ";
      out += bits(before) + "/" + (found ? "1" : "0") + "/" + (stepped ? "1" : "0") + "/" +
             unscaled + "/";
      scaler.update();
      out += bits(scaler.get_scale()) + "/" + std::to_string(scaler.growth_tracker());
    }
  } catch (const dist::ConfigError& e) {
    if (!out.empty() && out.back() != ' ' && out.back() != '/') out += " ";
    out += "error:" + error_word(e.what());
  }
  return out;
}

}  // namespace

int main() {
  std::string line;
  while (std::getline(std::cin, line)) std::cout << run_case(line) << "\n";
  return 0;
}
