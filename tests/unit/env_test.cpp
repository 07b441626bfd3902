// What a launcher's variables resolve to, and the message each kind of bad value gets.
#include <gtest/gtest.h>

#include <map>

#include "dist/check.h"
#include "dist/env.h"

namespace {

using dist::ConfigError;
using dist::LaunchEnv;

// A fake environment: exactly these variables are set.
dist::EnvLookup fake(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

// The ConfigError message for this environment ("" if none was thrown).
std::string error_for(std::map<std::string, std::string> vars) {
  try {
    dist::read_launch_env(fake(std::move(vars)));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, NothingSetMeansNothingKnown) {
  const LaunchEnv env = dist::read_launch_env(fake({}));
  EXPECT_FALSE(env.rank);
  EXPECT_FALSE(env.world_size);
  EXPECT_FALSE(env.master_addr);
  EXPECT_EQ(env.launcher, dist::Launcher::kNone);
}

TEST(LaunchEnv, ReadsTorchrunVariables) {
  const LaunchEnv env = dist::read_launch_env(fake({{"RANK", "3"},
                                                    {"WORLD_SIZE", "4"},
                                                    {"LOCAL_RANK", "1"},
                                                    {"LOCAL_WORLD_SIZE", "2"},
                                                    {"GROUP_RANK", "1"},
                                                    {"MASTER_ADDR", "10.0.0.1"},
                                                    {"MASTER_PORT", "29501"}}));
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.group_rank, 1);
  EXPECT_EQ(env.master_addr, "10.0.0.1");
  EXPECT_EQ(env.master_port, 29501);
  EXPECT_EQ(env.launcher, dist::Launcher::kTorchrun);
  EXPECT_EQ(env.rank_var, "RANK");
}

TEST(LaunchEnv, FallsBackToOpenMPI) {
  const LaunchEnv env = dist::read_launch_env(fake({{"OMPI_COMM_WORLD_RANK", "2"},
                                                    {"OMPI_COMM_WORLD_SIZE", "6"},
                                                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}}));
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 6);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.local_world_size, 3);
  EXPECT_EQ(env.launcher, dist::Launcher::kOpenMPI);
  EXPECT_EQ(env.rank_var, "OMPI_COMM_WORLD_RANK");
}

TEST(LaunchEnv, FallsBackToSlurm) {
  const LaunchEnv env = dist::read_launch_env(
      fake({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}}));
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.launcher, dist::Launcher::kSlurm);
}

// srun's count of tasks per machine: "2(x3),1" is 2 on machines 0-2 and 1 on machine 3.
TEST(LaunchEnv, ReadsThisMachinesTaskCountFromSlurm) {
  for (const auto& [node, tasks] : {std::pair{"0", 2}, {"2", 2}, {"3", 1}}) {
    const LaunchEnv env = dist::read_launch_env(fake({{"SLURM_PROCID", "0"},
                                                      {"SLURM_NTASKS", "7"},
                                                      {"SLURM_NODEID", node},
                                                      {"SLURM_TASKS_PER_NODE", "2(x3),1"}}));
    EXPECT_EQ(env.local_world_size, tasks) << "SLURM_NODEID=" << node;
    EXPECT_EQ(env.group_rank, std::stoi(node));
  }
  EXPECT_EQ(dist::read_launch_env(fake({{"SLURM_TASKS_PER_NODE", "4"}})).local_world_size, 4);
}

TEST(LaunchEnvErrors, AMalformedSlurmTaskListIsRefusedNamingIt) {
  EXPECT_NE(error_for({{"SLURM_TASKS_PER_NODE", "2(x3"}})
                .find("SLURM_TASKS_PER_NODE=\"2(x3\" has an unclosed \"(x\""),
            std::string::npos);
  EXPECT_NE(error_for({{"SLURM_TASKS_PER_NODE", "two"}})
                .find("SLURM_TASKS_PER_NODE=\"two\" is not an integer"),
            std::string::npos);
  EXPECT_NE(error_for({{"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_NODEID", "2"}})
                .find("describes 2 machines, but SLURM_NODEID is 2"),
            std::string::npos);
}

