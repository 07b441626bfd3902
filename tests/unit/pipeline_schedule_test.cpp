// The pipeline's pure logic (dist/pipeline.h), in one process: the balanced cut, the weights'
// recipe, GPipe's and 1F1B's orders, their peak stash and bubble against the closed forms (a
// simulation with forward and backward times), and the stage programs against a model of blocking
// sends: none deadlocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dist/check.h"
#include "dist/pipeline.h"
#include "dist/seed.h"

namespace {

using dist::PipelineAction;
using dist::ScheduleKind;
using Op = dist::detail::PipelineOp::Type;

std::string joined(const std::vector<PipelineAction>& order) {
  std::string out;
  for (const PipelineAction& a : order) out += (out.empty() ? "" : " ") + a.str();
  return out;
}

TEST(PipelineOrder, GPipeRunsEveryForwardThenEveryBackward) {
  EXPECT_EQ(joined(dist::pipeline_order(ScheduleKind::kGPipe, 4, 2, 3)), "F0 F1 F2 B0 B1 B2");
}

TEST(PipelineOrder, OneFOneBWarmsUpWithPMinusSMinusOneForwards) {
  EXPECT_EQ(joined(dist::pipeline_order(ScheduleKind::k1F1B, 4, 0, 6)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(joined(dist::pipeline_order(ScheduleKind::k1F1B, 4, 2, 6)),
            "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(joined(dist::pipeline_order(ScheduleKind::k1F1B, 4, 3, 3)), "F0 B0 F1 B1 F2 B2");
  // Fewer micro-batches than the warm-up: the warm-up is cut to m (torch refuses m < p).
  EXPECT_EQ(joined(dist::pipeline_order(ScheduleKind::k1F1B, 4, 0, 2)), "F0 F1 B0 B1");
}

// Every micro-batch forwarded once, then backwarded once, backwards in micro-batch order (so the
// gradients add up in the order one process adds them), and the peak of micro-batches between
// their F and their B equal to the closed form.
TEST(PipelineOrder, EveryScheduleRunsEachMicroBatchOnceInOrderWithItsClosedFormPeak) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 12; ++m) {
        for (int s = 0; s < p; ++s) {
          const auto order = dist::pipeline_order(kind, p, s, m);
          ASSERT_EQ(order.size(), 2u * static_cast<std::size_t>(m));
          int next_f = 0, next_b = 0, live = 0, peak = 0;
          for (const PipelineAction& a : order) {
            if (a.type == PipelineAction::Type::kForward) {
              ASSERT_EQ(a.microbatch, next_f++);
              peak = std::max(peak, ++live);
            } else {
              ASSERT_EQ(a.microbatch, next_b++);
              ASSERT_LT(a.microbatch, next_f);
              --live;
            }
          }
          EXPECT_EQ(peak, dist::peak_stash_closed_form(kind, p, s, m))
              << "p=" << p << " s=" << s << " m=" << m;
        }
      }
    }
  }
  EXPECT_EQ(dist::peak_stash_closed_form(ScheduleKind::k1F1B, 4, 0, 8), 4);
  EXPECT_EQ(dist::peak_stash_closed_form(ScheduleKind::kGPipe, 4, 0, 8), 8);
}

