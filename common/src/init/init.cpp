// init_process_group and friends (dist/init.h): the default group and its registry.
//
// Initialisation has three steps, each in a file of its own:
//   1. resolve this rank's settings, and
//   2. meet the other ranks in a key-value store (rendezvous.h);
//   3. connect the backend, Gloo or NCCL (backends/factory.h).
// This file strings them together, keeps the one default group of the process, and forwards the
// free functions of dist/init.h to it.
#include "dist/init.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <numeric>

#include "backends/factory.h"
#include "base/log_identity.h"
#include "dist/check.h"
#include "dist/flight_recorder.h"
#include "dist/log.h"
#include "dist/store.h"
#include "group/debug_group.h"
#include "rendezvous.h"
#include "util/text.h"

namespace dist {
namespace {

using Clock = std::chrono::steady_clock;

struct Group {
  std::shared_ptr<Store> base;         // TCPStore or FileStore
  std::shared_ptr<PrefixStore> store;  // this group generation's key space
  std::unique_ptr<ProcessGroup> pg;
  // What get_dist_info() reports (the backend every rank agreed on), and how this rank met the
  // others, for new_group().
  rendezvous::Settings info;
  std::uint64_t session = 0;            // the store's session, for new_group()
  int next_subgroup = 0;                // new_group() calls so far: every rank counts the same
  int next_monitored = 0;               // monitored_barrier() calls so far
  DebugLevel debug = DebugLevel::kOff;  // DIST_DEBUG, read once by init
};

std::mutex g_mu;
// Deliberately never deleted at exit: a program that forgets destroy_process_group() must not
// tear down the backend's threads during static destruction, where their order is undefined.
Group* g_group = nullptr;
std::uint64_t g_generation = 0;

Group& current() {
  if (g_group == nullptr) {
    throw Error(
        "the default process group has not been initialized: call "
        "dist::init_process_group() first");
  }
  return *g_group;
}

// What the factory needs to connect a group of the default group's ranks.
backends::GroupSpec group_spec(const rendezvous::Settings& s, std::string backend,
                               std::chrono::milliseconds timeout,
                               std::chrono::milliseconds connect_timeout, DebugLevel debug) {
  return {.backend = std::move(backend),
          .rank = s.rank,
          .world_size = s.world_size,
          .local_rank = s.local_rank,
          .rank0_address = s.url.scheme == "file" ? "" : s.master_addr,
          .timeout = timeout,
          .connect_timeout = connect_timeout,
          .debug = debug};
}

// Rank 0 hosts a TCP store: it keeps serving until the other ranks have let go of it (and, with
// `at_least`, until that many ranks have come at all), or until `deadline`.
void keep_store_up(Store& base, Clock::time_point deadline, int at_least = 0) {
  if (auto* tcp = dynamic_cast<TCPStore*>(&base))
    tcp->wait_for_clients_to_leave(deadline, at_least);
}

}  // namespace

void init_process_group(const InitOptions& options) {
  std::lock_guard lock(g_mu);
  if (g_group != nullptr) {
    throw Error(
        "init_process_group was called twice: the default process group is already "
        "initialized; call dist::destroy_process_group() before initializing again");
  }
  // ---- Step 1: resolve
  const rendezvous::Settings s = rendezvous::resolve(options, read_launch_env());
  const auto deadline = Clock::now() + options.timeout;
  // Counted only when init succeeds, so every rank that gets past init agrees on the number.
  const std::uint64_t generation = g_generation;
  auto group = std::make_unique<Group>();
  group->debug = debug_level_from_env();  // a bad value stops us before we connect anywhere
  // DIST_TRACE_DIR: from now on this rank's collectives are recorded (dist/flight_recorder.h).
  flight::install_from_environment(s.rank, s.world_size);
  group->session = rendezvous::session_id(options.group_name, generation);
  backends::prepare_process();
  group->base = rendezvous::open_store(s, group->session, options.timeout);
  set_log_identity(s.rank, s.world_size);
  try {
    // ---- Step 2: meet, and agree on the backend
    group->store = std::make_shared<PrefixStore>(
        options.group_name + "/" + std::to_string(generation), group->base);
    rendezvous::meet(*group->store, s, deadline);
    const backends::BackendChoice choice = rendezvous::agree_on_backend(*group->store, s);
    if (s.backend == "auto")
      out0() << "backend auto chose " << choice.backend << ": " << choice.reason;

    // ---- Step 3: connect, in whatever is left of the timeout
    const auto left =
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                 std::chrono::milliseconds(1));
    group->pg = backends::make_process_group(
        group_spec(s, choice.backend, options.timeout, left, group->debug), group->store);
  } catch (...) {
    clear_log_identity();
    // Rank 0 hosts the store: give the other ranks a moment to read why the job cannot start
    // (the "conflict" key) before its process, and the store with it, goes away.
    keep_store_up(
        *group->base,
        Clock::now() + std::min<Clock::duration>(options.timeout, std::chrono::seconds(3)),
        s.world_size);
    throw;
  }
  group->info = s;  // what resolve() found, now with the backend every rank agreed on
  group->info.initialized = true;
  group->info.backend = group->pg->backend();
  g_group = group.release();
  ++g_generation;
}

