// init_process_group and friends (dist/init.h).
//
// Initialisation has three parts, in this order:
//   1. resolve: work out rank, world_size and how to meet, from explicit arguments, the URL's
//      query and the environment (in that order of precedence), validating every value;
//   2. meet: every rank joins a key-value store (rank 0 hosts it for env:// and tcp://) and waits
//      until all world_size ranks have announced themselves, so a missing rank is reported by
//      number instead of surfacing later as a hang inside the backend;
//   3. connect: the backend (Gloo, or NCCL on GPUs) exchanges its addresses through the store and
//      connects.
#include "dist/init.h"

#include <net/if.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <exception>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "backends/choice.h"
#include "backends/common.h"
#include "backends/gloo.h"
#include "backends/nccl.h"
#include "debug_group.h"
#include "dist/check.h"
#include "dist/env.h"
#include "dist/log.h"
#include "dist/store.h"
#include "net.h"

namespace dist {
namespace {

using Clock = std::chrono::steady_clock;

// ---- Step 1: resolve ------------------------------------------------------------------------

struct Url {
  std::string scheme;  // "env", "tcp" or "file"
  std::string host;    // tcp
  int port = 0;        // tcp
  std::string path;    // file
  std::map<std::string, std::string> query;
};

Url parse_url(const std::string& text) {
  const std::string url = text.empty() ? "env://" : text;
  const auto sep = url.find("://");
  const std::string usage = "init_method \"" + url + "\"";
  if (sep == std::string::npos) {
    throw ConfigError(usage + " is not a URL: use env://, tcp://HOST:PORT or file:///PATH");
  }
  Url u;
  u.scheme = url.substr(0, sep);
  std::string rest = url.substr(sep + 3);
  if (const auto q = rest.find('?'); q != std::string::npos) {
    std::string query = rest.substr(q + 1);
    rest.resize(q);
    std::size_t pos = 0;
    while (pos <= query.size() && !query.empty()) {
      const auto amp = std::min(query.find('&', pos), query.size());
      const std::string item = query.substr(pos, amp - pos);
      const auto eq = item.find('=');
      const std::string key = item.substr(0, eq);
      if (key != "rank" && key != "world_size") {
        throw ConfigError(usage + " has an unknown query parameter \"" + key +
                          "\": only rank and world_size are understood");
      }
      if (eq == std::string::npos)
        throw ConfigError(usage + ": query parameter " + key + " has no value");
      u.query[key] = item.substr(eq + 1);
      pos = amp + 1;
    }
  }
  if (u.scheme == "env") {
    if (!rest.empty())
      throw ConfigError(usage + ": env:// takes no address; it reads MASTER_ADDR and MASTER_PORT");
  } else if (u.scheme == "tcp") {
    // tcp://host:port, with [v6::addr]:port for IPv6.
    std::string port_text;
    if (!rest.empty() && rest.front() == '[') {
      const auto close = rest.find(']');
      if (close == std::string::npos || rest.size() < close + 2 || rest[close + 1] != ':') {
        throw ConfigError(usage + ": expected tcp://[IPv6]:PORT");
      }
      u.host = rest.substr(1, close - 1);
      port_text = rest.substr(close + 2);
    } else {
      const auto colon = rest.rfind(':');
      if (colon == std::string::npos || colon == 0) {
        throw ConfigError(usage + ": expected tcp://HOST:PORT, e.g. tcp://127.0.0.1:29500");
      }
      u.host = rest.substr(0, colon);
      port_text = rest.substr(colon + 1);
    }
    u.port = parse_int("the port in " + usage, port_text, 1, 65535);
  } else if (u.scheme == "file") {
    if (rest.empty() || rest.front() != '/') {
      throw ConfigError(usage + ": expected an absolute path, file:///tmp/my_job (three slashes)");
    }
    u.path = rest;
  } else {
    throw ConfigError(usage + " has an unknown scheme \"" + u.scheme +
                      "\": use env://, tcp://HOST:PORT or file:///PATH");
  }
  return u;
}

struct Resolved {
  Url url;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;
  int master_port = 0;
  std::string rank_source;   // for messages: "the argument", "the URL", "RANK", ...
  std::string resolved_url;  // env://, tcp://host:port or file:///path, without the query
  std::string backend;       // as asked: gloo, nccl or auto
  std::string nccl_problem;  // why this rank cannot run NCCL; "" when it can
};

std::string where(const Resolved& r);

// One value by precedence: the explicit argument, else the URL query, else the environment.
int pick(int explicit_value, int unset, const Url& url, const char* query_key,
         const std::optional<int>& env_value, const std::string& env_var, long long min,
         std::string& source) {
  if (explicit_value != unset) {
    if (explicit_value < min) {
      throw ConfigError(std::string(query_key) + "=" + std::to_string(explicit_value) +
                        " passed to init_process_group is out of range: it must be at least " +
                        std::to_string(min));
    }
    source = std::string("the ") + query_key + " argument";
    return explicit_value;
  }
  if (auto it = url.query.find(query_key); it != url.query.end()) {
    source = std::string("?") + query_key + "= in the init_method";
    return parse_int(source, it->second, min, 1 << 20);
  }
  if (env_value) {
    source = env_var;
    return *env_value;
  }
  throw ConfigError(std::string(query_key) + " is not set: pass it to init_process_group, add ?" +
                    query_key + "= to the init_method, or set " +
                    (std::string(query_key) == "rank" ? "RANK" : "WORLD_SIZE") +
                    " in the environment (ddprun and torchrun set it for you)");
}

// mpirun and srun give every rank its number but no meeting point: say how to pass one.
std::string rendezvous_hint(Launcher launcher) {
  switch (launcher) {
    case Launcher::kOpenMPI:
      return "; under mpirun, pass both to every rank: mpirun -x MASTER_ADDR=<rank 0's host> "
             "-x MASTER_PORT=29500 ...";
    case Launcher::kSlurm:
      return "; under Slurm, export both before srun, e.g. export MASTER_ADDR=$(scontrol show "
             "hostnames \"$SLURM_JOB_NODELIST\" | head -n 1) MASTER_PORT=29500";
    default:
      return "";
  }
}

Resolved resolve(const InitOptions& o) {
  if (o.backend != "gloo" && o.backend != "nccl" && o.backend != "auto") {
    throw ConfigError("unknown backend \"" + o.backend + "\": use gloo, nccl or auto");
  }
  Store::checked_timeout(o.timeout);
  Resolved r;
  r.url = parse_url(o.init_method);
  const LaunchEnv env = read_launch_env();
  std::string world_source;
  r.rank = pick(o.rank, -1, r.url, "rank", env.rank, env.rank_var, 0, r.rank_source);
  r.world_size = pick(o.world_size, -1, r.url, "world_size", env.world_size, env.world_size_var, 1,
                      world_source);
  if (r.rank >= r.world_size) {
    throw ConfigError("rank " + std::to_string(r.rank) + " (from " + r.rank_source +
                      ") is out of range for world_size " + std::to_string(r.world_size) +
                      " (from " + world_source + "): ranks are 0.." +
                      std::to_string(r.world_size - 1));
  }
  // Without a launcher's LOCAL_RANK we assume one machine, where local and global ranks agree.
  r.local_rank = env.local_rank.value_or(r.rank);
  r.local_world_size = env.local_world_size.value_or(r.world_size);
  if (r.url.scheme == "env") {
    if (!env.master_addr) {
      throw ConfigError(
          "MASTER_ADDR is not set: env:// needs the address of rank 0's machine, e.g. "
          "export MASTER_ADDR=127.0.0.1 (ddprun and torchrun set it for you)" +
          rendezvous_hint(env.launcher));
    }
    if (!env.master_port) {
      throw ConfigError(
          "MASTER_PORT is not set: env:// needs a free port on rank 0's machine, "
          "e.g. export MASTER_PORT=29500 (ddprun and torchrun set it for you)" +
          rendezvous_hint(env.launcher));
    }
    r.master_addr = *env.master_addr;
    r.master_port = *env.master_port;
  } else if (r.url.scheme == "tcp") {
    r.master_addr = r.url.host;
    r.master_port = r.url.port;
  }
  r.backend = o.backend;
  if (r.backend != "gloo") {
    r.nccl_problem = backends::nccl_problem(gpu::census(), r.local_rank, r.local_world_size);
  }
  r.resolved_url = r.url.scheme == "env"   ? "env://"
                   : r.url.scheme == "tcp" ? "tcp://" + where(r)
                                           : "file://" + r.url.path;
  return r;
}

// ---- Step 2: meet ---------------------------------------------------------------------------

// The same 64-bit value on every rank of one group generation (FNV-1a of name and number).
std::uint64_t session_id(const std::string& group_name, std::uint64_t generation) {
  std::uint64_t h = 1469598103934665603ull;
  for (char c : group_name + "/" + std::to_string(generation)) {
    h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  return h;
}

std::string join_list(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

std::string where(const Resolved& r) {
  return r.url.scheme == "file" ? "file://" + r.url.path
                                : r.master_addr + ":" + std::to_string(r.master_port);
}

// Every rank announces itself under "rank/<r>" and waits for all the others. A second process
// claiming the same rank, or disagreeing about world_size, is reported to every rank through the
// "conflict" key, so nobody waits out the full timeout for a job that cannot start.
void meet(Store& store, const Resolved& r, Clock::time_point deadline) {
  const std::string me = std::to_string(r.rank);
  auto conflict = [&](const std::string& message) {
    store.set("conflict", message);
    throw ConfigError(message);
  };
  if (store.add("claims/" + me, 1) > 1) {
    conflict(
        "two processes claim rank " + me + " at " + where(r) + ": give every process its own RANK" +
        (r.url.scheme == "file" ? ", or delete " + r.url.path + " left over from an earlier run"
                                : ""));
  }
  const std::string world = std::to_string(r.world_size);
  if (const std::string agreed = store.compare_set("world_size", "", world); agreed != world) {
    conflict("rank " + me + " has world_size " + world + " but an earlier rank said " + agreed +
             ": every rank must use the same WORLD_SIZE");
  }
  if (const std::string agreed = store.compare_set("backend", "", r.backend); agreed != r.backend) {
    conflict("rank " + me + " asked for backend " + r.backend + " but an earlier rank asked for " +
             agreed + ": every rank must use the same backend (--backend)");
  }
  // A rank that cannot run the backend asked for stops every rank, not just itself.
  if (r.backend == "nccl" && !r.nccl_problem.empty()) {
    conflict(backends::nccl_refusal(r.rank, r.local_rank, r.nccl_problem));
  }
  // For auto, each rank says what it can do before it announces itself; see choose_backend().
  if (r.backend == "auto") store.set("nccl_problem/" + me, r.nccl_problem);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  store.set("rank/" + me, std::string(host) + " pid " + std::to_string(::getpid()));

  std::vector<std::string> keys;
  for (int i = 0; i < r.world_size; ++i) keys.push_back("rank/" + std::to_string(i));
  // Wait in short slices: between them, look for a conflict and note who is still missing, so
  // the final message needs no store call (rank 0 may already have given up and left).
  std::vector<int> missing;
  for (;;) {
    const auto slice =
        std::min<Clock::duration>(deadline - Clock::now(), std::chrono::milliseconds(250));
    try {
      store.wait(keys, std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::max<Clock::duration>(slice, std::chrono::milliseconds(1))));
      return;
    } catch (const TimeoutError&) {
      if (store.check({"conflict"})) throw ConfigError(store.get("conflict"));
      missing.clear();
      for (int i = 0; i < r.world_size; ++i) {
        if (!store.check({keys[static_cast<std::size_t>(i)]})) missing.push_back(i);
      }
      if (Clock::now() < deadline) continue;
      throw TimeoutError(std::string(missing.size() == 1 ? "rank " : "ranks ") +
                         join_list(missing) + " of world_size " + world + " never joined at " +
                         where(r) + " before the timeout: start " +
                         (missing.size() == 1 ? "it" : "them") +
                         ", or check that every rank uses the same WORLD_SIZE and rendezvous "
                         "address (MASTER_ADDR/MASTER_PORT or init_method)");
    }
  }
}

// ---- Step 3: choose the backend and connect -------------------------------------------------

// gloo and nccl are what they say. auto picks NCCL only if every rank can run it (each rank
// published why not during meet(), before announcing itself), so all ranks pick the same.
backends::BackendChoice choose_backend(Store& store, const Resolved& r) {
  if (r.backend != "auto") return {r.backend, "asked for"};
  std::vector<std::string> problems;
  for (int i = 0; i < r.world_size; ++i)
    problems.push_back(store.get("nccl_problem/" + std::to_string(i)));
  return backends::choose_auto(problems);
}

// ---- The default group ----------------------------------------------------------------------

struct Group {
  std::shared_ptr<Store> base;         // TCPStore or FileStore
  std::shared_ptr<PrefixStore> store;  // this group generation's key space
  std::unique_ptr<ProcessGroup> pg;
  DistInfo info;
  Resolved resolved;                    // how init resolved this rank's settings, for new_group()
  int next_subgroup = 0;                // new_group() calls so far: every rank counts the same
  int next_monitored = 0;               // monitored_barrier() calls so far
  DebugLevel debug = DebugLevel::kOff;  // DIST_DEBUG, read once by init
};

std::mutex g_mu;
// Deliberately never deleted at exit: a program that forgets destroy_process_group() must not
// tear down the backend's threads during static destruction, where their order is undefined.
Group* g_group = nullptr;
std::uint64_t g_generation = 0;
// The identity report_fatal() prints, readable without the lock.
std::atomic<int> g_fatal_rank{0};
std::atomic<int> g_fatal_world{1};

Group& current() {
  if (g_group == nullptr) {
    throw Error(
        "the default process group has not been initialized: call "
        "dist::init_process_group() first");
  }
  return *g_group;
}

std::shared_ptr<Store> open_store(const Resolved& r, std::uint64_t session,
                                  std::chrono::milliseconds timeout) {
  if (r.url.scheme == "file") return std::make_shared<FileStore>(r.url.path, timeout);
  TCPStore::Options o;
  o.host = r.master_addr;
  o.port = r.master_port;
  o.is_server = r.rank == 0;
  o.timeout = timeout;
  o.session = session;
  o.token = env_value("DIST_STORE_TOKEN").value_or("");
  return std::make_shared<TCPStore>(o);
}

backends::GlooOptions gloo_options(const Resolved& r, std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds connect_timeout) {
  backends::GlooOptions g;
  g.timeout = timeout;
  g.connect_timeout = connect_timeout;
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
  g.hostname = r.url.scheme == "file" ? "127.0.0.1" : net::local_address_towards(r.master_addr);
  return g;
}

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
  // No rank_prefix() here: it takes g_mu, which this thread may already hold (inside init).
  const std::string prefix = "[rank " + std::to_string(g_fatal_rank.load()) + "/" +
                             std::to_string(g_fatal_world.load()) + "] ";
  write_stderr(prefix + "fatal: " + what + "\n" + prefix +
               "hint: if a peer's message did not match, the ranks called a collective with "
               "different sizes, dtypes or order; every rank must make the same calls\n");
  std::abort();
}

}  // namespace

void init_process_group(const InitOptions& options) {
  std::lock_guard lock(g_mu);
  if (g_group != nullptr) {
    throw Error(
        "init_process_group was called twice: the default process group is already "
        "initialized; call dist::destroy_process_group() before initializing again");
  }
  const Resolved r = resolve(options);
  const auto deadline = Clock::now() + options.timeout;
  // Counted only when init succeeds, so every rank that gets past init agrees on the number.
  const std::uint64_t generation = g_generation;

  // A dead peer must surface as an error from the backend, not kill us silently: Gloo writes to
  // sockets without MSG_NOSIGNAL, so a write to a closed connection would raise SIGPIPE.
  std::signal(SIGPIPE, SIG_IGN);
  g_fatal_rank = r.rank;
  g_fatal_world = r.world_size;
  std::set_terminate(report_fatal);

  auto group = std::make_unique<Group>();
  group->debug = debug_level_from_env();  // a bad value stops us before we connect anywhere
  group->base = open_store(r, session_id(options.group_name, generation), options.timeout);
  try {
    group->store = std::make_shared<PrefixStore>(
        options.group_name + "/" + std::to_string(generation), group->base);
    meet(*group->store, r, deadline);
    const backends::BackendChoice choice = choose_backend(*group->store, r);
    if (r.backend == "auto" && r.rank == 0) {
      // No out0() here: it takes g_mu, which init holds.
      write_stdout("[rank 0/" + std::to_string(r.world_size) + "] backend auto chose " +
                   choice.backend + ": " + choice.reason + "\n");
    }

    // The backend connects in whatever is left of the timeout.
    PrefixStore backend_store(choice.backend, group->store);
    const auto left =
        std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()),
                 std::chrono::milliseconds(1));
    backend_store.set_timeout(left);
    if (choice.backend == "nccl") {
      backends::NcclOptions nccl;
      nccl.device = r.local_rank;
      nccl.timeout = options.timeout;
      nccl.connect_timeout = left;
      group->pg = backends::make_nccl_group(r.rank, r.world_size, backend_store, nccl);
    } else {
      group->pg = backends::make_gloo_group(r.rank, r.world_size, backend_store,
                                            gloo_options(r, options.timeout, left));
    }
    if (group->debug == DebugLevel::kDetail) {
      group->pg = make_debug_group(std::move(group->pg),
                                   std::make_shared<PrefixStore>("debug", group->store));
    }
  } catch (const Error&) {
    // Rank 0 hosts the store: give the other ranks a moment to read why the job cannot start
    // (the "conflict" key) before its process, and the store with it, goes away.
    if (auto* tcp = dynamic_cast<TCPStore*>(group->base.get())) {
      tcp->wait_for_clients_to_leave(
          Clock::now() + std::min<Clock::duration>(options.timeout, std::chrono::seconds(3)),
          r.world_size);
    }
    throw;
  }

  group->info = DistInfo{
      true,          r.rank,        r.world_size,         r.local_rank,  r.local_world_size,
      r.master_addr, r.master_port, group->pg->backend(), r.resolved_url};
  group->resolved = r;
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
  const auto timeout = group->pg->timeout();
  group->pg.reset();  // closes the backend's connections first
  group->store.reset();
  // Rank 0 hosts the TCP store: keep serving until the other ranks have let go of it, so none of
  // them loses the store halfway through its own teardown or re-initialisation.
  if (auto* tcp = dynamic_cast<TCPStore*>(group->base.get())) {
    tcp->wait_for_clients_to_leave(Clock::now() + timeout);
  }
}

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

