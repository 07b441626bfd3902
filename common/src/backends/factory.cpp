// Building a process group (see factory.h).
#include "backends/factory.h"

#include <net/if.h>

#include <csignal>
#include <exception>

#include "backends/gloo.h"
#include "backends/nccl.h"
#include "base/net.h"
#include "dist/check.h"
#include "dist/env.h"
#include "dist/log.h"

namespace dist::backends {
namespace {

// Gloo checks what it receives on its own network thread, where nobody can catch: a peer that
// sent a different number of bytes (ranks that called a collective with different sizes or
// dtypes) ends in std::terminate. Say so with the rank, instead of a bare "terminate called".
[[noreturn]] void report_fatal() {
  std::string what = "an unknown exception";
  try {
    if (auto e = std::current_exception()) std::rethrow_exception(e);
    what = "std::terminate without an exception";
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  const std::string prefix = rank_prefix();
  write_stderr(prefix + "fatal: " + what + "\n" + prefix +
               "hint: if a peer's message did not match, the ranks called a collective with "
               "different sizes, dtypes or order; every rank must make the same calls\n");
  std::abort();
}

GlooOptions gloo_options(const GroupSpec& spec) {
  GlooOptions g;
  g.timeout = spec.timeout;
  g.connect_timeout = spec.connect_timeout;
  for (const char* var : {"DIST_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    if (auto name = env_value(var)) {
      if (::if_nametoindex(name->c_str()) == 0) {
        throw ConfigError(std::string(var) + "=" + *name +
                          " is not a network interface of this machine: list them with "
                          "`ip -brief address`, or unset it to use the one that routes to rank 0");
      }
      g.iface = *name;
      break;
    }
  }
  // The interface that routes to rank 0 is the one the other ranks can reach us on.
  g.hostname =
      spec.rank0_address.empty() ? "127.0.0.1" : net::local_address_towards(spec.rank0_address);
  return g;
}

}  // namespace

void prepare_process() {
  std::signal(SIGPIPE, SIG_IGN);
  std::set_terminate(report_fatal);
}

std::unique_ptr<ProcessGroup> make_process_group(const GroupSpec& spec,
                                                 const std::shared_ptr<Store>& space) {
  PrefixStore connect_store(spec.backend, space);
  connect_store.set_timeout(spec.connect_timeout);
  std::unique_ptr<ProcessGroup> group;
  if (spec.backend == "nccl") {
    NcclOptions nccl;
    nccl.device = spec.local_rank;
    nccl.timeout = spec.timeout;
    nccl.connect_timeout = spec.connect_timeout;
    group = make_nccl_group(spec.rank, spec.world_size, connect_store, nccl);
  } else {
    group = make_gloo_group(spec.rank, spec.world_size, connect_store, gloo_options(spec));
  }
  if (spec.debug == DebugLevel::kDetail) {
    group->set_call_checker(make_call_checker(spec.rank, spec.world_size, spec.timeout,
                                              std::make_shared<PrefixStore>("debug", space)));
  }
  return group;
}

}  // namespace dist::backends
