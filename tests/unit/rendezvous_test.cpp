// Resolving a rank's settings (common/src/init/rendezvous.h) without starting any process: the
// LOCAL_RANK rule, the session id, and the one hash the library uses for both.
#include "init/rendezvous.h"

#include <gtest/gtest.h>

#include <string>

#include "dist/check.h"
#include "dist/nn.h"
#include "errors.h"
#include "util/fnv1a.h"

namespace {

using dist::rendezvous::resolve;
using dist::testing::config_error;

dist::InitOptions tcp_options() {
  return {.init_method = "tcp://127.0.0.1:29500"};
}

dist::LaunchEnv launched(int rank, int world_size) {
  dist::LaunchEnv env;
  env.rank = rank;
  env.world_size = world_size;
  env.rank_var = "RANK";
  env.world_size_var = "WORLD_SIZE";
  return env;
}

// ---- LOCAL_RANK ---------------------------------------------------------------------------------

TEST(LocalRank, TheLaunchersValueIsTaken) {
  dist::LaunchEnv env = launched(3, 4);
  env.local_rank = 1;
  env.local_world_size = 2;
  env.group_rank = 1;
  const auto s = resolve(tcp_options(), env);
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.local_world_size, 2);
}

TEST(LocalRank, WithoutOneOnASingleMachineTheRankStandsIn) {
  // Two programs started by hand (chapter 03), or a launcher that says nothing of machines.
  const auto s = resolve(tcp_options(), launched(1, 2));
  EXPECT_EQ(s.local_rank, 1);
  EXPECT_EQ(s.local_world_size, 2);
  dist::LaunchEnv first_machine = launched(1, 2);
  first_machine.group_rank = 0;
  first_machine.local_world_size = 2;
  EXPECT_EQ(resolve(tcp_options(), first_machine).local_rank, 1);
}

TEST(LocalRank, WithoutOneOnTheSecondMachineIsAConfigErrorNamingIt) {
  dist::LaunchEnv env = launched(2, 4);
  env.group_rank = 1;
  env.local_world_size = 2;
  const std::string what = config_error([&] { resolve(tcp_options(), env); });
  EXPECT_NE(what.find("LOCAL_RANK is not set"), std::string::npos) << what;
  EXPECT_NE(what.find("its machine index is 1 (GROUP_RANK or SLURM_NODEID)"), std::string::npos)
      << what;
}

TEST(LocalRank, WithoutOneWhenTheJobIsLargerThanOneMachineIsAConfigError) {
  dist::LaunchEnv env = launched(0, 4);
  env.local_world_size = 2;
  const std::string what = config_error([&] { resolve(tcp_options(), env); });
  EXPECT_NE(what.find("LOCAL_RANK is not set"), std::string::npos) << what;
  EXPECT_NE(what.find("WORLD_SIZE is 4 but LOCAL_WORLD_SIZE only 2"), std::string::npos) << what;
}

TEST(LocalRank, TheEnvironmentReaderNeverInventsOne) {
  // RANK is set and LOCAL_RANK is not: the reader reports what is there, and resolve() decides.
  const dist::LaunchEnv env =
      dist::read_launch_env([](const std::string& name) -> std::optional<std::string> {
        if (name == "RANK") return "3";
        if (name == "WORLD_SIZE") return "4";
        return std::nullopt;
      });
  EXPECT_EQ(env.rank, 3);
  EXPECT_FALSE(env.local_rank.has_value());
  EXPECT_FALSE(env.local_world_size.has_value());
}

// ---- The hash -----------------------------------------------------------------------------------

TEST(Fnv1a, GivesThePublishedValues) {
  EXPECT_EQ(dist::util::Fnv1a().value(), 0xcbf29ce484222325ULL);
  EXPECT_EQ(dist::util::Fnv1a().add("a").value(), 0xaf63dc4c8601ec8cULL);
}

TEST(SessionId, IsTheFnv1aOfGroupNameAndGeneration) {
  // Computed by a separate implementation (Python) of 64-bit FNV-1a over "default/0" and
  // "default/1". An offset basis with a digit missing gave other values.
  EXPECT_EQ(dist::rendezvous::session_id("default", 0), 0x62a3abcc1649e649ULL);
  EXPECT_EQ(dist::rendezvous::session_id("default", 1), 0x62a3aacc1649e496ULL);
}

TEST(Fingerprint, IsTheFnv1aOfTheParametersBytesInOrder) {
  // 1.0f and -2.5f, little-endian, hashed by Python: 0x09e629ee2dfdb3f8.
  dist::Parameter a{"weight", dist::Tensor::from<float>({1.0f}), dist::Tensor::from<float>({0.f})};
  dist::Parameter b{"bias", dist::Tensor::from<float>({-2.5f}), dist::Tensor::from<float>({0.f})};
  EXPECT_EQ(dist::fingerprint({&a, &b}), "09e629ee2dfdb3f8");
  EXPECT_NE(dist::fingerprint({&b, &a}), "09e629ee2dfdb3f8") << "the order of parameters counts";
  // Buffers follow the parameters, hashed alike (chapter 09's BatchNorm running statistics).
  EXPECT_EQ(dist::fingerprint({&a}, {&b.data}), "09e629ee2dfdb3f8");
  EXPECT_NE(dist::fingerprint({&a}), "09e629ee2dfdb3f8") << "the buffers count";
}

}  // namespace