TEST(LaunchEnv, TorchrunNamesWinOverTheOthers) {
  const LaunchEnv env = dist::read_launch_env(fake({{"RANK", "1"},
                                                    {"OMPI_COMM_WORLD_RANK", "7"},
                                                    {"SLURM_PROCID", "9"},
                                                    {"WORLD_SIZE", "2"},
                                                    {"SLURM_NTASKS", "16"}}));
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
}

TEST(LaunchEnv, EmptyCountsAsUnset) {
  const LaunchEnv env = dist::read_launch_env(fake(
      {{"RANK", ""}, {"OMPI_COMM_WORLD_RANK", "4"}, {"MASTER_ADDR", ""}, {"MASTER_PORT", ""}}));
  EXPECT_EQ(env.rank, 4);
  EXPECT_FALSE(env.master_addr);
  EXPECT_FALSE(env.master_port);
}

TEST(LaunchEnv, AcceptsAnExplicitPlusSign) {
  EXPECT_EQ(dist::read_launch_env(fake({{"RANK", "+2"}})).rank, 2);
}

TEST(LaunchEnvErrors, NonNumericValueNamesTheVariableAndValue) {
  EXPECT_EQ(error_for({{"WORLD_SIZE", "two"}}),
            "WORLD_SIZE=\"two\" is not an integer: expected a whole number such as 1");
}

TEST(LaunchEnvErrors, EveryKindOfMalformedIntegerIsRefused) {
  for (const char* bad : {"1.5", " 1", "1 ", "0x10", "1e3", "--1", "+", "-", "3abc", "abc3", "١"}) {
    SCOPED_TRACE(bad);
    const std::string msg = error_for({{"RANK", bad}});
    EXPECT_NE(msg.find(std::string("RANK=\"") + bad + "\" is not an integer"), std::string::npos)
        << msg;
  }
}

TEST(LaunchEnvErrors, OutOfRangeValuesSayTheRange) {
  EXPECT_EQ(error_for({{"RANK", "-1"}}),
            "RANK=-1 is out of range: it must be between 0 and 1048575");
  EXPECT_EQ(error_for({{"WORLD_SIZE", "0"}}),
            "WORLD_SIZE=0 is out of range: it must be between 1 and 1048576");
  EXPECT_EQ(error_for({{"MASTER_PORT", "0"}}),
            "MASTER_PORT=0 is out of range: it must be between 1 and 65535");
  EXPECT_EQ(error_for({{"MASTER_PORT", "65536"}}),
            "MASTER_PORT=65536 is out of range: it must be between 1 and 65535");
  EXPECT_EQ(error_for({{"LOCAL_RANK", "99999999999999999999"}}),
            "LOCAL_RANK=99999999999999999999 is out of range: it must be between 0 and 1048575");
}

TEST(LaunchEnvErrors, FallbackVariablesAreValidatedToo) {
  EXPECT_EQ(error_for({{"OMPI_COMM_WORLD_SIZE", "x"}}),
            "OMPI_COMM_WORLD_SIZE=\"x\" is not an integer: expected a whole number such as 1");
  EXPECT_EQ(error_for({{"SLURM_PROCID", "-3"}}),
            "SLURM_PROCID=-3 is out of range: it must be between 0 and 1048575");
}

TEST(LaunchEnvErrors, LocalRankMustBeBelowLocalWorldSize) {
  EXPECT_EQ(error_for({{"LOCAL_RANK", "2"}, {"LOCAL_WORLD_SIZE", "2"}}),
            "LOCAL_RANK=2 is out of range for LOCAL_WORLD_SIZE=2: local ranks on one machine are "
            "0..1");
}

TEST(LaunchEnvErrors, AConfigErrorExitsWithCode2) {
  try {
    dist::read_launch_env(fake({{"RANK", "x"}}));
    FAIL() << "no error thrown";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.exit_code(), dist::kExitUsage);
  }
}

}  // namespace
