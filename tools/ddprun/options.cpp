// ddprun's command line (options.h).
//
// Flags are spelled as torchrun spells them, so a torchrun command line pastes unchanged:
// --nproc_per_node and --nproc-per-node, "--flag VALUE" and "--flag=VALUE". Values are checked
// strictly ("4x", "+4" and "auto" are refused), because a launcher that guesses starts the wrong
// number of ranks, and the mistake only shows up later as a rendezvous that never completes.
#include "options.h"

#include <charconv>
#include <map>
#include <string>
#include <string_view>

namespace ddprun {
namespace {

constexpr int kMaxNprocPerNode = 1024;
constexpr int kMaxNnodes = 65536;  // keeps WORLD_SIZE = nnodes * nproc_per_node well inside int
constexpr double kMaxGracePeriodS = 60.0;
constexpr int kMaxRestarts = 1000;
constexpr double kMaxMonitorIntervalS = 3600.0;
constexpr double kMaxAgentTimeoutS = 86400.0;

// One flag as the user typed it. Errors quote `spelled` and `value`, so the learner sees their
// own words back.
struct Setting {
  std::string spelled;
  std::string value;

  int integer(int lo, int hi, const std::string& hint) const {
    int parsed = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
    if (ec != std::errc() || ptr != end || parsed < lo || parsed > hi) {
      throw UsageError(spelled + " expects an integer from " + std::to_string(lo) + " to " +
                           std::to_string(hi) + ", got '" + value + "'",
                       hint);
    }
    return parsed;
  }