// Each stage runs its actions in order, each as soon as its input is there: F(s, i) after
// F(s - 1, i), B(s, i) after B(s + 1, i) (on the last stage, after its own F(s, i)). Messages
// take no time. Returns the step's length.
double simulated_step(ScheduleKind kind, int p, int m, double t_f, double t_b) {
  std::vector<std::vector<PipelineAction>> orders;
  for (int s = 0; s < p; ++s) orders.push_back(dist::pipeline_order(kind, p, s, m));
  std::map<std::pair<int, int>, double> f_end, b_end;  // (stage, micro-batch) -> end time
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<double> free_at(static_cast<std::size_t>(p), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < p; ++s) {
      auto& k = next[static_cast<std::size_t>(s)];
      if (k == orders[static_cast<std::size_t>(s)].size()) continue;
      const PipelineAction a = orders[static_cast<std::size_t>(s)][k];
      const bool forward = a.type == PipelineAction::Type::kForward;
      const std::pair<int, int> dep = forward        ? std::pair{s - 1, a.microbatch}
                                      : (s == p - 1) ? std::pair{s, a.microbatch}
                                                     : std::pair{s + 1, a.microbatch};
      const auto& deps = (forward || s == p - 1) ? f_end : b_end;
      double ready = free_at[static_cast<std::size_t>(s)];
      if (!(forward && s == 0)) {
        auto it = deps.find(dep);
        if (it == deps.end()) continue;
        ready = std::max(ready, it->second);
      }
      const double end = ready + (forward ? t_f : t_b);
      (forward ? f_end : b_end)[{s, a.microbatch}] = end;
      free_at[static_cast<std::size_t>(s)] = end;
      ++k;
      progress = true;
    }
  }
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(next[static_cast<std::size_t>(s)], 2u * static_cast<std::size_t>(m)) << "stuck";
  }
  return *std::max_element(free_at.begin(), free_at.end());
}

// The closed form (p - 1)/(m + p - 1) is the simulated idle fraction of both schedules, with a
// backward as long as a forward or twice as long: the unit is one forward plus one backward.
TEST(PipelineBubble, SimulatedIdleFractionIsTheClosedFormForBothSchedules) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (double t_b : {1.0, 2.0}) {
      for (int p = 1; p <= 8; ++p) {
        for (int m = 1; m <= 12; ++m) {
          const double step = simulated_step(kind, p, m, 1.0, t_b);
          EXPECT_DOUBLE_EQ(step, (m + p - 1) * (1.0 + t_b)) << "p=" << p << " m=" << m;
          const double busy = m * (1.0 + t_b);
          EXPECT_DOUBLE_EQ(1.0 - busy / step, dist::bubble_fraction_closed_form(p, m));
        }
      }
    }
  }
  EXPECT_DOUBLE_EQ(dist::bubble_fraction_closed_form(4, 8), 3.0 / 11.0);
}

// The stage programs as blocking sends and receives: a send completes only when its receiver
// is at the matching receive (Gloo's send waits for the receiver's buffer). Every program of
// every stage must run to its end.
TEST(PipelineProgram, BlockingSendsAndReceivesNeverDeadlock) {
  for (ScheduleKind kind : {ScheduleKind::kGPipe, ScheduleKind::k1F1B}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 12; ++m) {
        std::vector<std::vector<dist::detail::PipelineOp>> programs;
        for (int s = 0; s < p; ++s) programs.push_back(dist::detail::stage_program(kind, p, s, m));
        std::vector<std::size_t> pc(static_cast<std::size_t>(p), 0);
        const auto at = [&](int s) -> const dist::detail::PipelineOp* {
          const auto& prog = programs[static_cast<std::size_t>(s)];
          const std::size_t k = pc[static_cast<std::size_t>(s)];
          return k < prog.size() ? &prog[k] : nullptr;
        };
        int computes = 0;
        for (bool progress = true; progress;) {
          progress = false;
          for (int s = 0; s < p; ++s) {
            const auto* op = at(s);
            if (op == nullptr) continue;
            if (op->type == Op::kForward || op->type == Op::kBackward) {
              ++pc[static_cast<std::size_t>(s)];
              ++computes;
              progress = true;
              continue;
            }
            // A send meets the peer's receive of the same message (and the other way round).
            const bool send = op->type == Op::kSendForward || op->type == Op::kSendBackward;
            if (!send) continue;  // receives advance with their send
            const bool fwd = op->type == Op::kSendForward;
            const int peer = fwd ? s + 1 : s - 1;
            ASSERT_TRUE(peer >= 0 && peer < p);
            const auto* theirs = at(peer);
            if (theirs != nullptr && theirs->microbatch == op->microbatch &&
                theirs->type == (fwd ? Op::kRecvForward : Op::kRecvBackward)) {
              ++pc[static_cast<std::size_t>(s)];
              ++pc[static_cast<std::size_t>(peer)];
              progress = true;
            }
          }
        }
        for (int s = 0; s < p; ++s) {
          const auto* stuck = at(s);
          EXPECT_EQ(stuck, nullptr)
              << "deadlock: p=" << p << " m=" << m << " stage " << s << " waits at op "
              << static_cast<int>(stuck->type) << " of micro-batch " << stuck->microbatch;
          if (stuck != nullptr) return;
        }
        EXPECT_EQ(computes, 2 * p * m);
      }
    }
  }
}

