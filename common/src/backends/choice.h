// Which backend a rank can run, and what `auto` picks (internal; used by the rendezvous and
// dist/backend_choice.h, tested by tests/unit/gpu_path_test.cpp with made-up machines).
//
// NCCL needs, on every rank: a build with the GPU path, a loaded driver, and a GPU of its own,
// i.e. LOCAL_RANK < the number of GPUs this process sees, for every local rank of the machine.
// NCCL refuses two ranks on one GPU, so "8 ranks on a 4-GPU machine" is a configuration error,
// not something to paper over.
#pragma once

#include <string>
#include <vector>

#include "dist/backend_choice.h"
#include "gpu/gpu.h"

namespace dist::backends {

// Why this rank cannot run NCCL, as a sentence; "" when it can.
std::string nccl_problem(const gpu::Census& census, int local_rank, int local_world_size);

// The error for an explicit backend "nccl" on a rank that cannot run it.
std::string nccl_refusal(int rank, int local_rank, const std::string& problem);

using dist::BackendChoice;

// What `auto` picks, given every rank's nccl_problem() (indexed by rank): NCCL only when all of
// them can run it, because every rank of a group must use the same backend.
BackendChoice choose_auto(const std::vector<std::string>& problems_by_rank);

}  // namespace dist::backends