  double seconds(double max, const std::string& hint) const {
    double parsed = 0;
    const char* end = value.data() + value.size();
    const auto [ptr, ec] = std::from_chars(value.data(), end, parsed);
    // Written so that NaN fails too: every comparison with NaN is false.
    if (ec != std::errc() || ptr != end || !(parsed > 0 && parsed <= max)) {
      throw UsageError(spelled + " expects seconds, more than 0 and at most " +
                           std::to_string(static_cast<int>(max)) + ", got '" + value + "'",
                       hint);
    }
    return parsed;
  }
};

int parse_nnodes(const Setting& s) {
  if (s.value.find(':') != std::string::npos) {
    throw UsageError(s.spelled + " got '" + s.value +
                         "', torchrun's elastic MIN:MAX form, which ddprun does not support",
                     "give a fixed number of machines, e.g. --nnodes 2 (ddprun has no elastic "
                     "membership: every node must be there from the start)");
  }
  return s.integer(1, kMaxNnodes, "the number of machines, each running its own ddprun");
}

// --local-rank-arg's style: "dash" (bare), or "underscore" after '='.
Options::LocalRankArg parse_local_rank_arg(const Setting& s) {
  if (s.value == "dash") return Options::LocalRankArg::kDash;
  if (s.value == "underscore") return Options::LocalRankArg::kUnderscore;
  throw UsageError(s.spelled + " expects dash or underscore after '=', got '" + s.value + "'",
                   "write --local-rank-arg to pass --local-rank=N (torch.distributed.launch "
                   "from torch 2.0), or --local-rank-arg=underscore to pass --local_rank=N "
                   "(torch 1.x)");
}

// A --redirects or --tee value, as torchrun reads it (Std.from_str in torch/distributed/elastic/
// multiprocessing/api.py): "0" to "3" for every local rank, or "LOCAL_RANK:VALUE" pairs separated
// by commas. torch 1.13's pattern takes one-digit local ranks only; ddprun takes any, and checks
// them against --nproc-per-node once every flag is read.
StdSetting parse_std(const Setting& s) {
  const std::string hint =
      "0: none, 1: stdout, 2: stderr, 3: both; e.g. " + s.spelled + " 3 for every rank, or " +
      s.spelled + " 0:3,1:2 for local rank 0's stdout and stderr and local rank 1's stderr";
  const auto bad = [&]() {
    return UsageError(s.spelled +
                          " expects 0, 1, 2 or 3, or LOCAL_RANK:VALUE pairs like 0:3,1:2, " +
                          "got '" + s.value + "'",
                      hint);
  };
  const auto std_value = [&](std::string_view text) {
    if (text.size() != 1 || text[0] < '0' || text[0] > '3') throw bad();
    return text[0] - '0';
  };
  StdSetting setting;
  if (s.value.find(':') == std::string::npos) {
    setting.all = std_value(s.value);
    return setting;
  }
  std::string_view rest = s.value;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view pair = rest.substr(0, comma);
    const std::size_t colon = pair.find(':');
    if (colon == std::string_view::npos) throw bad();
    int local_rank = 0;
    const char* end = pair.data() + colon;
    const auto [ptr, ec] = std::from_chars(pair.data(), end, local_rank);
    if (colon == 0 || ec != std::errc() || ptr != end || local_rank < 0) throw bad();
    if (!setting.by_local_rank.emplace(local_rank, std_value(pair.substr(colon + 1))).second) {
      throw UsageError(s.spelled + " names local rank " + std::to_string(local_rank) +
                           " twice, in '" + s.value + "'",
                       "give each local rank once: " + hint);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return setting;
}

// A flag's dash spelling, an example value (empty for a switch, which takes none), what it
// sets, and for a switch that may also be given "=VALUE", the value it means bare. The table is
// the whole list: anything else before PROGRAM is an unknown flag.
struct Flag {
  std::string_view name;
  std::string_view example;
  void (*apply)(Options&, const Setting&);
  std::string_view bare = "";
};

constexpr Flag kFlags[] = {
    {"--nproc-per-node", "4",
     [](Options& o, const Setting& s) {
       o.nproc_per_node = s.integer(1, kMaxNprocPerNode,
                                    "the number of ranks to start on this machine, e.g. "
                                    "--nproc-per-node 4 (ddprun does not count devices for "
                                    "'auto' or 'gpu')");
     }},
    {"--nnodes", "2", [](Options& o, const Setting& s) { o.nnodes = parse_nnodes(s); }},
    {"--node-rank", "0",
     [](Options& o, const Setting& s) {
       o.node_rank = s.integer(0, kMaxNnodes - 1, "this machine's index, from 0 to nnodes-1");
     }},
    {"--master-addr", "10.0.0.1",
     [](Options& o, const Setting& s) {
       if (s.value.empty() || s.value.find_first_of(" \t") != std::string::npos) {
         throw UsageError(s.spelled + " expects a host name or IP address, got '" + s.value + "'",
                          "the address of the machine running rank 0, e.g. --master-addr "
                          "10.0.0.1 (127.0.0.1 on one machine)");
       }
       o.master_addr = s.value;
     }},
    {"--master-port", "29500",
     [](Options& o, const Setting& s) {
       o.master_port = s.integer(1, 65535,
                                 "a free TCP port on the master, the same on every node, e.g. "
                                 "--master-port 29500 (or use --standalone on one machine)");
     }},
    {"--agent-port", "29501",
     [](Options& o, const Setting& s) {
       o.agent_port = s.integer(1, 65535,
                                "a free TCP port on node 0's machine for the agents' "
                                "rendezvous, the same on every node, other than "
                                "--master-port (default: MASTER_PORT + 1)");
     }},
    {"--join-timeout", "60",
     [](Options& o, const Setting& s) {
       o.join_timeout_s = s.seconds(kMaxAgentTimeoutS,
                                    "how long the machines wait for each other at the start "
                                    "of each attempt, e.g. --join-timeout 60");
     }},
    {"--exit-barrier-timeout", "300",
     [](Options& o, const Setting& s) {
       o.exit_barrier_timeout_s = s.seconds(kMaxAgentTimeoutS,
                                            "how long a machine whose ranks all exited 0 waits "
                                            "for the others to finish, e.g. "
                                            "--exit-barrier-timeout 300 (torchrun's default)");
     }},
    {"--grace-period", "3",
     [](Options& o, const Setting& s) {
       o.grace_period_s = s.seconds(kMaxGracePeriodS,
                                    "how long stopping ranks get between SIGTERM and SIGKILL, "
                                    "e.g. --grace-period 3 or --grace-period 0.5");
     }},
    {"--max-restarts", "3",
     [](Options& o, const Setting& s) {
       o.max_restarts = s.integer(0, kMaxRestarts,
                                  "how many times to restart every rank after a failure, e.g. "
                                  "--max-restarts 3 (0, the default, never restarts)");
     }},
    {"--monitor-interval", "5",
     [](Options& o, const Setting& s) {
       o.monitor_interval_s =
           s.seconds(kMaxMonitorIntervalS,
                     "seconds between the checks that the machines of a job make on each "
                     "other, e.g. --monitor-interval 5 (torchrun's default) or 0.5");
     }},
    {"--log-dir", "logs",
     [](Options& o, const Setting& s) {
       if (s.value.empty()) {
         throw UsageError(s.spelled + " expects a folder, got ''",
                          "e.g. " + s.spelled +
                              " logs: each run writes its ranks' logs to a "
                              "new folder inside it");
       }
       o.log_dir = s.value;
     }},
    {"--redirects", "3", [](Options& o, const Setting& s) { o.redirects = parse_std(s); }},
    {"--tee", "3", [](Options& o, const Setting& s) { o.tee = parse_std(s); }},
    {"--standalone", "", [](Options& o, const Setting&) { o.standalone = true; }},
    {"--local-rank-arg", "",
     [](Options& o, const Setting& s) { o.local_rank_arg = parse_local_rank_arg(s); }, "dash"},
    // How PROGRAM runs (Options::Runs) is decided once every flag is read: decide_runs.
    {"--module", "", [](Options&, const Setting&) {}},
    {"--no-python", "", [](Options&, const Setting&) {}},
    {"--help", "", [](Options& o, const Setting&) { o.action = Options::Action::kHelp; }},
    {"--version", "", [](Options& o, const Setting&) { o.action = Options::Action::kVersion; }},
};

// "--nproc_per_node" → "--nproc-per-node"; "-h" → "--help"; torchrun's "-r" and "-t".
std::string canonical(const std::string& spelled) {
  if (spelled == "-h") return "--help";
  if (spelled == "-m") return "--module";
  if (spelled == "-r") return "--redirects";
  if (spelled == "-t") return "--tee";
  std::string name = spelled;
  for (std::size_t i = 2; i < name.size(); ++i) {
    if (name[i] == '_') name[i] = '-';
  }
  return name;
}

const Flag& find_flag(const std::string& spelled) {
  const std::string name = canonical(spelled);
  for (const Flag& flag : kFlags) {
    if (flag.name == name) return flag;
  }
  throw UsageError("unknown flag '" + spelled + "'",
                   "ddprun --help lists its flags; flags for PROGRAM go after PROGRAM; "
                   "torchrun's elastic flags (--rdzv-*) are not supported");
}

void check_combinations(const Options& o, const std::map<std::string_view, Setting>& given) {
  if (o.node_rank >= o.nnodes) {
    const Setting& s = given.at("--node-rank");
    throw UsageError(s.spelled + " must be below --nnodes (" + std::to_string(o.nnodes) +
                         "), got '" + s.value + "'",
                     "node ranks count from 0: with --nnodes " + std::to_string(o.nnodes) +
                         " they are 0 to " + std::to_string(o.nnodes - 1));
  }
  if (o.standalone && o.nnodes > 1) {
    throw UsageError(
        "--standalone runs every rank on this machine, but --nnodes is " + std::to_string(o.nnodes),
        "for several machines drop --standalone and give every ddprun the same "
        "--master-addr and --master-port");
  }
  for (const std::string_view fixed : {"--master-addr", "--master-port"}) {
    if (o.standalone && given.contains(fixed)) {
      const Setting& s = given.at(fixed);
      throw UsageError("--standalone picks 127.0.0.1 and a free port itself, but " + s.spelled +
                           " '" + s.value + "' was given too",
                       "drop " + s.spelled + ", or drop --standalone to use it");
    }
  }
  if (o.nnodes > 1 && o.max_restarts > 0 && o.agent_port == 0 && o.master_port == 65535) {
    throw UsageError(
        "--master-port 65535 leaves no port for the agents' rendezvous, which "
        "takes MASTER_PORT + 1 by default",
        "pick a lower --master-port, or give --agent-port");
  }
  if (o.agent_port != 0 && o.agent_port == o.master_port) {
    const Setting& s = given.at("--agent-port");
    throw UsageError(s.spelled + " '" + s.value +
                         "' is --master-port too, where rank 0 hosts "
                         "the ranks' own store",
                     "give the agents' rendezvous a port of its own, e.g. " + s.spelled + " " +
                         std::to_string(o.master_port == 65535 ? 65534 : o.master_port + 1));
  }
  // torchrun drops a local rank it does not start; ddprun says so, since it is likely a typo.
  for (const std::string_view flag : {"--redirects", "--tee"}) {
    const StdSetting& setting = flag == "--tee" ? o.tee : o.redirects;
    for (const auto& [local_rank, value] : setting.by_local_rank) {
      if (local_rank < o.nproc_per_node) continue;
      const Setting& s = given.at(flag);
      throw UsageError(s.spelled + " names local rank " + std::to_string(local_rank) + " in '" +
                           s.value + "', but --nproc-per-node is " +
                           std::to_string(o.nproc_per_node),
                       "local ranks count from 0 on each machine: 0 to " +
                           std::to_string(o.nproc_per_node - 1) + " here");
    }
  }
  if (o.program.empty()) {
    throw UsageError("missing PROGRAM: there is nothing to run",
                     "usage: ddprun [options] PROGRAM [ARGS...], e.g. "
                     "ddprun --nproc-per-node 2 ./build/cpu/bin/ch01_get_dist_info");
  }
}

// Options::Runs from -m/--module, --no-python and PROGRAM's name, as torchrun's
// config_from_args decides it; and the two misuses of -m, which Python would only report once
// per rank, in words about import machinery.
Options::Runs decide_runs(const Options& o, const std::map<std::string_view, Setting>& given) {
  const bool module = given.contains("--module");
  const bool no_python = given.contains("--no-python");
  if (module && no_python) {
    throw UsageError(given.at("--module").spelled + " runs PROGRAM as a Python module, but " +
                         given.at("--no-python").spelled + " runs it as it is",
                     "drop one of them: -m pkg.train runs python3 -u -m pkg.train, and "
                     "--no-python runs a program that is not Python");
  }
  const std::string& program = o.program.front();
  if (module) {
    if (is_python_script(program) || program.find('/') != std::string::npos) {
      const std::string spelled = given.at("--module").spelled;
      throw UsageError(
          spelled + " expects a module name like pkg.train, not a file: got '" + program + "'",
          "run a script without " + spelled + " (ddprun ... " + program +
              "), or name its module, with dots and without .py");
    }
    return Options::Runs::kModule;
  }
  if (no_python || !is_python_script(program)) return Options::Runs::kAsIs;
  return Options::Runs::kScript;
}

}  // namespace

bool is_python_script(const std::string& program) {
  return program.size() > 3 && program.ends_with(".py");
}

Options parse_options(int argc, char** argv) {
  Options options;
  std::map<std::string_view, Setting> given;  // by dash spelling, for the combination checks
  int i = 1;
  while (i < argc) {
    const std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // PROGRAM: options end here
    ++i;
    const std::size_t eq = arg.find('=');
    Setting setting{arg.substr(0, eq), ""};
    const Flag& flag = find_flag(setting.spelled);
    if (!flag.example.empty()) {
      if (eq != std::string::npos) {
        setting.value = arg.substr(eq + 1);
      } else if (i < argc) {
        setting.value = argv[i++];
      } else {
        throw UsageError(setting.spelled + " needs a value",
                         "write " + setting.spelled + " " + std::string(flag.example) + " or " +
                             setting.spelled + "=" + std::string(flag.example));
      }
    } else if (!flag.bare.empty()) {
      // Only "--flag=VALUE": in "--flag VALUE" the word after it is PROGRAM.
      setting.value = eq != std::string::npos ? arg.substr(eq + 1) : std::string(flag.bare);
    } else if (eq != std::string::npos) {
      throw UsageError(setting.spelled + " takes no value, got '" + arg.substr(eq + 1) + "'",
                       "write just " + setting.spelled);
    }
    flag.apply(options, setting);
    if (options.action != Options::Action::kRun) return options;
    given[flag.name] = setting;
  }
  options.program.assign(argv + i, argv + argc);
  check_combinations(options, given);
  options.runs = decide_runs(options, given);
  return options;
}

std::string help_text() {
  return R"(usage: ddprun [options] PROGRAM [ARGS...]
       ddprun [options] -m MODULE [ARGS...]

Starts PROGRAM once per local rank with the variables torchrun sets, and stops every rank as
soon as one fails. Options end at PROGRAM or at "--"; everything after goes to PROGRAM.
Flags are spelled as torchrun spells them: --nproc-per-node or --nproc_per_node, and
"--flag VALUE" or "--flag=VALUE".

PROGRAM is run as torchrun runs it, except that only a Python script goes to Python:
  a name ending in .py    PYTHON -u PROGRAM ARGS... (a Python script, as torchrun runs one)
  -m MODULE               PYTHON -u -m MODULE ARGS...
  anything else           PROGRAM ARGS..., as it is (a compiled program, e.g. a chapter's, or
                          python3 itself); torchrun would need --no-python for it
PYTHON is $PYTHON_EXEC if set (torchrun honours it too), else python3 found on PATH, the one
`python3 -m torch.distributed.run` would use (torchrun uses the Python it runs in): a virtual
environment's when one is active; on Debian 12 otherwise /usr/bin/python3, which has Debian's
torch. ddprun names it when it starts.

Options:
  --nproc-per-node N   ranks to start on this machine, 1 to 1024 (default 1)
  --nnodes N           machines taking part, each running its own ddprun (default 1);
                       torchrun's elastic MIN:MAX form is not supported
  --node-rank R        this machine's index, 0 to nnodes-1 (default 0)
  --master-addr ADDR   the machine where rank 0 hosts the rendezvous (default 127.0.0.1)
  --master-port PORT   its TCP port, 1 to 65535, the same on every node (default 29500)
  --standalone         one machine: use 127.0.0.1 and a free port that ddprun picks, a new
                       one for each attempt (as torchrun's agent picks one per round)
  --local-rank-arg     also pass --local-rank=N to PROGRAM (N: the rank's LOCAL_RANK), right
                       after the script, module or program, before its ARGS, as
                       torch.distributed.launch does from torch 2.0; scripts written for it
                       parse that argument (torchrun passes none)
  --local-rank-arg=underscore
                       pass --local_rank=N instead, as torch.distributed.launch did in torch
                       1.x (--local-rank-arg=dash is the same as --local-rank-arg)
  --agent-port PORT    on several machines with --max-restarts: the TCP port where node 0's
                       ddprun hosts the agents' rendezvous, on --master-addr, the same on
                       every node (default MASTER_PORT + 1); the machines restart their
                       ranks together through it
  --join-timeout S     how long the machines wait for each other at the start of each
                       attempt before ddprun names the missing ones and exits 1 (default 60)
  --exit-barrier-timeout S
                       how long a machine whose ranks all exited 0 waits for the others to
                       finish before it names them and exits 1 (default 300, torchrun's)
  --grace-period S     seconds a rank gets between SIGTERM and SIGKILL when ddprun stops
                       it, more than 0 and at most 60 (default 3)
  --max-restarts N     when a rank fails, stop every rank of this machine and start them
                       all again, up to N times, 0 to 1000 (default 0: no restart)
  --monitor-interval S torchrun's flag, accepted so that its command lines paste: ddprun
                       does not poll its ranks (it wakes the moment one exits); the seconds
                       between the checks the machines of a job make on each other, more
                       than 0 and at most 3600 (default 5, torchrun's)
  --log-dir DIR        where --redirects and --tee write: each run makes a new folder
                       DIR/none_XXXXXX/attempt_K/LOCAL_RANK/ with stdout.log and stderr.log
                       (torchrun's layout; K counts the restarts); without it, a new folder
                       under $TMPDIR or /tmp
  -r, --redirects V    send ranks' streams to their log files instead of this terminal:
                       0 none (default), 1 stdout, 2 stderr, 3 both; or per local rank,
                       LOCAL_RANK:V pairs like 0:3,1:2 (ranks not named: 0)
  -t, --tee V          as --redirects, and also copy each line to this terminal (whole
                       lines, within 0.1 s)
  -m, --module         PROGRAM is a Python module: run PYTHON -u -m PROGRAM, as torchrun -m
                       does (a name with dots, e.g. pkg.train; not a path, not with --no-python)
  --no-python          run PROGRAM as it is, even a name ending in .py (as torchrun's flag)
  -h, --help           show this help and exit
  --version            show ddprun's version and exit

Each rank gets the rest of ddprun's environment, plus:
  RANK                node_rank * nproc_per_node + local_rank, unique across all nodes
  LOCAL_RANK          0 to nproc_per_node-1, the rank's index on this machine
  WORLD_SIZE          nnodes * nproc_per_node
  LOCAL_WORLD_SIZE    nproc_per_node
  GROUP_RANK          node_rank
  GROUP_WORLD_SIZE    nnodes
  ROLE_RANK           the same as RANK
  ROLE_WORLD_SIZE     the same as WORLD_SIZE
  ROLE_NAME           default
  MASTER_ADDR         --master-addr (127.0.0.1 with --standalone)
  MASTER_PORT         --master-port (the picked port with --standalone)
  TORCHELASTIC_RESTART_COUNT  the attempt: 0 at first, 1 after the first restart, ...
  TORCHELASTIC_MAX_RESTARTS   --max-restarts
  TORCHELASTIC_RUN_ID         none
  OMP_NUM_THREADS=1   only with more than one rank per machine, and only when it is unset
                      (a notice says so): N ranks with N threads each would oversubscribe
  DIST_LAUNCHER=ddprun
  DIST_STORE_TOKEN    with --nnodes 1 and DIST_STORE_TOKEN unset: a fresh random token, so
                      only this job's ranks can join its rendezvous store; with several
                      nodes, export the same DIST_STORE_TOKEN on every node yourself
  DIST_TRACE_DIR      where each rank of a dist program writes its flight record
                      (rank_R.json: its last collectives) on a timeout, a failure, SIGTERM,
                      SIGUSR1 or a crash; unless exported: a new $TMPDIR/ddprun_flight_XXXXXX,
                      removed after a run that succeeded or left no record; a restarted
                      attempt's records are kept in attempt_K/ inside it
                      (DIST_TRACE_BUFFER_SIZE: collectives kept, default 256)

When a rank fails (a non-zero exit code, or killed by a signal), ddprun sends SIGTERM to the
ranks still running, SIGKILL to any still running after the grace period, prints a summary of
every rank, and exits with the failed rank's exit code (128+N when signal N killed it).
With --max-restarts N, it then starts every rank again instead, up to N times, and the summary
lists every attempt; the exit code is the last attempt's. A signal to ddprun, or a PROGRAM
that cannot be run, ends the job without a restart.
When a job fails and the ranks left flight records, ddprun says who was where: which ranks wait in which
collective, which rank is behind or in a different call, which wrote no record. E.g.:
  ddprun: who was where, from the ranks' flight records in /tmp/ddprun_flight_Jx3k2a:
  ddprun:   ranks 0, 2 wait in all_reduce #4 (SUM, torch.float32, 1 elements)
  ddprun:   rank 1 last finished #3 and is in barrier #4
SIGINT, SIGTERM and SIGHUP sent to ddprun are passed on to every rank in the same way, and
ddprun exits 128+N; a second one sends SIGKILL at once. Each rank leads a process group of
its own; every signal goes to the whole group, so a rank's children stop with it. What the
ranks leave running when they exit gets SIGTERM, then SIGKILL after the grace period: ddprun
exits when nothing of the job is left.

With --redirects or --tee, each rank writes its own log files (the files hold every byte it
wrote, even if it crashes); ddprun names the folder when it starts and again when a rank
fails. A program that prints through stdio (printf, std::cout) buffers its output in blocks
when stdout is a file, and loses the unflushed part if it crashes: flush, or write whole lines
with write() as dist::out() does.

Exit codes:
  0       every rank exited 0
  N       the first failed rank's exit code (128+signal if a signal killed it)
  128+N   ddprun was stopped by signal N
  2       bad usage, PROGRAM cannot be run (not found, not executable; for a script: it
          or its Python not found), or the log folder cannot be created
  1       ddprun could not start the ranks (no process could be made, no free port)

Examples:
  ddprun --nproc-per-node 4 ./build/cpu/bin/ch04_all_reduce
  ddprun --standalone --nproc_per_node=2 ./build/cpu/bin/ch01_get_dist_info
  # a PyTorch script, as torchrun --standalone --nproc-per-node 2 runs it
  ddprun --standalone --nproc-per-node 2 chapters/01_get_dist_info/twin.py
  # a script written for python -m torch.distributed.launch (torch 1.x): --local_rank=N
  ddprun --nproc_per_node 2 --local-rank-arg=underscore main.py
  # restart every rank up to 3 times after a failure, as torchrun --max-restarts 3 does
  ddprun --nproc-per-node 4 --max-restarts 3 ./build/cpu/bin/ch04_all_reduce
  # each rank's output in logs/none_XXXXXX/attempt_0/LOCAL_RANK/, and on the terminal too
  ddprun --nproc-per-node 2 --log-dir logs --tee 3 ./build/cpu/bin/ch04_all_reduce
  # two machines with two ranks each: run one line on each machine
  ddprun --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 10.0.0.1 ./prog
  ddprun --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 10.0.0.1 ./prog
)";
}

}  // namespace ddprun