TEST(PipelineSplit, BalancesTheLinearLayersWithTheLayersAfterThem) {
  // 5 Linear layers with ReLUs between, 9 layers: L R L R L R L R L.
  const dist::SequentialSpec model = dist::mlp_spec({8, 8, 8, 8, 8, 4}, 1);
  ASSERT_EQ(model.layers.size(), 9u);
  const auto two = dist::split_stages(model, 2);  // 3 + 2 units
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].begin, 0);
  EXPECT_EQ(two[0].end, 6);  // L R L R L R
  EXPECT_EQ(two[1].begin, 6);
  EXPECT_EQ(two[1].end, 9);
  const auto four = dist::split_stages(model, 4);  // 2 + 1 + 1 + 1 units
  const std::vector<std::pair<int, int>> want = {{0, 4}, {4, 6}, {6, 8}, {8, 9}};
  for (std::size_t s = 0; s < 4; ++s) {
    EXPECT_EQ(four[s].begin, want[s].first) << s;
    EXPECT_EQ(four[s].end, want[s].second) << s;
  }
  const auto five = dist::split_stages(model, 5);
  EXPECT_EQ(five[4].begin, 8);
}

TEST(PipelineSplit, MoreStagesThanLinearLayersIsAConfigErrorNamingBoth) {
  const dist::SequentialSpec model = dist::mlp_spec({8, 8, 8, 4}, 1);
  try {
    dist::split_stages(model, 4);
    FAIL() << "no error";
  } catch (const dist::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("4 stages for a model of 3 Linear layers"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(dist::split_stages(model, 0), dist::ConfigError);
  dist::SequentialSpec starts_with_relu{{dist::LayerSpec::relu(), dist::LayerSpec::linear(2, 2)}};
  EXPECT_THROW(dist::split_stages(starts_with_relu, 1), dist::ConfigError);
  dist::SequentialSpec broken{{dist::LayerSpec::linear(4, 3), dist::LayerSpec::linear(4, 2)}};
  EXPECT_THROW(dist::initial_weights(broken), dist::ConfigError);
}

// The recipe in the header, drawn here on its own: one generator, each Linear's weight then its
// bias, times 2^-floor(log2(in))/2.
TEST(PipelineWeights, AreTheHeadersRecipeFromOneGenerator) {
  const dist::SequentialSpec model = dist::mlp_spec({5, 16, 3}, 42);
  const auto inits = dist::initial_weights(model);
  ASSERT_EQ(inits.size(), 2u);
  dist::Generator g(42);
  const std::vector<std::pair<std::int64_t, std::int64_t>> shapes = {{5, 16}, {16, 3}};
  const std::vector<float> scales = {0.5f, 0.25f};  // in = 5: k = 1; in = 16: k = 2
  for (std::size_t l = 0; l < 2; ++l) {
    const auto [in, out] = shapes[l];
    const auto w = dist::randn(in * out, g).to_vector<float>();
    const auto b = dist::randn(out, g).to_vector<float>();
    ASSERT_EQ(inits[l].weight.size(), w.size());
    ASSERT_EQ(inits[l].bias.size(), b.size());
    for (std::size_t k = 0; k < w.size(); ++k) ASSERT_EQ(inits[l].weight[k], w[k] * scales[l]);
    for (std::size_t k = 0; k < b.size(); ++k) ASSERT_EQ(inits[l].bias[k], b[k] * scales[l]);
  }
}

}  // namespace
