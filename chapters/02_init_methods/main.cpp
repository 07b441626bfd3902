// Chapter 02 — init methods: where rank and world_size come from, and where ranks meet.
//
// init_process_group needs three answers: this process's rank, the world_size, and a place where
// all ranks can meet (the rendezvous). Post B gets them from environment variables, then from
// explicit arguments, then from both at once, where WORLD_SIZE=2 in the environment loses to
// world_size=1 in the call. This program does each of those in turn, in one run, then meets
// through a tcp:// URL and a file:// path, and prints which source won each time. It initialises
// five times; destroy_process_group() between them makes that legal.
//
// You will learn: this library's order of precedence (explicit arguments, then the URL's query,
// then the environment) and torch's narrower rule (arguments or query, never both; only env://
// reads the environment); env://, tcp://HOST:PORT and file:///PATH; why processes that each run
// alone need a rendezvous of their own. The five cases are ones where torch and this library
// agree, so the PyTorch twin runs them too; the README's table shows where they part.
// Builds on: chapter 01 (init_process_group, get_dist_info, the shared flags).
//
// Run:   ./tutorial run 02
//        (or: ddprun --standalone --nproc-per-node 2 ch02_init_methods)
// Prints, among other lines (the ranks' lines interleave in any order):
//   [rank 1/2] (a) env://, RANK=1 WORLD_SIZE=2 from the launcher -> rank 1 of 2; all_reduce ... = 3
//   [rank 0/1] (c) file:// of its own, RANK=1 WORLD_SIZE=2 set, rank=0 world_size=1 passed -> ...
//   [rank 0/2] OK: every case gave the rank and world_size that precedence predicts
#include <dist/dist.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

// One row of the table rank 0 prints at the end: what each source said, and who we became.
struct Row {
  std::string name, init_method, arguments, query, environment, result;
};

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

std::string rank_world(int rank, int world) {
  return "rank=" + std::to_string(rank) + " world_size=" + std::to_string(world);
}

// Who init made this process, checked: the rank and world_size precedence predicts, and an
// all_reduce of rank + 1 that gives W(W+1)/2 only if all W ranks of the group really met.
bool met_as(const std::string& what, int want_rank, int want_world, Row& row) {
  const int rank = dist::get_rank(), world = dist::get_world_size();
  dist::Tensor t = dist::full(1, rank + 1, dist::kInt64, dist::get_device());
  dist::all_reduce(t, dist::ReduceOp::SUM);
  const auto sum = static_cast<std::int64_t>(t.item(0));
  dist::out() << what << " -> rank " << rank << " of " << world
              << "; all_reduce(rank + 1) = " << sum;
  row.result = "rank " + std::to_string(rank) + " of " + std::to_string(world);
  return rank == want_rank && world == want_world && sum == std::int64_t{world} * (world + 1) / 2;
}

