// DIST_DEBUG=DETAIL: a ProcessGroup that checks every collective before it runs (internal).
//
// Like torch's TORCH_DISTRIBUTED_DEBUG=DETAIL, each rank publishes a fingerprint of each
// collective it is about to make (its number in the group, the op, the reduce op, dtype, sizes,
// device and root rank) in the store, and waits for every rank's. Ranks whose calls differ all
// stop, with an error that shows each rank's call; a rank that never makes the call is named once
// the group's timeout passes. Unlike torch's check, the reduce op is part of the fingerprint: an
// all_reduce with SUM on one rank and MAX on another is caught too. Point-to-point send and recv
// are not collectives and pass through unchecked. The store round trips make every collective
// slower: a mode for finding a bug, not for training.
#pragma once

#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/store.h"

namespace dist {

enum class DebugLevel { kOff, kDetail };

// DIST_DEBUG: unset, "", OFF or DETAIL (any case). Anything else is a ConfigError naming it.
DebugLevel debug_level_from_env();

// Wraps `inner`; `store` is a key space of this group's own, shared by every rank.
std::unique_ptr<ProcessGroup> make_debug_group(std::unique_ptr<ProcessGroup> inner,
                                               std::shared_ptr<Store> store);

}  // namespace dist
