// The flat collectives (all_gather_into_tensor, reduce_scatter_tensor) and the traffic counters
// (bytes_sent, header_bytes_sent), on real processes over loopback with Gloo.
//   * Every dtype and reduce op, at world sizes 1, 2, 3, 4 and 8, against closed forms, for parts
//     of 0, 1, 7 and W-1 elements and one of three 64 KiB ring chunks and 3 elements more (over
//     128 KiB in every dtype); synchronous and async_op.
//   * reduce_scatter_tensor then all_gather_into_tensor gives all_reduce's bits at 2 ranks at
//     every size, random floats; at 3 and 4 ranks where the ring's segments are the flat parts,
//     and not on a small all_reduce, whose sum runs in rank order.
//   * bytes_sent per call equals the closed forms of each algorithm.
//   * Bad arguments are refused on every rank with an error naming the sizes, and the group goes
//     on; ranks that disagree on the size stop, naming each rank's call.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "closed_forms.h"
#include "dist/dist.h"
#include "dist/flight_recorder.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::DType;
using dist::ReduceOp;
using dist::Tensor;
using dist::testing::Checker;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::input_for;
using dist::testing::make;
using dist::testing::ops_for;
using dist::testing::reduced;
using dist::testing::run_group;

constexpr std::int64_t kRingChunkBytes = 64 * 1024;  // MeshCollectives::kChunk
// The largest float32 all_reduce that takes the one-exchange path: its 24-byte header and the
// tensor fit in MeshCollectives::kMaxPiece = 128 KiB + 64 bytes.
constexpr std::int64_t kSmallAllReduce = (128 * 1024 + 64 - 24) / 4;
static_assert(kSmallAllReduce == 32778);

Tensor filled(std::int64_t n, DType dtype, double value) {
  return make(n, dtype, [&](std::int64_t) { return value; });
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.numel() == b.numel() && a.dtype() == b.dtype() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// ---- Against closed forms -----------------------------------------------------------------------

void check_all_gather_into_tensor(Checker& c, int W, DType dtype, std::int64_t n, bool async) {
  dist::ProcessGroup& group = dist::default_group();
  const auto value = [](std::int64_t r, std::int64_t i) {
    return static_cast<double>(r * 100 + i % 13);
  };
  const Tensor input = make(n, dtype, [&](std::int64_t i) { return value(c.rank, i); });
  Tensor output = filled(n * W, dtype, -1);  // every element must be written
  if (async) {
    dist::Work work = group.all_gather_into_tensor(output, input, {.async_op = true});
    work.wait();
  } else {
    group.all_gather_into_tensor(output, input);
  }
  const std::string what = std::string("all_gather_into_tensor") + (async ? " (async)" : "");
  c.expect_all(what, output, n * W, dtype, [&](std::int64_t i) { return value(i / n, i % n); });
  c.expect_all(what + "'s input", input, n, dtype,
               [&](std::int64_t i) { return value(c.rank, i); });
}

// Rank r's part j holds at i what rank r holds at i + j for all_reduce, so rank j gets
// all_reduce's closed form at i + j (as collectives_test.cpp checks the list form).
void check_reduce_scatter_tensor(Checker& c, int W, DType dtype, std::int64_t n, bool async) {
  dist::ProcessGroup& group = dist::default_group();
  for (ReduceOp op : ops_for(dtype)) {
    const auto value = [&](std::int64_t k) { return input_for(op, c.rank, k % n + k / n); };
    const Tensor input = make(n * W, dtype, value);
    Tensor output = filled(n, dtype, -1);
    if (async) {
      dist::Work work = group.reduce_scatter_tensor(output, input, op, {.async_op = true});
      work.wait();
    } else {
      group.reduce_scatter_tensor(output, input, op);
    }
    const std::string what = std::string("reduce_scatter_tensor ") + dist::reduce_op_name(op) +
                             (async ? " (async)" : "");
    c.expect_all(what, output, n, dtype,
                 [&](std::int64_t i) { return reduced(op, W, i + c.rank); });
    c.expect_all(what + "'s input (only read)", input, n * W, dtype, value);
  }
}

int run_flat_collectives(int rank, int world) {
  Checker c{rank};
  for (DType dtype : {dist::kFloat32, dist::kFloat64, dist::kInt32, dist::kInt64}) {
    const auto element = static_cast<std::int64_t>(dist::element_size(dtype));
    const std::int64_t chunks = 3 * kRingChunkBytes / element + 3;
    for (std::int64_t n :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{7}, std::int64_t{world - 1}, chunks}) {
      for (bool async : {false, true}) {
        check_all_gather_into_tensor(c, world, dtype, n, async);
        check_reduce_scatter_tensor(c, world, dtype, n, async);
      }
    }
  }
  dist::barrier();
  std::cout << c.log.str() << "failures: " << c.failures << std::endl;
  return c.failures == 0 ? 0 : 1;
}

