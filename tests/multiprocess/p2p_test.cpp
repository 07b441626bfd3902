// Asynchronous point to point (dist/process_group.h: isend, irecv, batch_isend_irecv) on real
// processes: neighbours that send to each other at once with messages larger than a socket
// buffer, several messages in flight with tags out of order, a peer that dies, a recv of the
// wrong size failing fast on both ranks, the bytes against closed forms, and 0-element messages.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "dist/dist.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::Tensor;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;
using Clock = std::chrono::steady_clock;

// Message `id`'s n values: id * 1000 + (i mod 997), exact in float32 for the ids used here.
Tensor message(std::int64_t n, int id, dist::DType dtype = dist::kFloat32) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = float(id * 1000 + i % 997);
  return Tensor::from(v).to(dtype);
}

// Whether `got` holds message(n, id); prints the first difference.
bool holds(const Tensor& got, std::int64_t n, int id, const std::string& what) {
  const Tensor want = message(n, id, got.dtype());
  if (got.numel() != n) {
    std::cout << what << ": " << got.numel() << " elements, expected " << n << "\n";
    return false;
  }
  const auto a = got.to(dist::kFloat64).to_vector<double>();
  const auto b = want.to(dist::kFloat64).to_vector<double>();
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      std::cout << what << ": element " << i << " is " << a[i] << ", expected " << b[i] << "\n";
      return false;
    }
  }
  return true;
}

// 2 Mi float32 values, 8 MiB: far beyond a loopback socket's buffer (a few hundred KiB).
constexpr std::int64_t kLarge = std::int64_t{1} << 21;

// ---- Neighbours that send to each other at once ---------------------------------------------

// Each rank isends to the next and irecvs from the previous, then waits for its send first:
// a pipeline's stages trading activations and gradients. With blocking sends (or sends and
// receives queued on one thread) every rank would wait in its send for a receive that the peer
// posts only after its own send: see BlockingSendsThatCrossWaitForEachOther below.
class P2pCrossing : public ::testing::TestWithParam<int> {};

TEST_P(P2pCrossing, IsendThenIrecvBothWaysWithLargeMessagesFinishWithTheData) {
  const int W = GetParam();
  const auto start = Clock::now();
  expect_all_ok(run_group(W, {.timeout = 20s}, [&](int rank) {
    const int next = (rank + 1) % W, prev = (rank + W - 1) % W;
    const Tensor out = message(kLarge, rank);
    Tensor in(kLarge, dist::kFloat32);
    for (int round = 0; round < 2; ++round) {  // twice: the messages' numbers go on matching
      dist::Work sent = dist::isend(out, next, 5);
      dist::Work got = dist::irecv(in, prev, 5);
      sent.wait();
      got.wait();
      if (!holds(in, kLarge, prev, "round " + std::to_string(round))) return 1;
    }
    return 0;
  }));
  EXPECT_LT(Clock::now() - start, 60s);
}

INSTANTIATE_TEST_SUITE_P(P2P, P2pCrossing, ::testing::Values(2, 4));

// The same exchange with blocking send() and recv(): each rank's send waits for the peer's recv,
// which the peer reaches only after its own send. Both wait until the group's timeout.
TEST(P2pCrossing, BlockingSendsThatCrossWaitForEachOtherUntilTheTimeout) {
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 2s},
                           [](int rank) {
                             const Tensor out = message(kLarge, rank);
                             Tensor in(kLarge, dist::kFloat32);
                             try {
                               dist::send(out, 1 - rank, 0);
                               dist::recv(in, 1 - rank, 0);
                             } catch (const dist::TimeoutError& e) {
                               std::cout << "timed out: " << e.what() << "\n";
                               return 0;
                             } catch (const dist::Error& e) {
                               std::cout << "failed: " << e.what()
                                         << "\n";  // the peer timed out first and closed
                               return 0;
                             }
                             std::cout << "no deadlock\n";
                             return 1;
                           },
                           {.deadline = 60s});
  expect_all_ok(results);
  EXPECT_TRUE(contains(results[0].output, "timed out: send to rank 1") ||
              contains(results[1].output, "timed out: send to rank 0"))
      << describe(results);
  EXPECT_LT(Clock::now() - start, 30s);
}

