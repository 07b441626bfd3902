// The debugging aids of a process group (internal): DIST_DEBUG=DETAIL's check of every
// collective, and monitored_barrier. Both meet through the store, not the backend, so they work
// when the backend's own calls are the thing that is broken.
//
// DIST_DEBUG=DETAIL: like torch's TORCH_DISTRIBUTED_DEBUG=DETAIL, each rank publishes a
// fingerprint of each collective it is about to make (its number in the group, the op, the
// reduce op, dtype, sizes, device and root rank) in the store, and waits for every rank's. Ranks
// whose calls differ all stop, with an error that shows each rank's call; a rank that never makes
// the call is named once the group's timeout passes. Unlike torch's check, the reduce op is part
// of the fingerprint: an all_reduce with SUM on one rank and MAX on another is caught too.
// Point-to-point send and recv are not collectives and pass unchecked. The store round trips
// make every collective slower: a mode for finding a bug, not for training.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/store.h"

namespace dist {

enum class DebugLevel { kOff, kDetail };

// DIST_DEBUG: unset, "", OFF or DETAIL (any case). Anything else is a ConfigError naming it.
DebugLevel debug_level_from_env();

// The DETAIL check for one group (ProcessGroup::set_call_checker). `store` is a key space of the
// group's own, shared by every rank; `timeout` is how long to wait for the other ranks' calls.
std::unique_ptr<ProcessGroup::CallChecker> make_call_checker(int rank, int size,
                                                             std::chrono::milliseconds timeout,
                                                             std::shared_ptr<Store> store);

// dist::monitored_barrier (dist/init.h) for call number `call` of a group, through `store` (the
// group's key space).
void monitored_barrier(Store& store, int rank, int world_size, int call,
                       std::chrono::milliseconds timeout);

}  // namespace dist