void all_reduce(Tensor& tensor, ReduceOp op) {
  default_group().all_reduce(tensor, op);
}
void broadcast(Tensor& tensor, int src) {
  default_group().broadcast(tensor, src);
}
void barrier() {
  default_group().barrier();
}
void all_gather(std::vector<Tensor>& outputs, const Tensor& input) {
  default_group().all_gather(outputs, input);
}

void monitored_barrier(std::chrono::milliseconds timeout) {
  timeout = Store::checked_timeout(timeout);
  const auto verdict_wait = std::min<std::chrono::milliseconds>(2 * timeout, kMaxTimeout);
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
  const std::string name = "monitored_barrier #" + std::to_string(call);
  const std::string prefix = "monitored_barrier/" + std::to_string(call) + "/";
  const auto arrived = [&](int r) { return prefix + std::to_string(r); };
  const std::string verdict_key = prefix + "verdict";
  std::string verdict;
  if (rank == 0) {
    const auto deadline = Clock::now() + timeout;
    std::vector<int> missing;
    for (int r = 1; r < world; ++r) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() > 0) {
        try {
          store->wait({arrived(r)}, left);
          continue;
        } catch (const TimeoutError&) {
        }
      }
      if (!store->check({arrived(r)})) missing.push_back(r);
    }
    std::string names;
    for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
    verdict = missing.empty() ? "ok"
                              : std::string(missing.size() == 1 ? "rank " : "ranks ") + names +
                                    " did not arrive within " + backends::seconds(timeout);
    store->set(verdict_key, verdict);
    if (!missing.empty()) {
      // Rank 0 hosts the store: keep it up a while (up to `timeout` more) for the ranks that come
      // late to read the verdict too, rather than find the store gone.
      std::vector<int> others;
      for (int r = 1; r < world; ++r) others.push_back(r);
      wait_for_reads(*store, prefix + "seen", others, timeout);
    }
  } else {
    store->set(arrived(rank), "");
    try {
      store->wait({verdict_key}, verdict_wait);
    } catch (const TimeoutError&) {
      throw TimeoutError(name + " on rank " + std::to_string(rank) +
                         ": rank 0, which checks the barrier, gave no verdict within " +
                         backends::seconds(verdict_wait) +
                         ": rank 0 did not reach it (it is stuck, or skipped it)");
    }
    verdict = store->get(verdict_key);
    if (verdict != "ok") acknowledge_read(*store, prefix + "seen", rank);
  }
  if (verdict != "ok") {
    throw TimeoutError(name + " on rank " + std::to_string(rank) + ": " + verdict +
                       " (rank 0 waited for every rank). Look at what those ranks were doing: "
                       "a collective that only some ranks call, or a rank stuck or slower than "
                       "the timeout.");
  }
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

