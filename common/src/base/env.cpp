// Launcher environment resolution (dist/env.h): torchrun's variables first, then OpenMPI's, then
// Slurm's, each validated with a message that names the variable and its value.
#include "dist/env.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <system_error>

#include "dist/check.h"

namespace dist {
namespace {

struct IntVar {
  int value;
  std::string name;
};

// The first of `names` that is set (non-empty), parsed and range-checked.
std::optional<IntVar> first_int(const EnvLookup& lookup, std::initializer_list<const char*> names,
                                long long min, long long max) {
  for (const char* name : names) {
    if (auto raw = lookup(name); raw && !raw->empty()) {
      return IntVar{parse_int(name, *raw, min, max), name};
    }
  }
  return std::nullopt;
}

Launcher launcher_of(const std::string& var) {
  if (var.rfind("OMPI_", 0) == 0) return Launcher::kOpenMPI;
  if (var.rfind("SLURM_", 0) == 0) return Launcher::kSlurm;
  return Launcher::kTorchrun;
}

constexpr long long kMaxRanks = 1 << 20;

[[noreturn]] void bad_tasks_per_node(const std::string& spec, const std::string& why) {
  throw ConfigError("SLURM_TASKS_PER_NODE=\"" + spec + "\" " + why +
                    ": Slurm writes it as counts per machine, such as 2(x3),1");
}

// Slurm's SLURM_TASKS_PER_NODE: comma-separated counts, "N(xM)" for M machines with N tasks each
// ("2(x3),1": machines 0-2 run 2 tasks, machine 3 runs 1). Returns machine `node`'s count.
int slurm_tasks_on_node(const std::string& spec, int node) {
  int first = 0;  // the first machine the current item describes
  std::size_t at = 0;
  while (at <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', at), spec.size());
    const std::string item = spec.substr(at, comma - at);
    const std::size_t paren = item.find("(x");
    int tasks = 0, machines = 1;
    if (paren == std::string::npos) {
      tasks = parse_int("SLURM_TASKS_PER_NODE", item, 1, kMaxRanks);
    } else {
      if (item.back() != ')') bad_tasks_per_node(spec, "has an unclosed \"(x\"");
      tasks = parse_int("SLURM_TASKS_PER_NODE", item.substr(0, paren), 1, kMaxRanks);
      machines = parse_int("SLURM_TASKS_PER_NODE", item.substr(paren + 2, item.size() - paren - 3),
                           1, kMaxRanks);
    }
    if (node < first + machines) return tasks;
    first += machines;
    at = comma + 1;
  }
  bad_tasks_per_node(spec, "describes " + std::to_string(first) +
                               " machines, but SLURM_NODEID is " + std::to_string(node));
}

}  // namespace

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kNone:
      return "none";
    case Launcher::kTorchrun:
      return "torchrun-style (RANK/WORLD_SIZE)";
    case Launcher::kOpenMPI:
      return "OpenMPI (OMPI_COMM_WORLD_*)";
    case Launcher::kSlurm:
      return "Slurm (SLURM_*)";
  }
  return "unknown";
}

std::optional<std::string> env_value(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

EnvLookup process_env() {
  return [](const std::string& name) { return env_value(name); };
}

int parse_int(const std::string& name, const std::string& value, long long min, long long max) {
  long long parsed = 0;
  const char* begin = value.data();
  const char* end = begin + value.size();
  if (begin != end && *begin == '+') ++begin;  // "+1" is a valid integer to a shell user
  auto [ptr, ec] = std::from_chars(begin, end, parsed);
  if (value.empty() || ec == std::errc::invalid_argument || ptr != end) {
    throw ConfigError(name + "=\"" + value +
                      "\" is not an integer: expected a whole number such as " +
                      std::to_string(min < 0 ? 0 : min));
  }
  if (ec == std::errc::result_out_of_range || parsed < min || parsed > max) {
    throw ConfigError(name + "=" + value + " is out of range: it must be between " +
                      std::to_string(min) + " and " + std::to_string(max));
  }
  return static_cast<int>(parsed);
}

LaunchEnv read_launch_env(const EnvLookup& lookup) {
  LaunchEnv env;
  if (auto rank =
          first_int(lookup, {"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, 0, kMaxRanks - 1)) {
    env.rank = rank->value;
    env.rank_var = rank->name;
    env.launcher = launcher_of(rank->name);
  }
  if (auto world =
          first_int(lookup, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, 1, kMaxRanks)) {
    env.world_size = world->value;
    env.world_size_var = world->name;
    if (env.launcher == Launcher::kNone) env.launcher = launcher_of(world->name);
  }
  if (auto v = first_int(lookup, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, 0,
                         kMaxRanks - 1)) {
    env.local_rank = v->value;
  }
  if (auto v = first_int(lookup, {"GROUP_RANK", "SLURM_NODEID"}, 0, kMaxRanks - 1)) {
    env.group_rank = v->value;
  }
  if (auto v =
          first_int(lookup, {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1, kMaxRanks)) {
    env.local_world_size = v->value;
  } else if (auto spec = lookup("SLURM_TASKS_PER_NODE"); spec && !spec->empty()) {
    // srun says how many tasks run on each machine, and which machine this is.
    const auto node = first_int(lookup, {"SLURM_NODEID"}, 0, kMaxRanks - 1);
    env.local_world_size = slurm_tasks_on_node(*spec, node ? node->value : 0);
  }
  if (auto addr = lookup("MASTER_ADDR"); addr && !addr->empty()) env.master_addr = *addr;
  if (auto v = first_int(lookup, {"MASTER_PORT"}, 1, 65535)) env.master_port = v->value;

  if (env.local_rank && env.local_world_size && *env.local_rank >= *env.local_world_size) {
    throw ConfigError(
        "LOCAL_RANK=" + std::to_string(*env.local_rank) +
        " is out of range for LOCAL_WORLD_SIZE=" + std::to_string(*env.local_world_size) +
        ": local ranks on one machine are 0.." + std::to_string(*env.local_world_size - 1));
  }
  return env;
}

}  // namespace dist
