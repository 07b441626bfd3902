// Every collective x dtype x reduce op, at world sizes 1, 2, 3, 4 and 8, on real processes over
// loopback, each result compared with its closed form. Sizes: 0, 1 and 7 elements, three of Gloo's
// 64 KiB ring chunks and 3 elements more (the ring's last chunk is a short one), and a large size
// of 16 MiB: the per-rank tensor for all_reduce, broadcast and send/recv, and the whole gathered
// or scattered buffer for all_gather, gather, scatter and reduce_scatter.
#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
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

constexpr std::int64_t kLargeBytes = 16 * 1024 * 1024;
// The ring (all_reduce beyond 128 KiB, and reduce_scatter at every size) moves 64 KiB at a time
// (MeshCollectives::kChunk in the Gloo backend).
constexpr std::int64_t kRingChunkBytes = 64 * 1024;

void check_all_reduce(Checker& c, int W, DType dtype, std::int64_t n) {
  for (ReduceOp op : ops_for(dtype)) {
    Tensor t = make(n, dtype, [&](std::int64_t i) { return input_for(op, c.rank, i); });
    dist::all_reduce(t, op);
    c.expect_all(std::string("all_reduce ") + dist::reduce_op_name(op), t, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i); });
  }
}

void check_broadcast(Checker& c, int W, DType dtype, std::int64_t n) {
  const int src = W - 1;
  Tensor t =
      make(n, dtype, [&](std::int64_t i) { return c.rank * 1000.0 + static_cast<double>(i % 11); });
  dist::broadcast(t, src);
  c.expect_all("broadcast", t, n, dtype,
               [&](std::int64_t i) { return src * 1000.0 + static_cast<double>(i % 11); });
}

void check_all_gather(Checker& c, int W, DType dtype, std::int64_t n) {
  Tensor mine =
      make(n, dtype, [&](std::int64_t i) { return c.rank * 100.0 + static_cast<double>(i % 13); });
  std::vector<Tensor> all;
  dist::all_gather(all, mine);
  if (static_cast<int>(all.size()) != W) {
    ++c.failures;
    c.log << "all_gather returned " << all.size() << " tensors\n";
    return;
  }
  for (int j = 0; j < W; ++j) {
    c.expect_all("all_gather[" + std::to_string(j) + "]", all[static_cast<std::size_t>(j)], n,
                 dtype, [&](std::int64_t i) { return j * 100.0 + static_cast<double>(i % 13); });
  }
  // Again into the same list, now of the right sizes (filled in place), with this rank's own
  // entry as the input: every entry must hold the new values.
  Tensor& own = all[static_cast<std::size_t>(c.rank)];
  own = make(n, dtype, [&](std::int64_t i) { return c.rank * 100.0 + static_cast<double>(i % 7); });
  dist::all_gather(all, own);
  for (int j = 0; j < W; ++j) {
    c.expect_all("all_gather again[" + std::to_string(j) + "]", all[static_cast<std::size_t>(j)], n,
                 dtype, [&](std::int64_t i) { return j * 100.0 + static_cast<double>(i % 7); });
  }
}

void check_reduce_scatter(Checker& c, int W, DType dtype, std::int64_t n) {
  std::vector<Tensor> inputs;
  for (int j = 0; j < W; ++j) {
    inputs.push_back(make(
        n, dtype, [&](std::int64_t i) { return c.rank + j * 10.0 + static_cast<double>(i % 3); }));
  }
  Tensor out(n, dtype);
  dist::reduce_scatter(out, inputs, ReduceOp::SUM);
  c.expect_all("reduce_scatter", out, n, dtype, [&](std::int64_t i) {
    return W * (W - 1) / 2.0 + W * (c.rank * 10.0 + static_cast<double>(i % 3));
  });
  for (int j = 0; j < W; ++j) {  // the inputs are only read
    c.expect_all("reduce_scatter's input " + std::to_string(j), inputs[static_cast<std::size_t>(j)],
                 n, dtype,
                 [&](std::int64_t i) { return c.rank + j * 10.0 + static_cast<double>(i % 3); });
  }
  // Every op, with all_reduce's inputs shifted by the piece: rank r's piece j holds at i what
  // rank r holds at i + j for all_reduce, so rank j gets all_reduce's closed form at i + j.
  for (ReduceOp op : ops_for(dtype)) {
    std::vector<Tensor> pieces;
    for (int j = 0; j < W; ++j) {
      pieces.push_back(
          make(n, dtype, [&](std::int64_t i) { return input_for(op, c.rank, i + j); }));
    }
    dist::reduce_scatter(out, pieces, op);
    c.expect_all(std::string("reduce_scatter ") + dist::reduce_op_name(op), out, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i + c.rank); });
  }
}

