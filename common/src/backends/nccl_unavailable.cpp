// The NCCL backend in a build without the GPU path (every preset but cuda). The rendezvous
// refuses backend nccl before it gets here (rendezvous.cpp, meet()); this keeps the message right
// for any other caller.
#include "backends/choice.h"
#include "backends/nccl.h"
#include "dist/check.h"

namespace dist::backends {

std::unique_ptr<ProcessGroup> make_nccl_group(int rank, int, Store&, const NcclOptions& options) {
  throw ConfigError(nccl_refusal(rank, options.device, gpu::no_gpu_reason(gpu::census())));
}

}  // namespace dist::backends
