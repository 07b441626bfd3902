// Chapter 02, exercise 1 — predict what torch does with rank and world_size from three places.
//
// This library takes rank and world_size from the arguments, else the init_method URL's query,
// else the environment, whatever the init_method. torch's rule is narrower, and a script that
// works here may stop there with a ValueError or an AssertionError. The exercise:
// predict_torch() below gets what each source gives and returns what torch 1.13's
// init_process_group does, in the words the README's table uses. The program prints your
// prediction for each case of the table beside what this library does (every rank really
// initialises with those sources); the grader compares your predictions with what torch 1.13
// did. Cover the README table's torch column while you write it.
//
// Each source numbers the ranks differently (environment r, URL query (r+1) mod W, arguments
// (r+2) mod W), so the rank a process gets names the source that won. With 3 ranks the three
// numberings differ (with 2, the arguments' and the environment's coincide), so it runs on 3.
// Grade it: ./tutorial check 02-ex1        Run it: ./tutorial run 02-ex1
#include <dist/dist.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// What one source gives: rank, world_size, both or neither.
struct Given {
  bool rank = false, world_size = false;
  bool any() const { return rank || world_size; }
};
constexpr Given kNothing{}, kRank{true, false}, kBoth{true, true};

// One case of the README's table: the init_method's scheme and what each source gives.
struct Case {
  std::string scheme;  // "env", "tcp" or "file"
  Given arguments, query, environment;
};

const std::vector<Case> kCases = {
    {"env", kNothing, kNothing, kBoth}, {"env", kBoth, kNothing, kBoth},
    {"env", kNothing, kBoth, kBoth},    {"env", kRank, kNothing, kBoth},
    {"env", kBoth, kBoth, kNothing},    {"env", kNothing, kNothing, kNothing},
    {"tcp", kNothing, kNothing, kBoth}, {"tcp", kNothing, kBoth, kBoth},
    {"tcp", kBoth, kNothing, kBoth},    {"tcp", kRank, kNothing, kBoth},
    {"tcp", kBoth, kBoth, kBoth},       {"file", kNothing, kNothing, kBoth},
    {"file", kBoth, kNothing, kBoth},
};

// ---- The exercise: torch 1.13's rule, from torch/distributed/rendezvous.py ----
// What init_process_group(backend, init_method, rank=..., world_size=...) does: the source the
// rank came from ("arguments", "URL query", "environment"), or what it raises.
std::string predict_torch(const Case& c) {
  // TODO(exercise): return "arguments", "URL query" or "environment" (the source the rank comes
  // from), or what init_process_group raises, in the words of the README's table:
  //   "AssertionError", "ValueError: rank parameter missing",
  //   "ValueError: world size parameter missing",
  //   "ValueError: environment variable RANK expected, but not set",
  //   "ValueError: environment variable WORLD_SIZE expected, but not set".
  // c.scheme is "env", "tcp" or "file"; c.arguments, c.query and c.environment say whether each
  // source gives the rank and the world_size (.rank, .world_size, .any()). torch's code:
  // _rendezvous_helper and the three handlers in torch/distributed/rendezvous.py.
  (void)c;
  return "?";  // your prediction: replace it
}
// ---- end of the exercise ----

std::string given_text(Given g, bool upper) {
  if (!g.any()) return "-";
  const std::string rank = upper ? "RANK" : "rank", world = upper ? "WORLD_SIZE" : "world_size";
  return g.rank && g.world_size ? rank + ", " + world : (g.rank ? rank : world);
}

// "tcp:// | rank | - | RANK, WORLD_SIZE": the README's columns, as torch_rule.py reads them.
std::string case_text(const Case& c) {
  return c.scheme + ":// | " + given_text(c.arguments, false) + " | " + given_text(c.query, false) +
         " | " + given_text(c.environment, true);
}

