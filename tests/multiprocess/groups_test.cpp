// Process groups over some ranks (new_group(ranks), dist/init.h) and the DeviceMesh built from
// them (dist/device_mesh.h), on real processes over loopback with Gloo.
//   * A group of some ranks: sorted group ranks, global/group rank translation, collectives and
//     point to point in group ranks, against closed forms; the default group sends nothing.
//   * Two groups of disjoint ranks made by every rank, used at the same time.
//   * A rank that is not in a group: rank() -1, and every call refused naming the group.
//   * Ranks that asked for different ranks are named at once; a rank that never calls is named
//     at the timeout; bad ranks are refused before anything connects.
//   * DeviceMesh: row-major coordinates and groups at 4 and 8 ranks, in 1, 2 and 3 dimensions,
//     each group's all_reduce against its closed form; a mesh that does not tile the world.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "dist/device_mesh.h"
#include "dist/dist.h"
#include "dist/nn.h"
#include "dist/pipeline.h"
#include "dist/tensor_parallel.h"
#include "ranks.h"

namespace {

using namespace std::chrono_literals;
using dist::ReduceOp;
using dist::Tensor;
using dist::testing::contains;
using dist::testing::describe;
using dist::testing::expect_all_ok;
using dist::testing::run_group;

// Runs `f` and returns what it threw ("" if nothing), or "wrong type: ..." for another type.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong type: ") + e.what();
  }
  return "";
}

// One float, summed over `group`.
float sum_over(dist::ProcessGroup& group, float mine) {
  Tensor t = Tensor::from(std::vector<float>{mine});
  group.all_reduce(t, ReduceOp::SUM);
  return t.to_vector<float>()[0];
}

int fail(int rank, const std::string& what) {
  std::cout << "rank " << rank << ": " << what << "\n";
  return 1;
}

TEST(NewGroup, HoldsTheRanksItNamesSortedAndSpeaksInGroupRanks) {
  expect_all_ok(run_group(4, {.backend = "gloo"}, [](int rank) {
    dist::ProcessGroup& world = dist::default_group();
    const std::int64_t world_bytes = world.bytes_sent();
    auto group = dist::new_group({3, 1});  // as torch: sorted, so global 1 is group rank 0
    const bool member = rank == 1 || rank == 3;
    if (group->is_member() != member) return fail(rank, "is_member wrong");
    if (group->size() != 2) return fail(rank, "size " + std::to_string(group->size()));
    if (group->ranks() != std::vector<int>{1, 3}) return fail(rank, "ranks() wrong");
    if (group->global_rank(0) != 1 || group->global_rank(1) != 3) return fail(rank, "global_rank");
    if (group->group_rank(3) != 1) return fail(rank, "group_rank(3)");
    if (!contains(error_of<dist::ConfigError>([&] { (void)group->group_rank(2); }),
                  "global rank 2 is not in this group of global ranks 1, 3"))
      return fail(rank, "group_rank(2) not refused");
    if (!member) return group->rank() == -1 ? 0 : fail(rank, "a non-member's rank() is not -1");
    if (group->rank() != (rank == 1 ? 0 : 1))
      return fail(rank, "rank " + std::to_string(group->rank()));
    // Collectives: the sum of the members' values only; broadcast from group rank 1 (global 3).
    if (sum_over(*group, static_cast<float>(10 * rank)) != 40.0f) return fail(rank, "sum");
    Tensor b = Tensor::from(std::vector<float>{static_cast<float>(rank)});
    group->broadcast(b, 1);
    if (b.to_vector<float>()[0] != 3.0f) return fail(rank, "broadcast from group rank 1");
    // Point to point in group ranks: group rank 0 (global 1) sends to group rank 1 (global 3).
    Tensor p = Tensor::from(std::vector<float>{0, 0});
    if (group->rank() == 0) {
      p = Tensor::from(std::vector<float>{7, 8});
      group->send(p, 1, 5);
    } else {
      group->recv(p, 0, 5);
      if (p.to_vector<float>() != std::vector<float>{7, 8}) return fail(rank, "recv");
    }
    // dst 2 does not exist in a group of 2.
    if (!contains(error_of<dist::ConfigError>([&] { group->send(p, 2, 0); }), "dst rank 2"))
      return fail(rank, "send to group rank 2 not refused");
    if (world.bytes_sent() != world_bytes) return fail(rank, "the default group sent data");
    return 0;
  }));
}

