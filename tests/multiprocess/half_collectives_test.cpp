// float16 and bfloat16 through the collectives of the Gloo backend (the library's mesh, and
// Gloo's own algorithms for broadcast, gather and scatter), on real processes over loopback:
//   * every collective and reduce op at world sizes 1, 2, 3, 4 and 8, for 0, 1 and 7 elements,
//     three of the ring's 64 KiB chunks and 3 elements more, and 1 MiB, against closed forms
//     whose every value and partial sum is exact in both formats (integers up to 256, halves);
//   * SUM, whose result depends on the rounding at each step: each rank's value is 1 but one
//     rank's, which is 2048 (256 for bfloat16), so a 1 added after the large value is lost (2049
//     is a tie, rounded to the even 2048) and one added before it is not. The expectation is
//     computed here with a rounding of this file's own, in the order the mesh adds (gloo_mesh.h:
//     rank order for a small tensor; for ring segment s, ranks s+1, s+2, ... around to s).
// NCCL's variants are in tests/gpu/gpu_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "closed_forms.h"
#include "dist/dist.h"
#include "ranks.h"

namespace {

using dist::DType;
using dist::ReduceOp;
using dist::Tensor;
using dist::testing::Checker;
using dist::testing::input_for;
using dist::testing::make;
using dist::testing::ops_for;
using dist::testing::reduced;

constexpr std::int64_t kRingChunkBytes = 64 * 1024;  // MeshCollectives::kChunk
constexpr std::int64_t kLargeBytes = 1024 * 1024;

// x rounded to `bits` significant bits, ties to even (std::nearbyint in the default rounding
// mode), for the normal range the sums below stay in: a reference that shares no code with
// dist::Half.
double round_to_bits(double x, int bits) {
  if (x == 0) return x;
  const double ulp = std::ldexp(1.0, std::ilogb(x) - (bits - 1));
  return std::nearbyint(x / ulp) * ulp;
}

int significant_bits(DType dtype) {
  return dtype == dist::kFloat16 ? 11 : 8;
}

void check_reductions(Checker& c, int W, DType dtype, std::int64_t n) {
  auto& group = dist::default_group();
  for (ReduceOp op : ops_for(dtype)) {
    const std::string name = dist::reduce_op_name(op);
    Tensor t = make(n, dtype, [&](std::int64_t i) { return input_for(op, c.rank, i); });
    dist::all_reduce(t, op);
    c.expect_all("all_reduce " + name, t, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i); });
    // reduce_scatter: rank r's piece j holds at i what it holds at i + j for all_reduce.
    std::vector<Tensor> pieces;
    for (int j = 0; j < W; ++j) {
      pieces.push_back(
          make(n, dtype, [&](std::int64_t i) { return input_for(op, c.rank, i + j); }));
    }
    Tensor out(n, dtype);
    dist::reduce_scatter(out, pieces, op);
    c.expect_all("reduce_scatter " + name, out, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i + c.rank); });
    Tensor flat_out(n, dtype);
    group.reduce_scatter_tensor(flat_out, dist::cat(pieces, dist::Device::cpu()), op);
    c.expect_all("reduce_scatter_tensor " + name, flat_out, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i + c.rank); });
  }
}

