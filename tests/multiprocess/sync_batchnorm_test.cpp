// SyncBatchNorm over N ranks equals BatchNorm1d over the whole batch in one process (chapter 09).
// Each rank holds B rows of a global batch of N * B; it also computes the one-process answer on
// the whole batch itself, as an independent reference.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "dist/dist.h"
#include "dist/nn.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::Tensor;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

constexpr std::int64_t kRows = 5, kFeatures = 3;

// Deterministic, uneven values: feature c of global row r.
std::vector<float> global_values(int world, int salt) {
  std::vector<float> v;
  for (int r = 0; r < world * kRows; ++r) {
    for (int c = 0; c < kFeatures; ++c) {
      v.push_back(static_cast<float>(((r * 37 + c * 11 + salt) % 23) - 11) / 4.0f + c);
    }
  }
  return v;
}

std::vector<float> rows_of(const std::vector<float>& v, int rank) {
  const auto begin = v.begin() + rank * kRows * kFeatures;
  return {begin, begin + kRows * kFeatures};
}

bool near(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  if (a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (std::abs(double{a[k]} - b[k]) > tol * (1 + std::abs(double{b[k]}))) return false;
  }
  return true;
}

class SyncBatchNormWorlds : public ::testing::TestWithParam<int> {};

TEST_P(SyncBatchNormWorlds, EqualsBatchNormOverTheWholeBatchInOneProcess) {
  const int world = GetParam();
  expect_all_ok(run_group(world, {.timeout = 30s}, [&](int rank) {
    const std::vector<float> x = global_values(world, 0), dy = global_values(world, 5);

    dist::BatchNorm1d whole(kFeatures);  // one process, all N * B rows
    const std::vector<float> out_whole = whole.forward(Tensor::from(x)).to_vector<float>();
    const std::vector<float> dx_whole = whole.backward(Tensor::from(dy)).to_vector<float>();

    dist::BatchNorm1d sync(kFeatures, dist::Device::cpu(), &dist::default_group());
    const std::vector<float> out = sync.forward(Tensor::from(rows_of(x, rank))).to_vector<float>();
    const std::vector<float> dx = sync.backward(Tensor::from(rows_of(dy, rank))).to_vector<float>();
    // The weight and bias gradients are this rank's share; their sum over ranks is the whole's.
    Tensor dw = sync.weight().grad, db = sync.bias().grad;
    dist::all_reduce(dw);
    dist::all_reduce(db);

    bool ok = near(out, rows_of(out_whole, rank), 1e-6) && near(dx, rows_of(dx_whole, rank), 1e-5);
    ok = ok && near(dw.to_vector<float>(), whole.weight().grad.to_vector<float>(), 1e-5);
    ok = ok && near(db.to_vector<float>(), whole.bias().grad.to_vector<float>(), 1e-5);
    ok = ok && near(sync.running_mean().to_vector<float>(), whole.running_mean().to_vector<float>(),
                    1e-6);
    ok = ok &&
         near(sync.running_var().to_vector<float>(), whole.running_var().to_vector<float>(), 1e-6);
    // And without the sync, a rank's statistics are its own rows' (a different answer for W > 1).
    dist::BatchNorm1d local(kFeatures);
    const std::vector<float> out_local =
        local.forward(Tensor::from(rows_of(x, rank))).to_vector<float>();
    if (world > 1) ok = ok && !near(out_local, rows_of(out_whole, rank), 1e-3);
    return ok ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SyncBatchNormWorlds, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
