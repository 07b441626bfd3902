// The Gloo backend's factory (internal). backends/factory.cpp calls it once the ranks have met in
// the store and agreed on Gloo.
//
// What a Gloo group sends (ProcessGroup::bytes_sent): all_reduce, all_gather and reduce_scatter
// run on the backend's mesh, which says what it sends (gloo_mesh.h). The others are Gloo's own
// algorithms, counted by their formulas: broadcast is a binomial tree (gloo/broadcast.cc: the
// source sends the tensor to each of its ceil(log2 W) children, an inner rank to each of its own,
// a leaf to none; W-1 sends in all); gather sends the tensor to the destination; scatter's
// source sends each other rank its piece; send and isend send the tensor, and a header of
// ProcessGroup::kP2PHeaderBytes, counted in header_bytes_sent().
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/process_group.h"
#include "dist/store.h"

namespace dist::backends {

struct GlooOptions {
  std::chrono::milliseconds timeout{};          // for every collective
  std::chrono::milliseconds connect_timeout{};  // for connecting, what is left of init's timeout
  std::string hostname;                         // the address other ranks reach this one at
  std::string iface;  // or a network interface name (DIST_IFNAME); wins over hostname
};

// Connects a full mesh of TCP pairs between all ranks, exchanging addresses through `store`.
std::unique_ptr<ProcessGroup> make_gloo_group(int rank, int size, Store& store,
                                              const GlooOptions& options);

}  // namespace dist::backends
