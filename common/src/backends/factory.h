// The one place that turns an agreed backend and a store into a ProcessGroup (internal): the
// third step of init_process_group, and all of new_group(). torch's _new_process_group_helper
// has this job.
//
// It sets up what the process needs (a SIGPIPE that cannot kill a rank, and a terminate handler
// that names the rank), builds the Gloo or NCCL group with its options, and adds the
// DIST_DEBUG=DETAIL check when asked for.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/store.h"
#include "group/debug_group.h"

namespace dist::backends {

struct GroupSpec {
  std::string backend;  // "gloo" or "nccl", agreed by every rank
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // NCCL drives GPU cuda:local_rank
  // Rank 0's address: Gloo listens on this machine's address that routes there (DIST_IFNAME or
  // GLOO_SOCKET_IFNAME choose an interface instead). Empty: loopback (file://, one machine).
  std::string rank0_address;
  std::chrono::milliseconds timeout{};          // for every collective
  std::chrono::milliseconds connect_timeout{};  // for connecting
  DebugLevel debug = DebugLevel::kOff;
};

// What the process needs before anything connects: SIGPIPE ignored (Gloo writes to sockets
// without MSG_NOSIGNAL, and a write to a dead peer must surface as an error, not kill the rank)
// and a terminate handler that names the rank. init_process_group calls it first, once per init;
// new_group() does not, so a handler the program installs after init stays.
void prepare_process();

// Connects this rank's group through `space`, a key space of the group's own in the rendezvous
// store (the backend's connections and the DETAIL check each take a prefix of it). A collective:
// every rank of the group calls it with the same backend.
std::unique_ptr<ProcessGroup> make_process_group(const GroupSpec& spec,
                                                 const std::shared_ptr<Store>& space);

}  // namespace dist::backends