void check_gather_scatter(Checker& c, int W, DType dtype, std::int64_t n) {
  Tensor mine =
      make(n, dtype, [&](std::int64_t i) { return c.rank * 10.0 + static_cast<double>(i % 9); });
  std::vector<Tensor> gathered;
  dist::gather(mine, c.rank == 0 ? &gathered : nullptr, 0);
  if (c.rank == 0) {
    for (int j = 0; j < W; ++j) {
      c.expect_all("gather[" + std::to_string(j) + "]", gathered[static_cast<std::size_t>(j)], n,
                   dtype, [&](std::int64_t i) { return j * 10.0 + static_cast<double>(i % 9); });
    }
  }
  const int src = W - 1;
  std::vector<Tensor> pieces;
  for (int j = 0; j < W; ++j) {
    pieces.push_back(
        make(n, dtype, [&](std::int64_t i) { return j * 3.0 + static_cast<double>(i % 4); }));
  }
  Tensor out(n, dtype);
  dist::scatter(out, c.rank == src ? &pieces : nullptr, src);
  c.expect_all("scatter", out, n, dtype,
               [&](std::int64_t i) { return c.rank * 3.0 + static_cast<double>(i % 4); });
}

// Rank 0 sends to every other rank (tag = its rank), then each answers rank 0 (tag 100 + rank).
void check_send_recv(Checker& c, int W, DType dtype, std::int64_t n) {
  auto payload = [](int r) {
    return [r](std::int64_t i) { return r * 7.0 + static_cast<double>(i % 5); };
  };
  if (c.rank == 0) {
    for (int r = 1; r < W; ++r) dist::send(make(n, dtype, payload(r)), r, r);
    for (int r = 1; r < W; ++r) {
      Tensor back(n, dtype);
      dist::recv(back, r, 100 + r);
      c.expect_all("recv from " + std::to_string(r), back, n, dtype, payload(100 + r));
    }
  } else {
    Tensor got(n, dtype);
    dist::recv(got, 0, c.rank);
    c.expect_all("recv from 0", got, n, dtype, payload(c.rank));
    dist::send(make(n, dtype, payload(100 + c.rank)), 0, 100 + c.rank);
  }
}

int run_every_collective(int rank, int world) {
  Checker c{rank};
  for (DType dtype : {dist::kFloat32, dist::kFloat64, dist::kInt32, dist::kInt64}) {
    const auto element = static_cast<std::int64_t>(dist::element_size(dtype));
    const std::int64_t chunks = 3 * kRingChunkBytes / element + 3;
    const std::int64_t large = kLargeBytes / element;
    for (std::int64_t n : {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, chunks, large}) {
      check_all_reduce(c, world, dtype, n);
      check_broadcast(c, world, dtype, n);
      check_send_recv(c, world, dtype, n);
      // For the list collectives the large size is the whole buffer, split across the ranks.
      const std::int64_t piece = n == large ? large / world : n;
      check_all_gather(c, world, dtype, piece);
      check_reduce_scatter(c, world, dtype, piece);
      check_gather_scatter(c, world, dtype, piece);
    }
  }
  dist::barrier();
  std::cout << c.log.str() << "failures: " << c.failures << std::endl;
  return c.failures == 0 ? 0 : 1;
}

class EveryCollective : public ::testing::TestWithParam<int> {};

TEST_P(EveryCollective, MatchesItsClosedFormForEveryDtypeOpAndSize) {
  const int world = GetParam();
  dist::testing::expect_all_ok(dist::testing::run_group(
      world, {.backend = "gloo"}, [&](int r) { return run_every_collective(r, world); },
      {.deadline = std::chrono::seconds(240)}));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, EveryCollective, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

}  // namespace