TEST(NewGroup, DisjointGroupsMadeByEveryRankWorkAtTheSameTime) {
  expect_all_ok(run_group(4, {.backend = "gloo"}, [](int rank) {
    // Every rank makes both, in the same order, and uses the one it is in.
    auto low = dist::new_group({0, 1});
    auto high = dist::new_group({2, 3});
    dist::ProcessGroup& mine = rank < 2 ? *low : *high;
    dist::ProcessGroup& other = rank < 2 ? *high : *low;
    if (!mine.is_member() || other.is_member()) return fail(rank, "membership");
    const float expected = rank < 2 ? 0 + 1 : 2 + 3;
    for (int i = 0; i < 3; ++i)
      if (sum_over(mine, static_cast<float>(rank)) != expected) return fail(rank, "sum");
    return 0;
  }));
}

TEST(NewGroup, ARankOutsideTheGroupIsRefusedEveryCallNamingTheGroup) {
  expect_all_ok(run_group(3, {.backend = "gloo"}, [](int rank) {
    auto group = dist::new_group({0, 2});
    if (rank != 1) return sum_over(*group, 1.0f) == 2.0f ? 0 : fail(rank, "sum");
    Tensor t = Tensor::from(std::vector<float>{1});
    const std::string expected =
        "all_reduce on global rank 1, which is not in this group (global ranks 0, 2)";
    if (!contains(error_of<dist::ConfigError>([&] { group->all_reduce(t, ReduceOp::SUM); }),
                  expected))
      return fail(rank, "all_reduce not refused");
    if (!contains(error_of<dist::ConfigError>(
                      [&] { auto w = group->all_reduce(t, ReduceOp::SUM, {.async_op = true}); }),
                  expected))
      return fail(rank, "async all_reduce not refused");
    if (!contains(error_of<dist::ConfigError>([&] { group->barrier(); }),
                  "barrier on global rank 1"))
      return fail(rank, "barrier not refused");
    if (!contains(error_of<dist::ConfigError>([&] { group->send(t, 0, 0); }),
                  "send on global rank 1"))
      return fail(rank, "send not refused");
    if (!contains(error_of<dist::ConfigError>([&] { auto w = group->isend(t, 0, 0); }),
                  "isend on global rank 1"))
      return fail(rank, "isend not refused");
    if (!contains(error_of<dist::ConfigError>([&] { auto w = group->irecv(t, 1, 0); }),
                  "irecv on global rank 1"))
      return fail(rank, "irecv not refused");
    // What builds on a group refuses it too, before it reads a slice at rank -1.
    const dist::SequentialSpec spec = dist::mlp_spec({4, 4, 4}, 1);
    if (!contains(error_of<dist::ConfigError>([&] { dist::PipelineStage stage(spec, *group); }),
                  "PipelineStage on global rank 1, which is not in its group (global ranks 0, 2)"))
      return fail(rank, "PipelineStage not refused");
    const dist::Linear fc(4, 4, {std::vector<float>(16, 0.5f), std::vector<float>(4, 0.f)});
    if (!contains(error_of<dist::ConfigError>([&] { dist::ColumnParallelLinear c(fc, *group); }),
                  "ColumnParallelLinear on global rank 1"))
      return fail(rank, "ColumnParallelLinear not refused");
    if (!contains(error_of<dist::ConfigError>([&] { dist::RowParallelLinear r(fc, *group); }),
                  "RowParallelLinear on global rank 1"))
      return fail(rank, "RowParallelLinear not refused");
    return 0;
  }));
}