// Values up to 7 * 16 + 12 = 124: exact in both formats.
void check_data_movement(Checker& c, int W, DType dtype, std::int64_t n) {
  const auto value = [](int r, int period) {
    return [r, period](std::int64_t i) { return r * 16.0 + static_cast<double>(i % period); };
  };
  Tensor b = make(n, dtype, value(c.rank, 11));
  dist::broadcast(b, W - 1);
  c.expect_all("broadcast", b, n, dtype, value(W - 1, 11));

  std::vector<Tensor> all;
  dist::all_gather(all, make(n, dtype, value(c.rank, 13)));
  for (int j = 0; j < W && static_cast<int>(all.size()) == W; ++j) {
    c.expect_all("all_gather[" + std::to_string(j) + "]", all[static_cast<std::size_t>(j)], n,
                 dtype, value(j, 13));
  }
  Tensor whole(n * W, dtype);
  dist::default_group().all_gather_into_tensor(whole, make(n, dtype, value(c.rank, 5)));
  c.expect_all("all_gather_into_tensor", whole, n * W, dtype, [&](std::int64_t i) {
    return value(static_cast<int>(i / std::max<std::int64_t>(n, 1)),
                 5)(i % std::max<std::int64_t>(n, 1));
  });

  std::vector<Tensor> gathered;
  dist::gather(make(n, dtype, value(c.rank, 9)), c.rank == 0 ? &gathered : nullptr, 0);
  for (int j = 0; c.rank == 0 && j < W; ++j) {
    c.expect_all("gather[" + std::to_string(j) + "]", gathered[static_cast<std::size_t>(j)], n,
                 dtype, value(j, 9));
  }
  std::vector<Tensor> scattered;
  for (int j = 0; j < W; ++j) scattered.push_back(make(n, dtype, value(j, 4)));
  Tensor mine(n, dtype);
  dist::scatter(mine, c.rank == 0 ? &scattered : nullptr, 0);
  c.expect_all("scatter", mine, n, dtype, value(c.rank, 4));
}

// Rank `big` holds `large` (2048 or 256: where adding 1 is a tie that rounds back down), the
// others 1, at element i for big = i % W.
double order_input(DType dtype, int W, int r, std::int64_t i) {
  const double large = dtype == dist::kFloat16 ? 2048 : 256;
  return r == static_cast<int>(i % W) ? large : 1;
}

// The sum the mesh forms for element i of n: the ranks' values in its order, rounded to the
// dtype after every addition.
double sum_in_mesh_order(DType dtype, int W, std::int64_t n, std::int64_t i, bool ring) {
  int first = 0;  // the one-step exchange adds in rank order
  if (ring) {
    int s = 0;  // the ring segment holding i: [n*s/W, n*(s+1)/W)
    while (n * (s + 1) / W <= i) ++s;
    first = (s + 1) % W;
  }
  double sum = order_input(dtype, W, first, i);
  for (int k = 1; k < W; ++k) {
    sum = round_to_bits(sum + order_input(dtype, W, (first + k) % W, i), significant_bits(dtype));
  }
  return sum;
}

void check_sum_rounds_every_step(Checker& c, int W, DType dtype) {
  const auto element = static_cast<std::int64_t>(dist::element_size(dtype));
  const std::int64_t ring_size = 3 * kRingChunkBytes / element + 3;  // past the one-step limit
  for (std::int64_t n : {std::int64_t{64}, ring_size}) {
    const bool ring = n == ring_size;
    Tensor t = make(n, dtype, [&](std::int64_t i) { return order_input(dtype, W, c.rank, i); });
    dist::all_reduce(t, ReduceOp::SUM);
    c.expect_all(std::string("all_reduce SUM rounded per step, ") + (ring ? "ring" : "one step"), t,
                 n, dtype, [&](std::int64_t i) { return sum_in_mesh_order(dtype, W, n, i, ring); });
  }
}

int run_half_collectives(int rank, int world) {
  Checker c{rank};
  for (DType dtype : {dist::kFloat16, dist::kBFloat16}) {
    const auto element = static_cast<std::int64_t>(dist::element_size(dtype));
    const std::int64_t chunks = 3 * kRingChunkBytes / element + 3;
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, chunks,
                           kLargeBytes / element / world}) {
      check_reductions(c, world, dtype, n);
      check_data_movement(c, world, dtype, n);
    }
    check_sum_rounds_every_step(c, world, dtype);
  }
  dist::barrier();
  std::cout << c.log.str() << "failures: " << c.failures << std::endl;
  return c.failures == 0 ? 0 : 1;
}

class HalfCollectives : public ::testing::TestWithParam<int> {};

TEST_P(HalfCollectives, MatchClosedFormsAndRoundEveryStep) {
  const int world = GetParam();
  dist::testing::expect_all_ok(dist::testing::run_group(
      world, {.backend = "gloo"}, [&](int r) { return run_half_collectives(r, world); },
      {.deadline = std::chrono::seconds(240)}));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, HalfCollectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