// Removes RANK and WORLD_SIZE from this process's environment until it goes out of scope, so that
// only the arguments can supply them. Changing the environment is safe here only because no other
// thread runs between two groups.
class WithoutRankVariables {
 public:
  WithoutRankVariables() {
    for (const char* name : {"RANK", "WORLD_SIZE"}) {
      saved_.push_back({name, dist::env_value(name)});
      ::unsetenv(name);
    }
  }
  ~WithoutRankVariables() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
    }
  }
  WithoutRankVariables(const WithoutRankVariables&) = delete;
  WithoutRankVariables& operator=(const WithoutRankVariables&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// A name for this job's rendezvous files that no other job on the machine uses: rank 0 draws a
// random number and broadcasts it over the group that exists now. (A name built from MASTER_PORT
// would not do: once our job has released the port, another job may be given it.)
std::string job_token() {
  std::random_device random;
  const std::int64_t drawn =
      ((std::int64_t{random()} << 20) ^ std::int64_t{random()}) & ((std::int64_t{1} << 52) - 1);
  dist::Tensor t = dist::full(1, dist::get_rank() == 0 ? static_cast<double>(drawn) : 0.0,
                              dist::kInt64, dist::get_device());
  dist::broadcast(t, 0);  // now every rank holds rank 0's number
  std::ostringstream hex;
  hex << std::hex << static_cast<std::int64_t>(t.item(0));
  return hex.str();
}

// Case (a) is "the environment alone", and every case is checked against it.
void require_launcher_variables(const dist::LaunchEnv& env) {
  const std::pair<const char*, bool> needed[] = {{"RANK", env.rank.has_value()},
                                                 {"WORLD_SIZE", env.world_size.has_value()},
                                                 {"MASTER_ADDR", env.master_addr.has_value()},
                                                 {"MASTER_PORT", env.master_port.has_value()}};
  for (const auto& [name, set] : needed) {
    if (!set) {
      throw dist::ConfigError(std::string(name) +
                              " is not set: run this chapter under a launcher, e.g. ddprun "
                              "--standalone --nproc-per-node 2 ch02_init_methods, or set RANK, "
                              "WORLD_SIZE, MASTER_ADDR and MASTER_PORT yourself");
    }
  }
}

std::string file_url(const std::string& token, const std::string& suffix) {
  return "file://" +
         (std::filesystem::temp_directory_path() / ("ch02_init_methods-" + token + "-" + suffix))
             .string();
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    // ---- Step 0: flags. Each case below picks its own init method.
    dist::Cli cli("ch02_init_methods",
                  "Initialise five times: from the environment, from arguments, from both, "
                  "through tcp:// and through file://, and show which source wins.");
    if (!cli.parse(argc, argv)) return dist::kExitOk;
    const dist::InitOptions defaults = cli.init_options();
    if (!defaults.init_method.empty() && defaults.init_method != "env://") {
      throw dist::ConfigError("ch02_init_methods tries every init method itself: run it without " +
                              std::string("--init-method (got ") + defaults.init_method + ")");
    }
    const dist::LaunchEnv env = dist::read_launch_env();
    require_launcher_variables(env);
    const int rank = *env.rank, world = *env.world_size;
    const std::string env_text =
        "RANK=" + std::to_string(rank) + " WORLD_SIZE=" + std::to_string(world);
    std::vector<Row> rows;
    bool ok = true;

    // ---- Step 1: the rule, printed once. This library's order is its own: torch never mixes
    // arguments with a query (AssertionError), and only its env:// reads RANK and WORLD_SIZE.
    dist::out0() << "where this library takes rank and world_size from (the first that gives one):";
    dist::out0() << "  1. arguments    rank=R, world_size=W passed to init_process_group";
    dist::out0()
        << "  2. URL query    tcp://HOST:PORT?rank=R&world_size=W (torch: not together with 1.)";
    dist::out0() << "  3. environment  RANK, WORLD_SIZE (torch: env:// only)";

    // ---- Step 2: (a) the environment alone: env:// reads RANK, WORLD_SIZE, MASTER_ADDR/PORT
    dist::init_process_group(defaults);
    rows.push_back({"(a)", "env://", "-", "-", env_text, ""});
    ok &= met_as("(a) env://, " + env_text + " from the launcher", rank, world, rows.back());
    const std::string token = job_token();  // names the file:// rendezvous of (c) and (e)
    dist::destroy_process_group();

    // ---- Step 3: (b) explicit arguments alone: the environment no longer has RANK/WORLD_SIZE
    {
      const WithoutRankVariables unset;
      dist::InitOptions b = defaults;
      b.rank = rank;
      b.world_size = world;
      dist::init_process_group(b);  // still env:// for the address: MASTER_ADDR, MASTER_PORT
      rows.push_back({"(b)", "env://", rank_world(rank, world), "-", "unset", ""});
      ok &= met_as("(b) env://, RANK and WORLD_SIZE unset, " + rank_world(rank, world) + " passed",
                   rank, world, rows.back());
      dist::destroy_process_group();
    }

    // ---- Step 4: (c) both: the environment says world_size W, the call says 1. The call wins,
    // and every process becomes rank 0 of a world of 1 and runs alone, without waiting. Each
    // needs a rendezvous of its own: on env:// all W "rank 0"s would try to host a store at
    // the same MASTER_PORT.
    dist::InitOptions c = defaults;
    c.rank = 0;
    c.world_size = 1;
    c.init_method = file_url(token, "solo-" + std::to_string(rank));
    dist::init_process_group(c);
    rows.push_back({"(c)", "file:// (own)", rank_world(0, 1), "-", env_text, ""});
    ok &= met_as("(c) file:// of its own, " + env_text + " set, " + rank_world(0, 1) + " passed", 0,
                 1, rows.back());
    dist::destroy_process_group();

    // ---- Step 5: (d) tcp://: the address in the URL, rank and world_size in its query. The
    // launcher's port is free again, and each init is a new generation of the store, so the
    // same port serves a third time.
    const std::string query =
        "?rank=" + std::to_string(rank) + "&world_size=" + std::to_string(world);
    dist::InitOptions d = defaults;
    d.init_method = "tcp://" + *env.master_addr + ":" + std::to_string(*env.master_port) + query;
    dist::init_process_group(d);
    rows.push_back({"(d)", "tcp://", "-", query.substr(1), env_text, ""});
    ok &= met_as("(d) tcp://" + *env.master_addr + ":PORT" + query, rank, world, rows.back());
    dist::destroy_process_group();

    // ---- Step 6: (e) file://: one path every rank can open, no port at all. Arguments, not the
    // environment, so the same code runs with torch (its file:// ignores RANK/WORLD_SIZE).
    dist::InitOptions e = defaults;
    e.rank = rank;
    e.world_size = world;
    e.init_method = file_url(token, "world");
    dist::init_process_group(e);
    rows.push_back({"(e)", "file:// (shared)", rank_world(rank, world), "-", env_text, ""});
    ok &= met_as("(e) file:// shared, " + rank_world(rank, world) + " passed", rank, world,
                 rows.back());
    // One verdict for the job, over the last group: the MIN over ranks of "my cases were right".
    const bool job_ok = dist::all_ranks_ok(ok);
    dist::destroy_process_group();

    // ---- Step 7: rank 0's table: the leftmost source that said something won
    dist::out0() << pad("case", 5) << pad("init_method", 18) << pad("arguments", 24)
                 << pad("URL query", 22) << pad("environment", 22) << "-> result";
    for (const Row& row : rows) {
      dist::out0() << pad(row.name, 5) << pad(row.init_method, 18) << pad(row.arguments, 24)
                   << pad(row.query, 22) << pad(row.environment, 22) << "-> " << row.result;
    }
    if (!job_ok) {
      dist::out0() << "MISMATCH: some case gave a rank or world_size precedence does not predict";
      return dist::kExitFailure;
    }
    dist::out0() << "OK: every case gave the rank and world_size that precedence predicts";
    return dist::kExitOk;
  });
}