TEST(NewGroup, PointToPointErrorsNameGroupAndGlobalRanks) {
  auto results = run_group(4, {.backend = "gloo", .timeout = 20s}, [](int rank) {
    auto group = dist::new_group({1, 3});
    if (!group->is_member()) return 0;
    if (rank == 1) {
      Tensor two = Tensor::from(std::vector<float>{1, 2});
      try {
        group->send(two, 1, 0);
      } catch (const dist::Error&) {
        // The receiver refuses it and closes the group: the sender fails too (its words are
        // Gloo's timing); the receiver's words are the ones checked.
      }
      return 0;
    }
    Tensor three(3, dist::kFloat32);
    const std::string error = error_of<dist::Error>([&] { group->recv(three, 0, 0); });
    const std::string expected =
        "recv from group rank 0 (global rank 1) (tag 0) expected 3 float32 elements; group rank 0 "
        "(global rank 1) sent 2 float32 elements (on group rank 1 (global rank 3))";
    return contains(error, expected) ? 0 : fail(rank, "error was: " + error);
  });
  expect_all_ok(results);
}

TEST(NewGroup, RanksThatAskForDifferentRanksAreNamedAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  auto results = run_group(4, {.backend = "gloo", .timeout = 60s}, [](int rank) {
    // Ranks 0 and 1 make {0, 1}; ranks 2 and 3 think the first group is all four.
    const std::vector<int> ranks = rank < 2 ? std::vector<int>{0, 1} : std::vector<int>{0, 1, 2, 3};
    const std::string error = error_of<dist::ConfigError>([&] { auto g = dist::new_group(ranks); });
    if (rank < 2) return error.empty() ? 0 : fail(rank, "unexpected: " + error);
    if (!contains(error, "new_group call #1: rank " + std::to_string(rank) +
                             " asked for ranks [0, 1, 2, 3], rank 0 for ranks [0, 1]"))
      return fail(rank, "error was: " + error);
    return 0;
  });
  expect_all_ok(results);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s) << "not at once: " << describe(results);
}

TEST(NewGroup, ARankThatNeverCallsIsNamedAtTheTimeout) {
  auto results = run_group(3, {.backend = "gloo", .timeout = 2s}, [](int rank) {
    if (rank == 2) return 0;  // never calls new_group({0, 2})
    if (rank == 1) {
      auto g = dist::new_group({0, 2});  // not a member: returns at once
      return g->is_member() ? fail(rank, "member") : 0;
    }
    const std::string error = error_of<dist::TimeoutError>([&] {
      auto g = dist::new_group({0, 2});
    });
    if (!contains(error, "new_group call #1 [0, 2] on rank 0: rank 2 did not make this call"))
      return fail(rank, "error was: " + error);
    return 0;
  });
  expect_all_ok(results);
}

TEST(NewGroup, BadRanksAreRefusedBeforeAnythingConnects) {
  expect_all_ok(run_group(2, {.backend = "gloo", .timeout = 5s}, [](int rank) {
    const std::vector<std::pair<std::vector<int>, std::string>> cases = {
        {{0, 2},
         "new_group([0, 2]): rank 2 is not a rank of the default group, whose ranks are 0 to 1"},
        {{-1}, "rank -1 is not a rank of the default group"},
        {{1, 0, 1}, "new_group([1, 0, 1]): rank 1 is named twice"},
        {{}, "needs at least one rank"}};
    for (const auto& [ranks, expected] : cases) {
      const std::string error =
          error_of<dist::ConfigError>([&] { auto g = dist::new_group(ranks); });
      if (!contains(error, expected))
        return fail(rank, "expected '" + expected + "', got '" + error + "'");
    }
    // The refused calls used no group: the next one works on both ranks.
    auto g = dist::new_group({0, 1});
    return sum_over(*g, 1.0f) == 2.0f ? 0 : fail(rank, "sum after refusals");
  }));
}

// ---- DeviceMesh ---------------------------------------------------------------------------------