bool is_initialized() {
  std::lock_guard lock(g_mu);
  return g_group != nullptr;
}

void destroy_process_group() {
  std::unique_ptr<Group> group;
  {
    std::lock_guard lock(g_mu);
    group.reset(&current());
    g_group = nullptr;
  }
  clear_log_identity();
  const auto timeout = group->pg->timeout();
  group->pg.reset();  // closes the backend's connections first
  group->store.reset();
  // Keep serving until the other ranks have let go of the store, so none of them loses it
  // halfway through its own teardown or re-initialisation.
  keep_store_up(*group->base, Clock::now() + timeout);
}

namespace {

// What new_group(ranks) returns on a rank that is not one of `ranks`: a group with no
// connections whose every call is refused (ProcessGroup::check_member) before it reaches these.
class NonMemberGroup final : public ProcessGroup {
 public:
  NonMemberGroup(int size, std::string backend, std::chrono::milliseconds timeout)
      : ProcessGroup(-1, size, std::move(backend), timeout) {}

 protected:
  [[noreturn]] static void unreachable() {
    throw Error("internal error: a call reached a group this rank is not in");
  }
  void do_all_reduce(Tensor&, ReduceOp) override { unreachable(); }
  void do_broadcast(Tensor&, int) override { unreachable(); }
  void do_barrier() override { unreachable(); }
  void do_all_gather(std::vector<Tensor>&, const Tensor&) override { unreachable(); }
  void do_reduce_scatter(Tensor&, const std::vector<Tensor>&, ReduceOp) override { unreachable(); }
  void do_all_gather_into_tensor(Tensor&, const Tensor&) override { unreachable(); }
  void do_reduce_scatter_tensor(Tensor&, const Tensor&, ReduceOp) override { unreachable(); }
  void do_gather(const Tensor&, std::vector<Tensor>*, int) override { unreachable(); }
  void do_scatter(Tensor&, const std::vector<Tensor>*, int) override { unreachable(); }
  std::vector<std::unique_ptr<Transfer>> do_batch_isend_irecv(const std::vector<P2POp>&,
                                                              bool) override {
    unreachable();
  }
  void close() noexcept override {}
};

// "[0, 2]", as the ranks were passed to new_group.
std::string rank_list(const std::vector<int>& ranks) {
  return "[" + util::rank_list(ranks) + "]";
}

// The ranks as torch's new_group takes them: each a rank of the default group, none twice; sorted,
// as torch sorts them, so that group rank i is the i-th smallest.
std::vector<int> checked_ranks(std::vector<int> ranks, int world_size) {
  if (ranks.empty()) {
    throw ConfigError(
        "new_group(ranks) needs at least one rank (new_group() makes a group of all "
        "ranks)");
  }
  for (int r : ranks) {
    if (r < 0 || r >= world_size) {
      throw ConfigError("new_group(" + rank_list(ranks) + "): rank " + std::to_string(r) +
                        " is not a rank of the default group, whose ranks are 0 to " +
                        std::to_string(world_size - 1));
    }
  }
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  const auto twice = std::adjacent_find(sorted.begin(), sorted.end());
  if (twice != sorted.end()) {
    throw ConfigError("new_group(" + rank_list(ranks) + "): rank " + std::to_string(*twice) +
                      " is named twice; a rank is in a group once");
  }
  return sorted;
}

// Every member says which ranks it asked for, under its global rank, and reads the others': a
// rank that made its new_group calls in another order, or with other ranks, is named at once
// instead of leaving the others waiting to connect until the timeout.
void agree_on_members(Store& space, const std::vector<int>& ranks, int global_rank, int call,
                      std::chrono::milliseconds timeout) {
  const std::string mine = rank_list(ranks);
  space.set("members/" + std::to_string(global_rank), mine);
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back("members/" + std::to_string(r));
  try {
    space.wait(keys, timeout);
  } catch (const TimeoutError&) {
    std::vector<int> missing;
    for (int r : ranks) {
      if (!space.check({"members/" + std::to_string(r)})) missing.push_back(r);
    }
    throw TimeoutError("new_group call #" + std::to_string(call + 1) + " " + mine + " on rank " +
                       std::to_string(global_rank) + ": " + util::ranks_phrase(missing) +
                       " did not make this call within " + util::seconds(timeout) +
                       "; every rank of the default group must call new_group the same number "
                       "of times, in the same order");
  }
  for (int r : ranks) {
    const std::string theirs = space.get("members/" + std::to_string(r));
    if (theirs != mine) {
      throw ConfigError("new_group call #" + std::to_string(call + 1) + ": rank " +
                        std::to_string(global_rank) + " asked for ranks " + mine + ", rank " +
                        std::to_string(r) + " for ranks " + theirs +
                        "; every rank must call new_group with the same ranks, in the same order");
    }
  }
}

}  // namespace