// An isend does not wait for the asynchronous collectives queued before it: rank 0 queues an
// all_reduce, then isends to rank 1, which receives first and only then joins the all_reduce.
// Were the isend queued behind the all_reduce (or made to wait for it), both would wait until
// the timeout.
TEST(P2pCrossing, AnIsendDoesNotWaitForTheCollectivesQueuedBeforeIt) {
  const auto start = Clock::now();
  expect_all_ok(run_group(2, {.timeout = 20s}, [](int rank) {
    Tensor sum = dist::full(3, rank + 1.0);
    if (rank == 0) {
      dist::Work reduced = dist::all_reduce(sum, dist::ReduceOp::SUM, {.async_op = true});
      const Tensor out = message(5, 7);
      dist::Work sent = dist::isend(out, 1, 0);
      sent.wait();
      reduced.wait();
    } else {
      Tensor in(5, dist::kFloat32);
      dist::recv(in, 0, 0);
      if (!holds(in, 5, 7, "the isend")) return 1;
      dist::all_reduce(sum);
    }
    return sum.equal(dist::full(3, 3.0)) ? 0 : 1;
  }));
  EXPECT_LT(Clock::now() - start, 15s);
}

// ---- Several messages in flight ---------------------------------------------------------------

// Ranks 0 and 2 each isend rank 1 tags 1, 2, 3 and tag 4 twice; rank 1 posts its irecvs in
// another order (3, 4, 1, 4, 2, from rank 2 first), then waits for them last to first. Messages
// meet by peer and tag, and two with the same peer and tag in the order they were posted.
TEST(P2pInFlight, SeveralTagsAndPeersOutOfOrderMeetByPeerAndTag) {
  expect_all_ok(run_group(3, {.timeout = 20s}, [](int rank) {
    const std::vector<int> tags = {1, 2, 3, 4, 4};
    // Message of tag t from rank r: id 10 * r + t (+ 5 for the second of tag 4), 3 + t values.
    const auto id = [](int r, std::size_t k, int t) { return 10 * r + t + (k == 4 ? 5 : 0); };
    if (rank != 1) {
      std::vector<Tensor> out;
      for (std::size_t k = 0; k < tags.size(); ++k)
        out.push_back(message(3 + tags[k], id(rank, k, tags[k])));
      std::vector<dist::Work> works;
      for (std::size_t k = 0; k < tags.size(); ++k)
        works.push_back(dist::isend(out[k], 1, tags[k]));
      for (dist::Work& w : works) w.wait();
      return 0;
    }
    const std::vector<std::size_t> order = {2, 3, 0, 4, 1};  // tags 3, 4, 1, 4 (the second), 2
    std::vector<Tensor> in;
    std::vector<std::pair<int, std::size_t>> what;
    for (int src : {2, 0}) {
      for (std::size_t k : order) {
        in.emplace_back(3 + tags[k], dist::kFloat32);
        what.push_back({src, k});
      }
    }
    std::vector<dist::Work> works;
    for (std::size_t i = 0; i < in.size(); ++i) {
      works.push_back(dist::irecv(in[i], what[i].first, tags[what[i].second]));
    }
    bool ok = true;
    for (std::size_t i = in.size(); i-- > 0;) {
      works[i].wait();
      const auto [src, k] = what[i];
      ok &= holds(in[i], 3 + tags[k], id(src, k, tags[k]),
                  "tag " + std::to_string(tags[k]) + " from rank " + std::to_string(src));
    }
    return ok ? 0 : 1;
  }));
}

