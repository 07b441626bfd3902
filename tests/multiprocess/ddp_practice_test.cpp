// dist::DistributedDataParallel in practice (chapter 13), on real processes: parameters that get
// no gradient (find_unused_parameters, mark_unused, static_graph, the next step's error) and
// uneven inputs (dist::Join, and the timeout without it), against closed forms. The same
// against torch 1.13: tests/parity/ddp_practice_parity.py.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "dist/ddp.h"
#include "dist/dist.h"
#include "dist/join.h"
#include "dist/optim.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// Three heads of one value each (Linear(1, 1): weight and bias), named a, b, c.
struct Heads {
  dist::Linear a{1, 1, {{1}, {0}}}, b{1, 1, {{1}, {0}}}, c{1, 1, {{1}, {0}}};
  Heads() {
    const char* names[] = {"a", "b", "c"};
    int i = 0;
    for (dist::Linear* l : {&a, &b, &c}) {
      for (dist::Parameter* p : l->parameters()) p->name = std::string(names[i]) + "." + p->name;
      ++i;
    }
  }
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> all;
    for (dist::Linear* l : {&a, &b, &c}) {
      for (dist::Parameter* p : l->parameters()) all.push_back(p);
    }
    return all;
  }
};

void set_grads(dist::Linear& l, double value) {
  for (dist::Parameter* p : l.parameters()) p->grad.fill_(value);
}

// Rank r's forward uses head a (gradient r + 1) and, on rank 1 only, head b (gradient 10); no
// rank uses c. Before the step every grad holds 100 + r (no zero_grad()). An unused parameter
// adds the grad it holds, as torch 1.13 does for a .grad that is defined: b = (100 + 10 + 102)
// / 3 on every rank; a = mean of r + 1 = 2; c, which no rank used, keeps 100 + r, as torch
// leaves the grad of a parameter that no rank used (tests/parity/ddp_unused.py stale).
TEST(DdpUnused, UnusedParametersAddTheGradTheyHoldAndAGradNoRankComputedIsLeftAlone) {
  for (const bool overlap : {false, true}) {
    for (const bool mark : {false, true}) {
      auto results = run_group(3, {.timeout = 30s}, [&](int rank) {
        Heads m;
        dist::DistributedDataParallel ddp(m.parameters(),
                                          {.overlap = overlap, .find_unused_parameters = true});
        for (dist::Parameter* p : m.parameters()) p->grad.fill_(100 + rank);
        std::vector<dist::Parameter*> unused = m.c.parameters();
        if (rank != 1) {
          for (dist::Parameter* p : m.b.parameters()) unused.push_back(p);
        }
        if (mark) ddp.mark_unused(unused);  // what the forward left out, before backward
        if (rank == 1) {
          set_grads(m.b, 10);
          ddp.grads_ready(m.b.parameters());
        }
        set_grads(m.a, rank + 1);
        ddp.grads_ready(m.a.parameters());
        ddp.finish_gradient_sync();  // finds the rest unused, without `mark`
        const double w = 3;
        const bool ok =
            m.a.weight().grad.item(0) == (w + 1) / 2 && m.a.bias().grad.item(0) == (w + 1) / 2 &&
            std::abs(m.b.weight().grad.item(0) - 212 / w) < 1e-5 &&
            m.c.weight().grad.item(0) == 100 + rank && m.c.bias().grad.item(0) == 100 + rank;
        std::printf("a %g b %g c %g\n", m.a.weight().grad.item(0), m.b.weight().grad.item(0),
                    m.c.weight().grad.item(0));
        return ok ? 0 : 1;
      });
      expect_all_ok(results);
      if (HasFailure()) {
        ADD_FAILURE() << "overlap " << overlap << ", mark_unused " << mark;
        return;
      }
    }
  }
}