// Checks a mesh on this rank against the row-major closed form: coordinates, each dimension's
// group (its ranks, this rank's place in it) and an all_reduce of the global ranks over it.
int check_mesh(int rank, const std::vector<dist::MeshDim>& dims) {
  dist::DeviceMesh mesh = dist::init_device_mesh(dims);
  std::vector<int> strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i].size;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    const int coord = rank / strides[d] % dims[d].size;
    if (mesh.coordinate(dims[d].name) != coord) return fail(rank, "coordinate " + dims[d].name);
    if (mesh.size(dims[d].name) != dims[d].size) return fail(rank, "size " + dims[d].name);
    dist::ProcessGroup& g = mesh.group(dims[d].name);
    const int first = rank - coord * strides[d];
    std::vector<int> line;
    float sum = 0;
    for (int k = 0; k < dims[d].size; ++k) {
      line.push_back(first + k * strides[d]);
      sum += static_cast<float>(first + k * strides[d]);
    }
    if (g.ranks() != line || g.rank() != coord) return fail(rank, "group " + dims[d].name);
    if (sum_over(g, static_cast<float>(rank)) != sum) return fail(rank, "sum over " + dims[d].name);
  }
  if (mesh.rank_at(mesh.coordinates()) != rank) return fail(rank, "rank_at");
  return 0;
}

TEST(DeviceMesh, TwoByTwoIsRowMajorAsTorchs) {
  expect_all_ok(run_group(4, {.backend = "gloo"}, [](int rank) {
    dist::DeviceMesh mesh = dist::init_device_mesh({{"dp", 2}, {"tp", 2}});
    if (mesh.str() != "[[0, 1], [2, 3]] (dp, tp)") return fail(rank, "str " + mesh.str());
    // Rank 2 sits at row 1, column 0: its tp group is {2, 3}, its dp group {0, 2}.
    const std::vector<std::vector<int>> tp = {{0, 1}, {0, 1}, {2, 3}, {2, 3}};
    const std::vector<std::vector<int>> dp = {{0, 2}, {1, 3}, {0, 2}, {1, 3}};
    if (mesh.group("tp").ranks() != tp[rank] || mesh.group("dp").ranks() != dp[rank])
      return fail(rank, "groups");
    if (mesh.coordinate("dp") != rank / 2 || mesh.coordinate("tp") != rank % 2)
      return fail(rank, "coordinates");
    return check_mesh(rank, {{"dp", 2}, {"tp", 2}});
  }));
}

TEST(DeviceMesh, OneTwoAndThreeDimensionsAtEightRanks) {
  expect_all_ok(run_group(8, {.backend = "gloo"},
                          [](int rank) {
                            for (const auto& dims : std::vector<std::vector<dist::MeshDim>>{
                                     {{"dp", 8}},
                                     {{"dp", 2}, {"tp", 4}},
                                     {{"dp", 4}, {"tp", 2}},
                                     {{"pp", 2}, {"dp", 2}, {"tp", 2}},
                                     {{"dp", 2}, {"x", 1}, {"tp", 4}}}) {
                              if (check_mesh(rank, dims) != 0) return 1;
                            }
                            return 0;
                          },
                          {.deadline = 240s}));
}

TEST(DeviceMesh, BadShapesAreRefusedOnEveryRankBeforeAnythingConnects) {
  expect_all_ok(run_group(4, {.backend = "gloo", .timeout = 5s}, [](int rank) {
    const std::vector<std::pair<std::vector<dist::MeshDim>, std::string>> cases = {
        {{{"dp", 2}, {"tp", 3}},
         "a DeviceMesh of dp = 2, tp = 3 holds 6 ranks, but the world has 4: the sizes must "
         "multiply to the world size"},
        {{{"dp", 3}}, "holds 3 ranks, but the world has 4"},
        {{{"dp", 2}, {"dp", 2}}, "dimension name \"dp\" is used twice"},
        {{{"", 4}}, "dimension 0 has no name"},
        {{{"dp", 4}, {"tp", 0}}, "dimension tp has size 0"},
        {{}, "at least one dimension"}};
    for (const auto& [dims, expected] : cases) {
      const std::string error = error_of<dist::ConfigError>([&] { dist::DeviceMesh m(dims); });
      if (!contains(error, expected))
        return fail(rank, "expected '" + expected + "', got '" + error + "'");
    }
    dist::DeviceMesh mesh = dist::init_device_mesh({{"dp", 4}});
    if (!contains(error_of<dist::ConfigError>([&] { (void)mesh.group("tp"); }),
                  "this DeviceMesh has no dimension \"tp\"; its dimensions are dp"))
      return fail(rank, "unknown dimension not refused");
    return check_mesh(rank, {{"dp", 2}, {"tp", 2}});
  }));
}

}  // namespace
