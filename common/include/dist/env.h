// dist/env.h — reading what a launcher tells each rank through environment variables.
//
// torchrun (and our ddprun) set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK,
// MASTER_ADDR and MASTER_PORT. Programs started by OpenMPI's mpirun see OMPI_COMM_WORLD_RANK/SIZE/
// LOCAL_RANK/LOCAL_SIZE instead, and Slurm's srun sets SLURM_PROCID, SLURM_NTASKS,
// SLURM_LOCALID, SLURM_NODEID and SLURM_TASKS_PER_NODE ("2(x3),1": 2 tasks on each of machines
// 0-2, 1 on machine 3, from which this machine's count is read). We read torchrun's names first and
// fall back to the others, so one binary runs under all three launchers unchanged.
//
// Every value is validated here, once: it must be a whole number in range (a port 1-65535), and an
// empty variable counts as unset. A bad value is a dist::ConfigError whose message names the
// variable and quotes the value, e.g.  WORLD_SIZE="two" is not an integer.
//
// Taught in: chapter 01 (get_dist_info) and chapter 02 (init methods).
// Built in: common/src/base/env.cpp.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dist {

// Where the rank numbers came from.
enum class Launcher { kNone, kTorchrun, kOpenMPI, kSlurm };
const char* launcher_name(Launcher launcher);

struct LaunchEnv {
  std::optional<int> rank;              // RANK | OMPI_COMM_WORLD_RANK | SLURM_PROCID
  std::optional<int> world_size;        // WORLD_SIZE | OMPI_COMM_WORLD_SIZE | SLURM_NTASKS
  std::optional<int> local_rank;        // LOCAL_RANK | OMPI_COMM_WORLD_LOCAL_RANK | SLURM_LOCALID
  std::optional<int> local_world_size;  // LOCAL_WORLD_SIZE | OMPI_COMM_WORLD_LOCAL_SIZE |
                                        // SLURM_TASKS_PER_NODE's count for SLURM_NODEID
  std::optional<int> group_rank;        // GROUP_RANK | SLURM_NODEID (the machine's index)
  std::optional<std::string> master_addr;  // MASTER_ADDR
  std::optional<int> master_port;          // MASTER_PORT
  Launcher launcher = Launcher::kNone;     // who set `rank`
  std::string rank_var;                    // the variable `rank` came from, for messages
  std::string world_size_var;              // the variable `world_size` came from
};

// Looks up one environment variable; std::nullopt when it is unset. Tests pass a fake.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;
EnvLookup process_env();

// Reads and validates every variable above. Throws dist::ConfigError on the first bad one.
// It checks each value on its own and LOCAL_RANK < LOCAL_WORLD_SIZE; RANK < WORLD_SIZE is checked
// by init_process_group, after explicit arguments have had their say.
LaunchEnv read_launch_env(const EnvLookup& lookup = process_env());

// Parses `value` of variable `name` as an integer in [min, max], or throws a ConfigError that
// names both. Exposed for the chapters' flag parsing, which wants the same messages.
int parse_int(const std::string& name, const std::string& value, long long min, long long max);

// Like std::getenv, but "" counts as unset.
std::optional<std::string> env_value(const std::string& name);

}  // namespace dist