// Without find_unused_parameters a step that leaves a parameter out ends with this rank's own
// gradients (its bucket never left), and the next step throws torch's error naming it, on
// every rank: nothing waits.
TEST(DdpUnused, WithoutFindUnusedTheNextStepFailsNamingTheParameters) {
  auto results = run_group(2, {.timeout = 30s}, [&](int rank) {
    Heads m;
    dist::DistributedDataParallel ddp(m.parameters());
    set_grads(m.a, rank + 1);
    ddp.grads_ready(m.a.parameters());
    ddp.finish_gradient_sync();
    const bool own = m.a.weight().grad.item(0) == rank + 1;
    std::string next;
    try {
      ddp.average_gradients();
    } catch (const dist::Error& e) {
      next = e.what();
    }
    std::printf("%s\n", next.c_str());
    const std::string r = std::to_string(rank);
    return own && contains(next, "Expected to have finished reduction in the prior iteration") &&
                   contains(next, "Parameters which did not receive grad for rank " + r +
                                      ": c.bias, c.weight, b.bias, b.weight\n") &&
                   contains(next, "Parameter indices which did not receive grad for rank " + r +
                                      ": 2 3 4 5\n") &&
                   contains(next, "find_unused_parameters")
               ? 0
               : 1;
  });
  expect_all_ok(results);
}

