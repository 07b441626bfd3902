// How the ranks of one NCCL communicator agree on its unique id (internal).
//
// NCCL's ranks find each other through a 128-byte ncclUniqueId that one rank creates
// (ncclGetUniqueId: it opens a bootstrap socket and encodes its address) and every other rank
// must receive before it can call ncclCommInitRank. NCCL does not say how to ship it; like
// torch, we use the group's store: rank 0 writes it under one key, the others wait for that key.
// Every group (the default group, each new_group()) has a key space of its own in the store, so
// no communicator ever reads another one's id. Nothing here needs CUDA, so it is tested on every
// machine.
#pragma once

#include <array>
#include <functional>

#include "dist/store.h"

namespace dist::backends {

inline constexpr std::size_t kNcclUniqueIdBytes = 128;  // NCCL_UNIQUE_ID_BYTES
using NcclUniqueId = std::array<char, kNcclUniqueIdBytes>;

// The store key the id is published under, in the group's own key space.
inline constexpr const char* kUniqueIdKey = "nccl/unique_id";

// Rank 0 calls `make` and publishes its id under kUniqueIdKey; every other rank waits for the
// key (up to the store's timeout) and returns what rank 0 published. Throws dist::TimeoutError
// naming rank 0 if it never publishes, and dist::Error if the value is not an id.
NcclUniqueId share_unique_id(Store& store, int rank, const std::function<NcclUniqueId()>& make);

}  // namespace dist::backends