std::unique_ptr<ProcessGroup> new_group() {
  std::shared_ptr<PrefixStore> store;
  Resolved r;
  std::string backend;
  std::chrono::milliseconds timeout{};
  int id = 0;
  DebugLevel debug = DebugLevel::kOff;
  {
    std::lock_guard lock(g_mu);
    Group& g = current();
    debug = g.debug;
    store = g.store;
    r = g.resolved;
    backend = g.info.backend;
    timeout = g.pg->timeout();
    id = g.next_subgroup++;
  }
  // The same rendezvous store, under a key space of its own: the new group's connections never
  // meet the default group's. Connecting waits for every rank, up to the group's timeout.
  const std::string name = "subgroup/" + std::to_string(id) + "/";
  PrefixStore sub(name + backend, store);
  sub.set_timeout(timeout);
  std::unique_ptr<ProcessGroup> pg;
  if (backend == "nccl") {
    backends::NcclOptions nccl;
    nccl.device = r.local_rank;
    nccl.timeout = timeout;
    nccl.connect_timeout = timeout;
    pg = backends::make_nccl_group(r.rank, r.world_size, sub, nccl);
  } else {
    pg = backends::make_gloo_group(r.rank, r.world_size, sub, gloo_options(r, timeout, timeout));
  }
  if (debug == DebugLevel::kDetail) {
    pg = make_debug_group(std::move(pg), std::make_shared<PrefixStore>(name + "debug", store));
  }
  return pg;
}

bool all_ranks_ok(bool mine) {
  Tensor flag = full(1, mine ? 1 : 0, kInt32, get_device());
  all_reduce(flag, ReduceOp::MIN);
  return flag.item(0) == 1;
}

void report_throughput(std::chrono::duration<double> elapsed, std::int64_t samples) {
  Tensor slowest = full(1, elapsed.count(), kFloat64, get_device());
  all_reduce(slowest, ReduceOp::MAX);
  const double seconds = slowest.item(0);
  char text[160];
  std::snprintf(text, sizeof text, "throughput: %.0f samples/s (%lld samples in %.3f s)",
                static_cast<double>(samples) / seconds, static_cast<long long>(samples), seconds);
  out0() << text;
}

}  // namespace dist