std::unique_ptr<ProcessGroup> new_group() {
  std::vector<int> all(static_cast<std::size_t>(get_world_size()));
  std::iota(all.begin(), all.end(), 0);
  return new_group(all);
}

std::unique_ptr<ProcessGroup> new_group(const std::vector<int>& requested) {
  backends::GroupSpec spec;
  rendezvous::Settings settings;
  std::uint64_t session = 0;
  std::shared_ptr<Store> base;
  std::string key_space;
  int call = 0;
  {
    std::lock_guard lock(g_mu);
    Group& g = current();
    const auto timeout = g.pg->timeout();
    spec = group_spec(g.info, g.info.backend, timeout, timeout, g.debug);
    settings = g.info;
    session = g.session;
    base = g.base;
    // Counted on every rank, member or not, as torch counts its groups: the same rendezvous
    // store, under a key space of this call's own, so the new group's connections never meet
    // another group's.
    call = g.next_subgroup++;
    key_space = g.store->prefix() + "/subgroup/" + std::to_string(call);
  }
  const std::vector<int> ranks = checked_ranks(requested, settings.world_size);
  const int global_rank = settings.rank;
  const auto me = std::find(ranks.begin(), ranks.end(), global_rank);
  if (me == ranks.end()) {
    auto group = std::make_unique<NonMemberGroup>(static_cast<int>(ranks.size()), spec.backend,
                                                  spec.timeout);
    detail::set_group_ranks(*group, ranks, global_rank);
    return group;
  }
  spec.rank = static_cast<int>(me - ranks.begin());
  spec.world_size = static_cast<int>(ranks.size());
  // With DIST_DEBUG=DETAIL the new group meets in the store before every call, often on a thread
  // of its own (DDP's): a connection of its own, so that its waits never queue behind the default
  // group's on one connection (rank 0's and rank 1's threads would then wait for each other).
  if (spec.debug == DebugLevel::kDetail) {
    base = rendezvous::open_store(settings, session, spec.timeout, /*another_connection=*/true);
  }
  auto space = std::make_shared<PrefixStore>(key_space, base);
  agree_on_members(*space, ranks, global_rank, call, spec.connect_timeout);
  auto group = backends::make_process_group(spec, space);
  detail::set_group_ranks(*group, ranks, global_rank);
  return group;
}