// batch_isend_irecv on a ring of 4: each rank sends to both neighbours and receives from both,
// all in one batch (the NCCL way of crossing pairs; on Gloo each op is posted as it comes).
TEST(P2pBatch, ARingOfFourTradesWithBothNeighboursInOneBatch) {
  expect_all_ok(run_group(4, {.timeout = 20s}, [](int rank) {
    const int W = 4, next = (rank + 1) % W, prev = (rank + W - 1) % W;
    const Tensor to_next = message(1000, 10 * rank + 1), to_prev = message(700, 10 * rank + 2);
    Tensor from_prev(1000, dist::kFloat32), from_next(700, dist::kFloat32);
    std::vector<dist::Work> works = dist::batch_isend_irecv(
        {dist::P2POp::isend(to_next, next, 1), dist::P2POp::isend(to_prev, prev, 2),
         dist::P2POp::irecv(from_prev, prev, 1), dist::P2POp::irecv(from_next, next, 2)});
    if (works.size() != 4) return 1;
    for (dist::Work& w : works) w.wait();
    const bool ok = holds(from_prev, 1000, 10 * prev + 1, "from prev") &&
                    holds(from_next, 700, 10 * next + 2, "from next");
    return ok ? 0 : 1;
  }));
}

// ---- Failures ---------------------------------------------------------------------------------

// Rank 1 posts an irecv from rank 0 and an isend to it; rank 0 exits without either. Both of rank
// 1's waits fail within seconds (the group's timeout is a minute), naming rank 0.
TEST(P2pFailures, WaitAfterThePeerDiedFailsWithinSecondsNamingIt) {
  const auto start = Clock::now();
  auto results = run_group(2, {.timeout = 60s},
                           [](int rank) {
                             if (rank == 0) {
                               dist::barrier();
                               std::_Exit(0);
                             }
                             Tensor in(4, dist::kFloat32);
                             const Tensor out = message(kLarge, 1);
                             dist::Work got = dist::irecv(in, 0, 7);
                             dist::Work sent = dist::isend(out, 0, 8);
                             dist::barrier();
                             int failed = 0;
                             for (dist::Work* w : {&got, &sent}) {
                               try {
                                 w->wait();
                               } catch (const dist::Error& e) {
                                 std::cout << "failed: " << e.what() << "\n";
                                 ++failed;
                               }
                             }
                             return failed == 2 ? 0 : 1;
                           },
                           {.deadline = 60s});
  EXPECT_LT(Clock::now() - start, 20s);
  EXPECT_EQ(results[1].exit_code, 0) << describe(results);
  const std::string& out = results[1].output;
  EXPECT_TRUE(contains(out,
                       "failed: irecv from rank 0 (tag 7, 4 float32 elements) failed on "
                       "rank 1: rank 0 closed its connection"))
      << describe(results);
  // The isend fails either for the same reason, or because the irecv's failure closed the group.
  EXPECT_TRUE(contains(out,
                       "failed: isend to rank 0 (tag 8, 2097152 float32 elements) failed on "
                       "rank 1"))
      << describe(results);
}

// A recv whose tensor differs from what was sent: the receiver throws, naming both ranks, both
// sizes and dtypes and the tag, and closes the group; the sender fails at once, naming the
// receiver. The group's timeout is a minute: "at once" is well under it.
struct WrongSize {
  bool blocking;
  std::int64_t sent_numel;
  dist::DType sent_dtype;
  std::int64_t expected_numel;
  const char* receiver_says;
  // A message of 0 elements is a header alone: it has gone in full once the receiver has taken
  // the header, before it checks it, so its sender does not fail.
  bool sender_fails = true;
};