// Sets RANK and WORLD_SIZE as a case wants them, and MASTER_PORT to the case's own port, while
// it lives; then puts the launcher's values back.
class CaseEnvironment {
 public:
  CaseEnvironment(Given g, int rank, int world, const std::string& port) {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_PORT"}) {
      saved_.push_back({name, dist::env_value(name)});
    }
    set("RANK", g.rank, rank);
    set("WORLD_SIZE", g.world_size, world);
    ::setenv("MASTER_PORT", port.c_str(), 1);
  }
  ~CaseEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value)
        ::setenv(name.c_str(), value->c_str(), 1);
      else
        ::unsetenv(name.c_str());
    }
  }
  CaseEnvironment(const CaseEnvironment&) = delete;
  CaseEnvironment& operator=(const CaseEnvironment&) = delete;

 private:
  static void set(const char* name, bool given, int value) {
    if (given)
      ::setenv(name, std::to_string(value).c_str(), 1);
    else
      ::unsetenv(name);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// Where each case meets, agreed by every rank: a file name no other job uses (a random number)
// and one free port per case, so that no case meets at a port an earlier case's rank 0 served.
// Rank 0 draws them and broadcasts them over the group that exists now.
struct Meeting {
  std::string token;
  std::vector<int> ports;
};

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;  // any address, port 0: the kernel picks a free one
  socklen_t len = sizeof(addr);
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw dist::Error("could not find a free port on this machine");
  return ntohs(addr.sin_port);
}

Meeting agree_on_meeting(std::size_t cases) {
  dist::Tensor t = dist::zeros(static_cast<std::int64_t>(cases) + 1, dist::kInt64);
  if (dist::get_rank() == 0) {
    std::random_device random;
    t.set(0, static_cast<double>(((std::int64_t{random()} << 20) ^ std::int64_t{random()}) &
                                 ((std::int64_t{1} << 52) - 1)));
    for (std::size_t k = 0; k < cases; ++k) {
      t.set(static_cast<std::int64_t>(k) + 1, free_port());
    }
  }
  t = t.to(dist::get_device());
  dist::broadcast(t, 0);
  t = t.cpu();
  Meeting m;
  std::ostringstream hex;
  hex << std::hex << static_cast<std::int64_t>(t.item(0));
  m.token = hex.str();
  for (std::size_t k = 0; k < cases; ++k) {
    m.ports.push_back(static_cast<int>(t.item(static_cast<std::int64_t>(k) + 1)));
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    dist::Cli cli("ch02_init_methods_ex1",
                  "Predict what torch does with rank and world_size from the arguments, the URL "
                  "query and the environment, beside what this library does.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const dist::LaunchEnv env = dist::read_launch_env();
    if (!env.rank || !env.world_size || !env.master_addr || !env.master_port) {
      throw dist::ConfigError(
          "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT must be set: run it under a launcher, "
          "e.g. ddprun --standalone --nproc-per-node 3 ch02_init_methods_ex1");
    }
    const int r = *env.rank, world = *env.world_size;
    dist::init_process_group(cli.init_options());
    const Meeting meeting = agree_on_meeting(kCases.size());
    dist::destroy_process_group();

    // Each source's numbering of this process.
    const int from_env = r, from_query = (r + 1) % world, from_arguments = (r + 2) % world;
    for (std::size_t k = 0; k < kCases.size(); ++k) {
      const Case& c = kCases[k];
      dist::InitOptions o = cli.init_options();
      const std::string port = std::to_string(meeting.ports[k]);
      o.init_method =
          c.scheme == "env" ? "env://"
          : c.scheme == "tcp"
              ? "tcp://" + *env.master_addr + ":" + port
              : "file://" + (std::filesystem::temp_directory_path() /
                             ("ch02_init_methods_ex1-" + meeting.token + "-" + std::to_string(k)))
                                .string();
      std::string query;
      if (c.query.rank) query += "rank=" + std::to_string(from_query);
      if (c.query.world_size)
        query += (query.empty() ? "" : "&") + std::string("world_size=") + std::to_string(world);
      if (!query.empty()) o.init_method += "?" + query;
      if (c.arguments.rank) o.rank = from_arguments;
      if (c.arguments.world_size) o.world_size = world;

      std::string library;
      int rank = -1;
      {
        const CaseEnvironment scoped(c.environment, from_env, world, port);
        try {
          dist::init_process_group(o);
          rank = dist::get_rank();
          dist::destroy_process_group();
        } catch (const dist::ConfigError& e) {
          // A refusal is an outcome too: the words before its hint, as the README's table has it.
          const std::string what = e.what();
          library = "ConfigError: " + what.substr(0, what.find(':'));
        }
      }
      if (rank >= 0) {  // the source whose numbering this rank got (they differ on 3 ranks)
        library = rank == from_arguments ? "arguments"
                  : rank == from_query   ? "URL query"
                  : rank == from_env     ? "environment"
                                         : "rank " + std::to_string(rank);
      }
      dist::out0() << "(" << k + 1 << ") " << case_text(c) << " -> torch: " << predict_torch(c)
                   << "; this library: " << library;
    }
    return dist::kExitOk;
  });
}