// ---- Who this rank is ---------------------------------------------------------------------------

int get_rank() {
  std::lock_guard lock(g_mu);
  return current().info.rank;
}

int get_world_size() {
  std::lock_guard lock(g_mu);
  return current().info.world_size;
}

int get_local_rank() {
  {
    std::lock_guard lock(g_mu);
    if (g_group != nullptr) return g_group->info.local_rank;
  }
  return read_launch_env().local_rank.value_or(0);
}

std::string get_backend() {
  std::lock_guard lock(g_mu);
  return current().info.backend;
}

Device get_device() {
  std::lock_guard lock(g_mu);
  const DistInfo& info = current().info;
  return info.backend == "nccl" ? Device::cuda(info.local_rank) : Device::cpu();
}

DistInfo get_dist_info() {
  std::lock_guard lock(g_mu);
  return g_group != nullptr ? g_group->info : DistInfo{};
}

ProcessGroup& default_group() {
  std::lock_guard lock(g_mu);
  return *current().pg;
}

// ---- The collectives on the default group
// --------------------------------------------------------

void all_reduce(Tensor& tensor, ReduceOp op) {
  default_group().all_reduce(tensor, op);
}
void broadcast(Tensor& tensor, int src) {
  default_group().broadcast(tensor, src);
}
void barrier() {
  default_group().barrier();
}
void monitored_barrier(std::chrono::milliseconds timeout) {
  Store::checked_timeout(timeout);
  std::shared_ptr<PrefixStore> store;
  int rank = 0, world = 1, call = 0;
  {
    std::lock_guard lock(g_mu);
    Group& g = current();
    store = g.store;
    rank = g.info.rank;
    world = g.info.world_size;
    call = ++g.next_monitored;
  }
  monitored_barrier(*store, rank, world, call, timeout);
}
void all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  default_group().all_gather(outputs, input);
}
void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) {
  default_group().reduce_scatter(output, inputs, op);
}
void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) {
  default_group().gather(input, outputs, dst);
}
void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) {
  default_group().scatter(output, inputs, src);
}
void send(const Tensor& tensor, int dst, int tag) {
  default_group().send(tensor, dst, tag);
}
void recv(Tensor& tensor, int src, int tag) {
  default_group().recv(tensor, src, tag);
}

Work isend(const Tensor& tensor, int dst, int tag) {
  return default_group().isend(tensor, dst, tag);
}
Work irecv(Tensor& tensor, int src, int tag) {
  return default_group().irecv(tensor, src, tag);
}
std::vector<Work> batch_isend_irecv(const std::vector<P2POp>& ops) {
  return default_group().batch_isend_irecv(ops);
}
Work all_reduce(Tensor& tensor, ReduceOp op, CallOptions options) {
  return default_group().all_reduce(tensor, op, options);
}
Work broadcast(Tensor& tensor, int src, CallOptions options) {
  return default_group().broadcast(tensor, src, options);
}
Work barrier(CallOptions options) {
  return default_group().barrier(options);
}
Work all_gather(std::vector<Tensor>& outputs, const Tensor& input, CallOptions options) {
  return default_group().all_gather(outputs, input, options);
}
Work reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op,
                    CallOptions options) {
  return default_group().reduce_scatter(output, inputs, op, options);
}

}  // namespace dist