// Rank 0 sends c.sent_numel values of c.sent_dtype with tag 3; rank 1 receives c.expected_numel
// float32 values. Each prints its error, and then that its group refuses the next call.
int send_or_recv_the_wrong_size(const WrongSize& c, int rank) {
  try {
    if (rank == 0) {
      const Tensor out = message(c.sent_numel, 0, c.sent_dtype);
      if (c.blocking) {
        dist::send(out, 1, 3);
      } else {
        dist::isend(out, 1, 3).wait();
      }
    } else {
      Tensor in(c.expected_numel, dist::kFloat32);
      if (c.blocking) {
        dist::recv(in, 0, 3);
      } else {
        dist::irecv(in, 0, 3).wait();
      }
    }
  } catch (const dist::Error& e) {
    std::cout << "failed: " << e.what() << "\n";
    try {
      dist::barrier();  // refused at once, naming the first error
    } catch (const dist::Error& again) {
      std::cout << "then: " << again.what() << "\n";
      return 0;
    }
    return 2;
  }
  std::cout << "no error\n";
  return rank == 0 && !c.sender_fails ? 0 : 1;
}

class P2pMismatch : public ::testing::TestWithParam<WrongSize> {};

TEST_P(P2pMismatch, ARecvOfTheWrongSizeFailsFastOnBothRanksNamingBoth) {
  const WrongSize c = GetParam();
  const auto start = Clock::now();
  auto results =
      run_group(2, {.timeout = 60s}, [&](int rank) { return send_or_recv_the_wrong_size(c, rank); },
                {.deadline = 90s});
  EXPECT_LT(Clock::now() - start, 20s);
  expect_all_ok(results);
  EXPECT_TRUE(contains(results[1].output, std::string("failed: ") + c.receiver_says))
      << describe(results);
  EXPECT_TRUE(contains(results[1].output, "(on rank 1)")) << describe(results);
  EXPECT_TRUE(contains(results[1].output,
                       "then: barrier #1 on rank 1: this process group was "
                       "closed after an earlier error (recv from rank 0"))
      << describe(results);
  if (c.sender_fails) {
    const std::string send = c.blocking ? "send" : "isend";
    EXPECT_TRUE(contains(results[0].output, "failed: " + send + " to rank 1 (tag 3, ") &&
                contains(results[0].output, "failed on rank 0: rank 1 closed its connection"))
        << describe(results);
  }
}

INSTANTIATE_TEST_SUITE_P(
    P2P, P2pMismatch,
    ::testing::Values(
        WrongSize{false, 12, dist::kFloat32, 8,
                  "recv from rank 0 (tag 3) expected 8 float32 elements; rank 0 sent 12 float32 "
                  "elements"},
        WrongSize{true, 12, dist::kFloat32, 8,
                  "recv from rank 0 (tag 3) expected 8 float32 elements; rank 0 sent 12 float32 "
                  "elements"},
        WrongSize{false, 8, dist::kFloat64, 8,
                  "recv from rank 0 (tag 3) expected 8 float32 elements; rank 0 sent 8 float64 "
                  "elements"},
        WrongSize{false, 0, dist::kFloat32, 4,
                  "recv from rank 0 (tag 3) expected 4 float32 elements; rank 0 sent 0 float32 "
                  "elements",
                  false}));

// ---- Bytes ------------------------------------------------------------------------------------

