// How the ranks of a job find each other (internal): the first two steps of init_process_group,
// the part torch keeps in torch/distributed/rendezvous.py.
//
//   1. resolve: work out this rank's place in the job and how to meet, from explicit arguments,
//      the init_method URL's query and the environment (in that order of precedence),
//      validating every value;
//   2. meet: every rank joins a key-value store (rank 0 hosts it for env:// and tcp://) and waits
//      until all world_size ranks have announced themselves, so a missing rank is reported by
//      number instead of surfacing later as a hang inside the backend. The ranks also agree on
//      world_size and the backend there.
// The third step, connecting the backend, is backends/factory.h's.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backends/choice.h"
#include "dist/env.h"
#include "dist/init_options.h"
#include "dist/store.h"

namespace dist::rendezvous {

using Clock = std::chrono::steady_clock;

// init_method, parsed. "" means env://.
struct Url {
  std::string scheme;  // "env", "tcp" or "file"
  std::string host;    // tcp
  int port = 0;        // tcp
  std::string path;    // file
  std::map<std::string, std::string> query;
};
Url parse_url(const std::string& text);

// Everything resolve() worked out for this rank: what get_dist_info() will report once the
// group is up (with `backend` as asked: gloo, nccl or auto, and `initialized` false), and how to
// meet.
struct Settings : DistInfo {
  Url url;
  std::string rank_source;   // for messages: "the rank argument", "RANK", ...
  std::string nccl_problem;  // why this rank cannot run NCCL; "" when it can

  // "127.0.0.1:29500" or "file:///tmp/x": where the ranks meet, for messages.
  std::string where() const;
};

// Step 1. Throws dist::ConfigError naming the first bad or missing value.
//
// LOCAL_RANK, when no launcher sets it: torch programs read os.environ["LOCAL_RANK"], which
// raises. Here the rank stands in for it only where that is certainly right, on one machine: no
// machine index above 0 (GROUP_RANK, SLURM_NODEID) and no more ranks than one machine runs
// (LOCAL_WORLD_SIZE). Otherwise two machines would both drive GPU 0.. and read each other's
// data directories (chapter 10's "RANK for LOCAL_RANK"), so it is a ConfigError naming LOCAL_RANK.
Settings resolve(const InitOptions& options, const LaunchEnv& env);

// The same 64-bit value on every rank of one group generation: the store's session, so a rank
// that starts again early never joins the previous generation's store.
std::uint64_t session_id(const std::string& group_name, std::uint64_t generation);

// The store the ranks meet in: a TCPStore (rank 0 hosts it) or a FileStore. With
// `another_connection`, a second connection to the same store (rank 0 hosts nothing more): for a
// group whose calls run on another thread, so that its store waits never queue behind the
// default group's on one connection.
std::shared_ptr<Store> open_store(const Settings& s, std::uint64_t session,
                                  std::chrono::milliseconds timeout,
                                  bool another_connection = false);

// Step 2. Returns once all world_size ranks have announced themselves; throws dist::ConfigError
// when two processes claim one rank or the ranks disagree (every rank learns of it through the
// store), and dist::TimeoutError naming the missing ranks at `deadline`.
void meet(Store& store, const Settings& s, Clock::time_point deadline);

// The backend every rank will use: the one asked for, or for "auto" NCCL only if every rank can
// run it (each rank published why not during meet()), so that all ranks pick the same.
backends::BackendChoice agree_on_backend(Store& store, const Settings& s);

}  // namespace dist::rendezvous