class FlatCollectives : public ::testing::TestWithParam<int> {};

TEST_P(FlatCollectives, MatchTheirClosedFormsForEveryDtypeOpAndSize) {
  const int world = GetParam();
  dist::testing::expect_all_ok(run_group(world, {.backend = "gloo"},
                                         [&](int r) { return run_flat_collectives(r, world); },
                                         {.deadline = 240s}));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, FlatCollectives, ::testing::Values(1, 2, 3, 4, 8),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

// ---- Against all_reduce, bit for bit ------------------------------------------------------------

// Random float32 values of many magnitudes, different on every rank: sums that round.
Tensor random_floats(std::int64_t n, int rank, std::int64_t salt) {
  std::mt19937 gen(static_cast<std::uint32_t>(1000 * salt + rank));
  std::uniform_real_distribution<float> mantissa(-1, 1);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = std::ldexp(mantissa(gen), exponent(gen));
  return Tensor::from(v);
}

// all_reduce(x) and reduce_scatter_tensor(x) then all_gather_into_tensor: the same bits?
bool flat_ring_matches_all_reduce(const Tensor& x) {
  dist::ProcessGroup& group = dist::default_group();
  const int W = group.size();
  Tensor reduced_all = x;
  group.all_reduce(reduced_all, ReduceOp::SUM);
  Tensor part(x.numel() / W, x.dtype());
  group.reduce_scatter_tensor(part, x);
  Tensor gathered(x.numel(), x.dtype());
  group.all_gather_into_tensor(gathered, part);
  return same_bits(gathered, reduced_all);
}

TEST(FlatRing, IsAllReduceBitForBitAtTwoRanksAtEverySize) {
  // Parts of 1 and 3 values; 16,389 (all_reduce of 32,778: its one-exchange path), 16,390 (32,780:
  // the ring), and 50,001 (several chunks).
  dist::testing::expect_all_ok(run_group(2, {.backend = "gloo"}, [](int rank) {
    int failures = 0;
    for (std::int64_t part : {1, 3, 16389, 16390, 50001}) {
      const Tensor x = random_floats(2 * part, rank, part);
      if (!flat_ring_matches_all_reduce(x)) {
        ++failures;
        std::cout << "rank " << rank << ": parts of " << part << " differ from all_reduce\n";
      }
    }
    return failures == 0 ? 0 : 1;
  }));
}

TEST(FlatRing, IsAllReduceBitForBitFromThreeRanksOnlyWhereAllReduceTakesTheSameRing) {
  for (int world : {3, 4}) {
    dist::testing::expect_all_ok(run_group(world, {.backend = "gloo"}, [world](int rank) {
      int failures = 0;
      // Over 32,778 values and a multiple of W: the ring's segment s is the flat part s.
      const Tensor x = random_floats(12000 * world, rank, world);
      if (!flat_ring_matches_all_reduce(x)) {
        ++failures;
        std::cout << "rank " << rank << ": the ring's segments differ from all_reduce's\n";
      }
      // A small all_reduce sums in rank order: (1e8 + -1e8) + 1 = 1. The ring sums segment 0 from
      // rank 1 on: (-1e8 + 1) + 1e8 = 0 in float32, as 1 is lost next to 1e8.
      const float mine = rank == 0 ? 1e8f : rank == 1 ? -1e8f : rank == 2 ? 1.0f : 0.0f;
      Tensor sum = dist::full(world, mine);
      dist::all_reduce(sum);
      Tensor part(1, dist::kFloat32);
      dist::default_group().reduce_scatter_tensor(part, dist::full(world, mine));
      Tensor gathered(world, dist::kFloat32);
      dist::default_group().all_gather_into_tensor(gathered, part);
      if (sum.item(0) != 1.0 || gathered.item(0) != 0.0) {
        ++failures;
        std::cout << "rank " << rank << ": all_reduce gave " << sum.item(0) << " (1 expected), "
                  << "the flat ring " << gathered.item(0) << " (0 expected)\n";
      }
      return failures == 0 ? 0 : 1;
    }));
  }
}

// ---- bytes_sent ---------------------------------------------------------------------------------

struct Sent {
  std::int64_t payload, header;
  bool operator==(const Sent&) const = default;
};

// What `call` adds to this rank's counters.
Sent sent_by(const std::function<void()>& call) {
  const dist::ProcessGroup& group = dist::default_group();
  const Sent before{group.bytes_sent(), group.header_bytes_sent()};
  call();
  return {group.bytes_sent() - before.payload, group.header_bytes_sent() - before.header};
}

// Element count of the ring's segment s of an n-element all_reduce (gloo_mesh.h).
std::int64_t segment(std::int64_t n, int s, int W) {
  return n * ((s % W) + 1) / W - n * (s % W) / W;
}

std::int64_t ceil_log2(int W) {
  std::int64_t d = 0;
  while ((std::int64_t{1} << d) < W) ++d;
  return d;
}

int run_bytes_sent(int rank, int W) {
  int failures = 0;
  const auto expect = [&](const std::string& what, Sent got, Sent want) {
    if (got == want) return;
    ++failures;
    std::cout << "rank " << rank << " " << what << ": sent " << got.payload << " bytes and "
              << got.header << " of headers, expected " << want.payload << " and " << want.header
              << "\n";
  };
  const std::int64_t peers = W - 1, headers = 24 * peers;
  dist::ProcessGroup& group = dist::default_group();

  // all_reduce: one exchange up to 32,778 float32 values, the ring from 32,779 on.
  for (std::int64_t n : {std::int64_t{1}, kSmallAllReduce}) {
    Tensor t = dist::zeros(n);
    expect("all_reduce of " + std::to_string(n), sent_by([&] { dist::all_reduce(t); }),
           {4 * n * peers, headers});
  }
  for (std::int64_t n : {kSmallAllReduce + 1, std::int64_t{100003}}) {
    Tensor t = dist::zeros(n);
    const std::int64_t ring = 4 * (2 * n - segment(n, rank, W) - segment(n, rank + 1, W));
    expect("all_reduce of " + std::to_string(n), sent_by([&] { dist::all_reduce(t); }),
           {ring, headers});
    Tensor d(n, dist::kFloat64);  // 8-byte elements: the same ring, twice the bytes
    expect("all_reduce of " + std::to_string(n) + " float64", sent_by([&] { dist::all_reduce(d); }),
           {2 * ring, headers});
  }
  // The async form counts the same, on the communication thread.
  Tensor a = dist::zeros(1000);
  expect("async all_reduce",
         sent_by([&] { dist::all_reduce(a, ReduceOp::SUM, {.async_op = true}).wait(); }),
         {4000 * peers, headers});

  // reduce_scatter and all_gather, flat or not: the part, once to each peer's segment.
  for (std::int64_t c : {std::int64_t{1}, 3 * kRingChunkBytes / 4 + 3}) {
    const std::string of = " of " + std::to_string(c);
    Tensor part(c, dist::kFloat32), whole(c * W, dist::kFloat32);
    expect("reduce_scatter_tensor" + of, sent_by([&] { group.reduce_scatter_tensor(part, whole); }),
           {4 * c * peers, headers});
    expect("all_gather_into_tensor" + of,
           sent_by([&] { group.all_gather_into_tensor(whole, part); }), {4 * c * peers, headers});
    std::vector<Tensor> list(static_cast<std::size_t>(W), Tensor(c, dist::kFloat32));
    expect("reduce_scatter" + of, sent_by([&] { dist::reduce_scatter(part, list); }),
           {4 * c * peers, headers});
    expect("all_gather" + of, sent_by([&] { dist::all_gather(list, part); }),
           {4 * c * peers, headers});
  }

  // broadcast: gloo's binomial tree. The source sends once per step, ceil(log2 W) times; ranks in
  // the upper half of the tree (counted from the source) send nothing; all ranks together send
  // the tensor W-1 times, which rank 0 checks below.
  const std::int64_t n = 1001;
  for (int src : {0, W - 1}) {
    Tensor t = dist::zeros(n);
    const Sent got = sent_by([&] { dist::broadcast(t, src); });
    const int v = (rank - src + W) % W;
    const std::string what = "broadcast from " + std::to_string(src);
    if (v == 0) expect(what + " (the source)", got, {4 * n * ceil_log2(W), 0});
    if (2 * v >= (std::int64_t{1} << ceil_log2(W))) expect(what + " (a leaf)", got, {0, 0});
    Tensor total = dist::full(1, static_cast<double>(got.payload));
    dist::all_reduce(total);
    if (total.item(0) != static_cast<double>(4 * n * peers)) {
      ++failures;
      std::cout << "rank " << rank << " " << what << ": the ranks sent " << total.item(0)
                << " bytes in all, expected " << 4 * n * peers << "\n";
    }
  }

  // gather: every rank but the destination sends its tensor; scatter: the source sends W-1.
  Tensor mine = dist::zeros(n);
  std::vector<Tensor> all;
  expect("gather", sent_by([&] { dist::gather(mine, rank == 0 ? &all : nullptr, 0); }),
         {rank == 0 ? 0 : 4 * n, 0});
  std::vector<Tensor> pieces(static_cast<std::size_t>(W), dist::zeros(n));
  expect("scatter", sent_by([&] { dist::scatter(mine, rank == 0 ? &pieces : nullptr, 0); }),
         {rank == 0 ? 4 * n * peers : 0, 0});
  if (W > 1) {  // send: the tensor and its header (p2p_test.cpp); recv: nothing
    const Sent got = sent_by([&] {
      if (rank == 0) dist::send(mine, 1, 7);
      if (rank == 1) dist::recv(mine, 0, 7);
    });
    expect("send/recv", got,
           {rank == 0 ? 4 * n : 0, rank == 0 ? dist::ProcessGroup::kP2PHeaderBytes : 0});
  }

  // Synchronising only: a barrier, and calls on 0 elements.
  Tensor empty = dist::zeros(0);
  expect("barrier", sent_by([] { dist::barrier(); }), {0, 0});
  expect("all_reduce of 0", sent_by([&] { dist::all_reduce(empty); }), {0, 0});
  expect("reduce_scatter_tensor of 0", sent_by([&] { group.reduce_scatter_tensor(empty, empty); }),
         {0, 0});
  std::cout << "failures: " << failures << std::endl;
  return failures == 0 ? 0 : 1;
}

class BytesSent : public ::testing::TestWithParam<int> {};

TEST_P(BytesSent, EqualsEachAlgorithmsClosedForm) {
  const int world = GetParam();
  dist::testing::expect_all_ok(run_group(world, {.backend = "gloo"},
                                         [&](int r) { return run_bytes_sent(r, world); },
                                         {.deadline = 120s}));
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, BytesSent, ::testing::Values(1, 2, 3, 4),
                         [](const auto& p) { return "world" + std::to_string(p.param); });

TEST(BytesSent, AGroupCountsItsOwnCallsOnly) {
  dist::testing::expect_all_ok(run_group(2, {.backend = "gloo"}, [](int rank) {
    auto other = dist::new_group();
    const std::int64_t before = dist::default_group().bytes_sent();
    Tensor t = dist::zeros(10);
    other->all_reduce(t, ReduceOp::SUM);
    const bool ok = other->bytes_sent() == 40 && dist::default_group().bytes_sent() == before;
    std::cout << "rank " << rank << ": the new group sent " << other->bytes_sent()
              << ", the default group " << dist::default_group().bytes_sent() - before << "\n";
    return ok ? 0 : 1;
  }));
}

// ---- The flight recorder ------------------------------------------------------------------------

TEST(FlatFlightRecord, NamesEachFlatCallWithItsPartAndState) {
  const std::string dir = ::testing::TempDir() + "/flat_flight_" + std::to_string(getpid());
  auto results =
      run_group(2, {.backend = "gloo"},
                [](int rank) {
                  Tensor part(3, dist::kFloat32), whole(6, dist::kFloat32);
                  dist::default_group().all_gather_into_tensor(whole, part);
                  dist::default_group().reduce_scatter_tensor(part, whole, ReduceOp::MAX);
                  if (!dist::flight::dump("test")) return 1;
                  std::ifstream file(dist::flight::dump_path());
                  std::cout << "rank " << rank << " wrote " << file.rdbuf() << "\n";
                  return 0;
                },
                {.env = {{"DIST_TRACE_DIR", dir}}});
  std::filesystem::remove_all(dir);
  dist::testing::expect_all_ok(results);
  for (const auto& r : results) {
    // One entry per call, in order: its name, reduce op, the part's numel and bytes, completed.
    const std::size_t gather = r.output.find("\"op\": \"all_gather_into_tensor\"");
    const std::size_t scatter = r.output.find("\"op\": \"reduce_scatter_tensor\"");
    ASSERT_TRUE(gather != std::string::npos && scatter != std::string::npos && gather < scatter)
        << r.output;
    const std::string entry = r.output.substr(scatter, r.output.find('}', scatter) - scatter);
    EXPECT_TRUE(contains(entry, "\"reduce_op\": \"MAX\"") && contains(entry, "\"numel\": 3") &&
                contains(entry, "\"bytes\": 12") && contains(entry, "\"state\": \"completed\""))
        << entry;
  }
}

// ---- Bad arguments ------------------------------------------------------------------------------

TEST(FlatBadArguments, AreRefusedOnEveryRankNamingTheSizesAndTheGroupGoesOn) {
  auto results = run_group(2, {.backend = "gloo", .timeout = 20s}, [](int rank) {
    dist::ProcessGroup& group = dist::default_group();
    Tensor three(3, dist::kFloat32), five(5, dist::kFloat32), six(6, dist::kFloat32);
    Tensor six_ints(6, dist::kInt32), none(0, dist::kFloat32);
    int refused = 0;
    for (const auto& call : std::vector<std::function<void()>>{
             [&] { group.all_gather_into_tensor(five, three); },
             [&] { group.reduce_scatter_tensor(three, five); },
             [&] { group.all_gather_into_tensor(six_ints, three); },
             [&] { group.reduce_scatter_tensor(three, six, ReduceOp::BAND); },
             [&] { group.all_gather_into_tensor(three, none); },
             [&] {
               static_cast<void>(
                   group.reduce_scatter_tensor(three, five, ReduceOp::SUM, {.async_op = true}));
             }}) {
      try {
        call();
      } catch (const dist::ConfigError& e) {
        std::cout << e.what() << "\n";
        ++refused;
      }
    }
    // Still usable: a good call, and 0 elements (a barrier).
    group.all_gather_into_tensor(six, dist::full(3, rank + 1.0));
    group.reduce_scatter_tensor(none, none);
    std::cout << "refused " << refused << ", then gathered " << six.item(0) << " " << six.item(5)
              << "\n";
    return 0;
  });
  dist::testing::expect_all_ok(results);
  for (const auto& r : results) {
    const std::string& out = r.output;
    EXPECT_TRUE(contains(out, "refused 6, then gathered 1 2")) << describe(results);
    EXPECT_TRUE(contains(out,
                         "all_gather_into_tensor needs an output of world_size x the input's "
                         "elements: the output has 5 elements and the input 3, but world_size is "
                         "2 (2 x 3 = 6)"))
        << out;
    EXPECT_TRUE(contains(out,
                         "reduce_scatter_tensor needs an input of world_size x the output's "
                         "elements: the input has 5 elements and the output 3, but world_size is "
                         "2 (2 x 3 = 6)"))
        << out;
    EXPECT_TRUE(contains(out,
                         "all_gather_into_tensor: the output (torch.int32, 6 elements) and the "
                         "input (torch.float32, 3 elements) must have the same dtype and device"))
        << out;
    EXPECT_TRUE(contains(out, "ReduceOp::BAND needs an integer tensor")) << out;
    EXPECT_TRUE(contains(out, "the output has 3 elements and the input 0")) << out;
  }
}

TEST(FlatBadArguments, RanksThatDisagreeOnTheSizeStopNamingEachCall) {
  for (const bool gather : {true, false}) {
    const auto start = std::chrono::steady_clock::now();
    auto results = run_group(2, {.backend = "gloo", .timeout = 20s},
                             [&](int rank) {
                               dist::ProcessGroup& group = dist::default_group();
                               const std::int64_t n = rank == 0 ? 5 : 6;
                               Tensor part(n, dist::kFloat32), whole(2 * n, dist::kFloat32);
                               if (gather) {
                                 group.all_gather_into_tensor(whole, part);
                               } else {
                                 group.reduce_scatter_tensor(part, whole);
                               }
                               return 0;
                             },
                             {.deadline = 60s});
    EXPECT_LT(std::chrono::steady_clock::now() - start, 15s) << "found by the headers, no timeout";
    const std::string op = gather ? "" : ", SUM";
    for (const auto& r : results) {
      EXPECT_EQ(r.exit_code, 1) << describe(results);
      EXPECT_TRUE(
          contains(r.output, gather ? "all_gather_into_tensor #1" : "reduce_scatter_tensor #1") &&
          contains(r.output, "rank 0: collective #1, 5 elements, torch.float32" + op) &&
          contains(r.output, "rank 1: collective #1, 6 elements, torch.float32" + op))
          << describe(results);
    }
  }
}

TEST(FlatBadArguments, DebugDetailTellsTheFlatFormFromTheListForm) {
  auto results = run_group(2, {.backend = "gloo", .timeout = 20s},
                           [](int rank) {
                             Tensor part(4, dist::kFloat32);
                             if (rank == 0) {
                               Tensor whole(8, dist::kFloat32);
                               dist::default_group().all_gather_into_tensor(whole, part);
                             } else {
                               std::vector<Tensor> list;
                               dist::all_gather(list, part);
                             }
                             return 0;
                           },
                           {.env = {{"DIST_DEBUG", "DETAIL"}}, .deadline = 60s});
  for (const auto& r : results) {
    EXPECT_EQ(r.exit_code, 1) << describe(results);
    EXPECT_TRUE(
        contains(r.output, "rank 0: all_gather_into_tensor(torch.float32, 4 elements, cpu)") &&
        contains(r.output, "rank 1: all_gather(torch.float32, 4 elements, cpu)"))
        << describe(results);
  }
}

}  // namespace