TEST(DdpUnused, MarkUnusedNeedsTheOptionAndAParameterThatWasNotUsed) {
  auto results = run_group(1, {.timeout = 30s}, [&](int) {
    std::string no_option, used;
    Heads m;
    {
      dist::DistributedDataParallel ddp(m.parameters());
      try {
        ddp.mark_unused(m.b.parameters());
      } catch (const dist::Error& e) {
        no_option = e.what();
      }
    }
    dist::DistributedDataParallel ddp(m.parameters(), {.find_unused_parameters = true});
    ddp.grads_ready(m.b.parameters());
    try {
      ddp.mark_unused(m.b.parameters());
    } catch (const dist::Error& e) {
      used = e.what();
    }
    std::printf("%s\n%s\n", no_option.c_str(), used.c_str());
    return contains(no_option, "set DdpOptions::find_unused_parameters = true") &&
                   contains(used, "the gradient of 'b.weight' was marked ready this step")
               ? 0
               : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

// static_graph: the first step finds c unused; later steps mark it themselves (c's grad stays
// untouched, and a and b are averaged), and a step that uses c, or leaves b out, is an error
// naming it.
TEST(DdpUnused, StaticGraphLearnsTheUnusedSetAtTheFirstStepAndHoldsLaterStepsToIt) {
  auto results = run_group(2, {.timeout = 30s}, [&](int rank) {
    Heads m;
    dist::DistributedDataParallel ddp(m.parameters(), {.static_graph = true});
    bool ok = true;
    for (int step = 0; step < 3; ++step) {
      for (dist::Parameter* p : m.parameters()) p->grad.fill_(100 + rank);
      set_grads(m.a, rank + 1);
      set_grads(m.b, 2 * (rank + 1));
      ddp.grads_ready(m.b.parameters());
      ddp.grads_ready(m.a.parameters());
      ddp.finish_gradient_sync();
      ok = ok && m.a.bias().grad.item(0) == 1.5 && m.b.bias().grad.item(0) == 3 &&
           m.c.bias().grad.item(0) == 100 + rank;
    }
    std::string uses_c, leaves_b;
    try {
      ddp.grads_ready(m.c.parameters());
    } catch (const dist::Error& e) {
      uses_c = e.what();
    }
    dist::DistributedDataParallel again(m.parameters(), {.static_graph = true});
    again.average_gradients();  // the first step: nothing unused
    again.grads_ready(m.a.parameters());
    again.grads_ready(m.c.parameters());
    try {
      again.finish_gradient_sync();
    } catch (const dist::Error& e) {
      leaves_b = e.what();
    }
    std::printf("%s\n%s\n", uses_c.c_str(), leaves_b.c_str());
    return ok && contains(uses_c, "'c.weight' was unused at the first step, and static_graph") &&
                   contains(leaves_b,
                            "the gradient of 'b.weight' was not marked ready, but it "
                            "was used at the first step")
               ? 0
               : 1;
  });
  expect_all_ok(results);
}

// Rank r trains counts[r] steps of gradient r + 1 (SGD, lr 1, weight from 0) inside a Join.
// While rank r still trains, the step's average is (sum of k + 1 over the ranks k still
// training) / W: the joined ranks add zeros and the divisor stays W (torch's
// divide_by_initial_world_size=True). Every rank ends with the last joiner's weight.
double joined_weight(const std::vector<int>& counts) {
  const auto world = static_cast<double>(counts.size());
  int steps = 0;
  for (int c : counts) steps = std::max(steps, c);
  double w = 0;
  for (int s = 0; s < steps; ++s) {
    double sum = 0;
    for (std::size_t k = 0; k < counts.size(); ++k) {
      if (s < counts[k]) sum += static_cast<double>(k) + 1;
    }
    w -= sum / world;
  }
  return w;
}

class DdpJoin : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(DdpJoin, JoinedRanksShadowTheStepsWithZerosAndTheLastJoinersModelWins) {
  const std::vector<int> counts = GetParam();
  const int world = static_cast<int>(counts.size());
  int most = 0;
  for (int c : counts) most = std::max(most, c);
  for (const bool overlap : {false, true}) {
    auto results = run_group(world, {.timeout = 30s}, [&](int rank) {
      dist::Linear model(1, 1, {{0}, {0}});
      dist::DistributedDataParallel ddp(model.parameters(), {.overlap = overlap});
      dist::SGD optimizer(model.parameters(), 1.0);
      dist::Join join(ddp);
      for (int step = 0; step < counts[static_cast<std::size_t>(rank)]; ++step) {
        optimizer.zero_grad();
        set_grads(model, rank + 1);
        ddp.average_gradients();
        optimizer.step();
      }
      join.join();
      const double want = joined_weight(counts);
      std::printf("weight %.9g want %.9g shadowed %d last %d\n", model.weight().data.item(0), want,
                  join.shadowed_steps(), join.last_joiner());
      const int mine = counts[static_cast<std::size_t>(rank)];
      return std::abs(model.weight().data.item(0) - want) < 1e-6 &&
                     join.shadowed_steps() == most - mine && join.last_joiner() == (mine == most)
                 ? 0
                 : 1;
    });
    expect_all_ok(results);
    if (HasFailure()) {
      ADD_FAILURE() << "overlap " << overlap;
      return;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Counts, DdpJoin,
                         ::testing::Values(std::vector<int>{5, 3}, std::vector<int>{7, 4, 2},
                                           std::vector<int>{2, 2}, std::vector<int>{0, 3}),
                         [](const auto& p) {
                           std::string name = "batches";
                           for (int c : p.param) name += "_" + std::to_string(c);
                           return name;
                         });

// find_unused_parameters inside a Join: the ranks still training send the used map after their
// buckets; the joined rank answers it with zeros (Join's count says that one follows).
TEST(DdpJoinUnused, AJoinedRankShadowsTheUsedMapToo) {
  auto results = run_group(2, {.timeout = 30s}, [&](int rank) {
    Heads m;
    dist::DistributedDataParallel ddp(m.parameters(), {.find_unused_parameters = true});
    dist::Join join(ddp);
    for (int step = 0; step < (rank == 0 ? 3 : 1); ++step) {
      set_grads(m.a, rank + 1);
      ddp.grads_ready(m.a.parameters());
      ddp.finish_gradient_sync();
    }
    join.join();
    std::printf("a %g shadowed %d\n", m.a.weight().grad.item(0), join.shadowed_steps());
    return m.a.weight().grad.item(0) == (rank == 0 ? 0.5 : 1.5) &&
                   join.shadowed_steps() == (rank == 0 ? 0 : 2)
               ? 0
               : 1;
  });
  expect_all_ok(results);
}

// Without Join, the rank with more batches waits in a gradient all_reduce that the other never
// calls: it fails at the group's timeout, naming the call (chapter 10), instead of hanging.
TEST(DdpJoin, WithoutJoinUnevenInputsFailAtTheTimeoutNamingTheAllReduce) {
  const auto start = std::chrono::steady_clock::now();
  auto results = run_group(2, {.timeout = 2s}, [&](int rank) {
    dist::Linear model(1, 1, {{0}, {0}});
    dist::DistributedDataParallel ddp(model.parameters());
    for (int step = 0; step < (rank == 0 ? 5 : 3); ++step) {
      set_grads(model, rank + 1);
      ddp.average_gradients();
    }
    if (rank == 1) std::this_thread::sleep_for(4s);  // out of batches: evaluating, say
    return 0;
  });
  std::printf("%s", describe(results).c_str());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);
  EXPECT_NE(results[0].exit_code, 0);
  EXPECT_TRUE(contains(results[0].output, "all_reduce") &&
              contains(results[0].output, "timed out after 2 s"))
      << describe(results);
}

TEST(DdpJoin, RefusesADdpThatBroadcastsBuffersAndASecondJoin) {
  auto results = run_group(1, {.timeout = 30s}, [&](int) {
    dist::Linear model(1, 1, {{0}, {0}});
    dist::Tensor running = dist::zeros(2);
    std::string buffers, twice;
    {
      dist::DistributedDataParallel ddp(model.parameters(), {.buffers = {&running}});
      try {
        dist::Join join(ddp);
      } catch (const dist::ConfigError& e) {
        buffers = e.what();
      }
    }
    dist::DistributedDataParallel ddp(model.parameters());
    dist::Join join(ddp);
    join.join();
    try {
      join.join();
    } catch (const dist::Error& e) {
      twice = e.what();
    }
    std::printf("%s\n%s\n", buffers.c_str(), twice.c_str());
    return contains(buffers, "DdpOptions::broadcast_buffers = false") &&
                   contains(twice, "this rank has joined already")
               ? 0
               : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

}  // namespace

namespace {

// Two layers, 10 * 4 + 4 + 4 * 3 + 3 = 59 values, with gradients that differ per rank and step.
struct TwoLayers {
  dist::Linear a{10, 4, {std::vector<float>(40, 0.1f), std::vector<float>(4, 0)}};
  dist::Linear b{4, 3, {std::vector<float>(12, 0.2f), std::vector<float>(3, 0)}};
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> all;
    for (dist::Linear* l : {&a, &b}) {
      for (dist::Parameter* p : l->parameters()) all.push_back(p);
    }
    return all;
  }
  void add_grads(int rank, int step) {  // as a backward does: grad += something
    for (dist::Parameter* p : parameters()) {
      dist::Tensor g(p->grad.numel(), dist::kFloat32);
      for (std::int64_t k = 0; k < g.numel(); ++k) g.set(k, (rank + 1.0) / 3 * (k + 1) + step);
      p->grad += g;
    }
  }
};
constexpr std::int64_t kTwoLayersValues = 59;

// gradient_as_bucket_view: the grads are the buckets' slices, so constructing the DDP takes no
// memory beyond what the grads held (the buckets replace them); without it, the buckets are a
// second copy: memory_allocated() rises by 4 bytes per value, 4 * 59 = 236.
TEST(DdpBucketView, TheGradientsTakeTheirMemoryOnce) {
  expect_all_ok(run_group(2, {.timeout = 30s}, [&](int rank) {
    std::int64_t rise[2] = {0, 0};
    bool views = true;
    for (const bool as_view : {false, true}) {
      TwoLayers m;
      const std::int64_t before = dist::memory_allocated();
      dist::DistributedDataParallel ddp(
          m.parameters(), {.bucket_cap_mb = 0.0001, .gradient_as_bucket_view = as_view});
      rise[as_view] = dist::memory_allocated() - before;
      m.add_grads(rank, 0);  // grad += g writes into the bucket: still a slice
      for (dist::Parameter* p : m.parameters()) views = views && p->grad.is_view() == as_view;
      ddp.average_gradients();
      views = views && dist::memory_allocated() - before == rise[as_view];
    }
    std::printf("rise without %lld, with %lld\n", static_cast<long long>(rise[0]),
                static_cast<long long>(rise[1]));
    return views && rise[0] == 4 * kTwoLayersValues && rise[1] == 0 ? 0 : 1;
  }));
}

// The same steps (two buckets, overlap or not, an accumulation step under no_sync) give the
// same bits with and without the option; a grad assigned whole stays a slice; once the DDP is
// gone every grad has its own storage again, with its last values.
TEST(DdpBucketView, TrainsToTheSameBitsAsWithoutAndGivesTheGradsBackAtTheEnd) {
  for (const bool overlap : {false, true}) {
    expect_all_ok(run_group(2, {.timeout = 30s}, [&](int rank) {
      TwoLayers plain, viewed;
      dist::SGD opt_plain(plain.parameters(), 0.1), opt_viewed(viewed.parameters(), 0.1);
      dist::DistributedDataParallel ddp_plain(plain.parameters(),
                                              {.bucket_cap_mb = 0.0001, .overlap = overlap});
      auto ddp_viewed = std::make_unique<dist::DistributedDataParallel>(
          viewed.parameters(),
          dist::DdpOptions{
              .bucket_cap_mb = 0.0001, .overlap = overlap, .gradient_as_bucket_view = true});
      bool ok = ddp_viewed->buckets().size() == 2;
      for (int step = 0; step < 4; ++step) {
        opt_plain.zero_grad();
        opt_viewed.zero_grad();
        if (step == 2) {  // accumulate one more batch first
          const auto a = ddp_plain.no_sync();
          const auto b = ddp_viewed->no_sync();
          plain.add_grads(rank, 10);
          viewed.add_grads(rank, 10);
          ddp_plain.average_gradients();
          ddp_viewed->average_gradients();
        }
        plain.add_grads(rank, step);
        viewed.add_grads(rank, step);
        viewed.b.parameters()[1]->grad = plain.b.bias().grad;  // assigned whole: same values
        ddp_plain.grads_ready(plain.b.parameters());
        ddp_viewed->grads_ready(viewed.b.parameters());
        ddp_plain.grads_ready(plain.a.parameters());
        ddp_viewed->grads_ready(viewed.a.parameters());
        ddp_plain.finish_gradient_sync();
        ddp_viewed->finish_gradient_sync();
        ok = ok && viewed.b.bias().grad.is_view();
        opt_plain.step();
        opt_viewed.step();
      }
      ok = ok && dist::fingerprint(plain.parameters()) == dist::fingerprint(viewed.parameters());
      std::vector<dist::Tensor> last;
      for (dist::Parameter* p : viewed.parameters()) last.push_back(p->grad);
      ddp_viewed.reset();
      for (std::size_t i = 0; i < last.size(); ++i) {
        const dist::Parameter* p = viewed.parameters()[i];
        ok = ok && !p->grad.is_view() && p->grad.equal(last[i]) &&
             p->grad.equal(plain.parameters()[i]->grad);
      }
      return ok ? 0 : 1;
    }));
    if (HasFailure()) {
      ADD_FAILURE() << "overlap " << overlap;
      return;
    }
  }
}

TEST(DdpBucketView, AGradOfAnotherSizeIsAnErrorNamingIt) {
  auto results = run_group(1, {.timeout = 30s}, [&](int) {
    TwoLayers m;
    dist::DistributedDataParallel ddp(m.parameters(), {.gradient_as_bucket_view = true});
    m.a.parameters()[0]->grad = dist::zeros(3);
    std::string error;
    try {
      ddp.average_gradients();
    } catch (const dist::Error& e) {
      error = e.what();
    }
    std::printf("%s\n", error.c_str());
    return contains(error, "the grad of 'weight' has 3 values, its parameter 40") ? 0 : 1;
  });
  EXPECT_EQ(results[0].exit_code, 0) << describe(results);
}

}  // namespace
