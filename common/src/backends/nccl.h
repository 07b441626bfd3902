// The NCCL backend's factory (internal). backends/factory.cpp calls it once the ranks have met in
// the store and agreed on NCCL; only the cuda preset builds the real one (nccl.cpp). Without it,
// nccl_unavailable.cpp explains how to get it.
//
// What an NCCL group sends (ProcessGroup::bytes_sent): NCCL picks its own algorithms (rings,
// trees) and says nothing of what moved, so the counts are nominal, those of a ring in rank order:
// all_reduce 2*(W-1)*bytes/W (rounded down), all_gather and reduce_scatter (W-1) times one rank's
// part, broadcast the tensor once on every rank but the one before the source, and gather,
// scatter and send exactly. Its collectives send no header; every point-to-point message (send,
// isend) sends one of ProcessGroup::kP2PHeaderBytes (header_bytes_sent).
#pragma once

#include <chrono>
#include <memory>

#include "dist/process_group.h"
#include "dist/store.h"

namespace dist::backends {

struct NcclOptions {
  int device = 0;                               // the GPU this rank drives: its LOCAL_RANK
  std::chrono::milliseconds timeout{};          // for every collective; the watchdog's limit
  std::chrono::milliseconds connect_timeout{};  // for creating the communicator
};

// Creates this rank's NCCL communicator on GPU `options.device`, with the unique id shared
// through `store`, and returns the group once every rank is connected.
std::unique_ptr<ProcessGroup> make_nccl_group(int rank, int size, Store& store,
                                              const NcclOptions& options);

}  // namespace dist::backends
