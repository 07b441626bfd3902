// Resolving this rank's settings and meeting the other ranks (see rendezvous.h).
#include "rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "dist/check.h"
#include "gpu/gpu.h"
#include "util/fnv1a.h"
#include "util/text.h"

namespace dist::rendezvous {
namespace {

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

// LOCAL_RANK, or the rank where it can only be the rank (see resolve() in rendezvous.h).
int local_rank(const LaunchEnv& env, const Settings& r) {
  if (env.local_rank) return *env.local_rank;
  const bool second_machine = env.group_rank.value_or(0) > 0;
  if (second_machine || r.world_size > r.local_world_size) {
    throw ConfigError(
        "LOCAL_RANK is not set, and this rank is not on a machine of its own: " +
        (second_machine ? "its machine index is " + std::to_string(*env.group_rank) +
                              " (GROUP_RANK or SLURM_NODEID)"
                        : "WORLD_SIZE is " + std::to_string(r.world_size) +
                              " but LOCAL_WORLD_SIZE only " + std::to_string(r.local_world_size)) +
        ", so the rank cannot stand in for the local rank (which GPU, which local data "
        "directory). Set LOCAL_RANK for every process; ddprun, torchrun, mpirun and srun set it "
        "for you");
  }
  return r.rank;  // one machine: local and global ranks agree
}

}  // namespace

// ---- Step 1: resolve --------------------------------------------------------------------------

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

std::string Settings::where() const {
  return url.scheme == "file" ? "file://" + url.path
                              : master_addr + ":" + std::to_string(master_port);
}

Settings resolve(const InitOptions& o, const LaunchEnv& env) {
  if (o.backend != "gloo" && o.backend != "nccl" && o.backend != "auto") {
    throw ConfigError("unknown backend \"" + o.backend + "\": use gloo, nccl or auto");
  }
  Store::checked_timeout(o.timeout);
  Settings r;
  r.url = parse_url(o.init_method);
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
  r.local_world_size = env.local_world_size.value_or(r.world_size);
  r.local_rank = local_rank(env, r);
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
  r.init_method = r.url.scheme == "env"   ? "env://"
                  : r.url.scheme == "tcp" ? "tcp://" + r.where()
                                          : "file://" + r.url.path;
  return r;
}

// ---- Step 2: meet -----------------------------------------------------------------------------

std::uint64_t session_id(const std::string& group_name, std::uint64_t generation) {
  return util::Fnv1a().add(group_name + "/" + std::to_string(generation)).value();
}

std::shared_ptr<Store> open_store(const Settings& s, std::uint64_t session,
                                  std::chrono::milliseconds timeout, bool another_connection) {
  if (s.url.scheme == "file") return std::make_shared<FileStore>(s.url.path, timeout);
  TCPStore::Options o;
  o.host = s.master_addr;
  o.port = s.master_port;
  o.is_server = s.rank == 0 && !another_connection;
  o.timeout = timeout;
  o.session = session;
  o.token = env_value("DIST_STORE_TOKEN").value_or("");
  return std::make_shared<TCPStore>(o);
}

// Every rank announces itself under "rank/<r>" and waits for all the others. A second process
// claiming the same rank, or disagreeing about world_size, is reported to every rank through the
// "conflict" key, so nobody waits out the full timeout for a job that cannot start.
void meet(Store& store, const Settings& r, Clock::time_point deadline) {
  const std::string me = std::to_string(r.rank);
  auto conflict = [&](const std::string& message) {
    store.set("conflict", message);
    throw ConfigError(message);
  };
  if (store.add("claims/" + me, 1) > 1) {
    conflict("two processes claim rank " + me + " at " + r.where() +
             ": give every process its own RANK" +
             (r.url.scheme == "file"
                  ? ", or delete " + r.url.path + " left over from an earlier run"
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
      throw TimeoutError(util::ranks_phrase(missing) + " of world_size " + world +
                         " never joined at " + r.where() + " before the timeout: start " +
                         (missing.size() == 1 ? "it" : "them") +
                         ", or check that every rank uses the same WORLD_SIZE and rendezvous "
                         "address (MASTER_ADDR/MASTER_PORT or init_method)");
    }
  }
}

backends::BackendChoice agree_on_backend(Store& store, const Settings& s) {
  if (s.backend != "auto") return {s.backend, "asked for"};
  std::vector<std::string> problems;
  for (int i = 0; i < s.world_size; ++i) {
    problems.push_back(store.get("nccl_problem/" + std::to_string(i)));
  }
  return backends::choose_auto(problems);
}

}  // namespace dist::rendezvous
