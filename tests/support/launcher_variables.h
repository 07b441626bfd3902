// The launchers' variables, in one list for every test: the C++ tests include this header, and
// tests/cluster/launchers_check.py reads the same names from it.
//
// A test that starts ranks by hand clears all of them first, so that the machine's environment
// (a shell with RANK exported, a test run inside a Slurm job) cannot leak into it. It has no
// dependencies: the launcher tests, which do not link the library, use it too.
//
// tools/ddprun (what it sets) and common/src/base/env.cpp (what the library reads) keep their own
// lists; the launcher tests check the first against this one.
#pragma once

namespace dist::testing {

// What ddprun gives every rank: the variables torchrun 1.13 sets, then ddprun's own two
// (DIST_STORE_TOKEN on one machine only). OMP_NUM_THREADS is left out: ddprun sets it only
// sometimes, and it says nothing about who a rank is.
inline constexpr const char* kDdprunVariables[] = {
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "DIST_LAUNCHER",
    "DIST_STORE_TOKEN",
};

// What mpirun (OpenMPI) and srun (Slurm) set instead, and the library reads when RANK is absent.
inline constexpr const char* kOtherLauncherVariables[] = {
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURM_TASKS_PER_NODE",
};

}  // namespace dist::testing
