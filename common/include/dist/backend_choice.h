// dist/backend_choice.h — what `--backend auto` picks for the ranks of one machine, asked without
// starting a process group (tools/backend_probe, which `./tutorial doctor` runs).
//
// init_process_group makes the same choice for a real job: each rank states why it cannot run NCCL
// (no GPU path in this build, no driver, fewer GPUs than ranks on its machine), and auto picks NCCL
// only when no rank has a reason, because every rank of a group must use the same backend.
//
// Taught in: chapter 08 (--backend auto), ./tutorial doctor.
// Built in: common/src/backends/choice.cpp (with this process's census of GPUs, gpu/).
#pragma once

#include <string>

namespace dist {

struct BackendChoice {
  std::string backend;  // "nccl" or "gloo"
  std::string reason;   // why, for the line that init prints
};

// What auto picks for `local_world_size` ranks on this machine, as init would pick it: the GPUs
// this process sees stand in for every local rank's.
BackendChoice choose_backend_for_machine(int local_world_size);

}  // namespace dist