// What each message sends: its tensor's bytes in bytes_sent(), and a header of
// ProcessGroup::kP2PHeaderBytes (16) in header_bytes_sent(), on the sender only. Messages of 0
// elements send the header alone and arrive as 0-element tensors.
TEST(P2pBytes, EachMessageSendsItsTensorAndOneHeader) {
  expect_all_ok(run_group(2, {.timeout = 20s}, [](int rank) {
    dist::ProcessGroup& group = dist::default_group();
    const std::int64_t payload0 = group.bytes_sent(), header0 = group.header_bytes_sent();
    // 5 float32, 0 float32, 7 float64 by isend; 3 int32 by send; 0 int64 by batch.
    const std::vector<std::pair<std::int64_t, dist::DType>> sizes = {
        {5, dist::kFloat32}, {0, dist::kFloat32}, {7, dist::kFloat64}};
    bool ok = true;
    if (rank == 0) {
      std::vector<Tensor> out;
      for (const auto& [n, dtype] : sizes) out.push_back(message(n, 1, dtype));
      std::vector<dist::Work> works;
      for (const Tensor& t : out) works.push_back(dist::isend(t, 1, 0));
      for (std::size_t i = 0; i < works.size(); ++i) {
        works[i].wait();
        if (works[i].bytes_sent() != static_cast<std::int64_t>(out[i].nbytes())) {
          std::cout << "isend " << i << ": Work::bytes_sent " << works[i].bytes_sent() << "\n";
          ok = false;
        }
      }
      dist::send(message(3, 2, dist::kInt32), 1, 9);
      const Tensor none(0, dist::kInt64);
      for (dist::Work& w : dist::batch_isend_irecv({dist::P2POp::isend(none, 1, 4)})) w.wait();
    } else {
      for (const auto& [n, dtype] : sizes) {
        Tensor in(n, dtype);
        dist::irecv(in, 0, 0).wait();
        ok &= holds(in, n, 1, "message of " + std::to_string(n));
      }
      Tensor ints(3, dist::kInt32), none(0, dist::kInt64);
      dist::recv(ints, 0, 9);
      ok &= holds(ints, 3, 2, "send of 3 int32");
      dist::Work w = dist::irecv(none, 0, 4);
      w.wait();
      ok &= w.bytes_sent() == 0;
    }
    const std::int64_t payload = group.bytes_sent() - payload0;
    const std::int64_t header = group.header_bytes_sent() - header0;
    const std::int64_t want_payload = rank == 0 ? 4 * 5 + 0 + 8 * 7 + 4 * 3 + 0 : 0;
    const std::int64_t want_header = rank == 0 ? 5 * dist::ProcessGroup::kP2PHeaderBytes : 0;
    if (payload != want_payload || header != want_header) {
      std::cout << "rank " << rank << " sent " << payload << " + " << header << " header bytes, "
                << "expected " << want_payload << " + " << want_header << "\n";
      ok = false;
    }
    return ok ? 0 : 1;
  }));
}

// ---- Arguments --------------------------------------------------------------------------------

// Bad arguments are refused at once with a ConfigError naming what to fix, before any message is
// posted; the group stays usable.
TEST(P2pArguments, BadPeersAndBatchesAreRefusedAndLeaveTheGroupUsable) {
  expect_all_ok(run_group(2, {.timeout = 20s}, [](int rank) {
    Tensor t(4, dist::kFloat32);
    int refused = 0;
    const auto expect_refused = [&](const char* what, const auto& call, const std::string& says) {
      try {
        call();
        std::cout << what << ": not refused\n";
      } catch (const dist::ConfigError& e) {
        if (contains(e.what(), says)) {
          ++refused;
        } else {
          std::cout << what << ": " << e.what() << "\n";
        }
      }
    };
    expect_refused(
        "to itself", [&] { (void)dist::isend(t, rank, 0); }, "is this rank itself");
    expect_refused(
        "out of range", [&] { (void)dist::irecv(t, 2, 0); },
        "src rank 2 is out of range for world_size 2");
    expect_refused(
        "empty batch", [&] { (void)dist::batch_isend_irecv({}); }, "list is empty");
    expect_refused(
        "no tensor", [&] { (void)dist::batch_isend_irecv({dist::P2POp{}}); }, "has no tensor");
    // A batch with one bad op posts none of its good ones.
    expect_refused(
        "one bad op",
        [&] {
          (void)dist::batch_isend_irecv(
              {dist::P2POp::isend(t, 1 - rank, 0), dist::P2POp::irecv(t, -1, 0)});
        },
        "src rank -1 is out of range");
    // Still usable, and the refused isend above left no message behind: this is the first.
    Tensor got(1, dist::kFloat32);
    const Tensor mine = message(1, rank);
    std::vector<dist::Work> works = dist::batch_isend_irecv(
        {dist::P2POp::isend(mine, 1 - rank, 0), dist::P2POp::irecv(got, 1 - rank, 0)});
    for (dist::Work& w : works) w.wait();
    return refused == 5 && holds(got, 1, 1 - rank, "after the refusals") ? 0 : 1;
  }));
}

}  // namespace
