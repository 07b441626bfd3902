// ddprun — start one process per rank, the way torchrun does, and stop them all when one fails.
//
// A distributed program is N copies of one program that find each other. Something has to
// start the copies, tell each one who it is (RANK, LOCAL_RANK, WORLD_SIZE) and where to meet
// (MASTER_ADDR:MASTER_PORT), and, just as important, stop them all when one of them dies:
// otherwise the survivors wait forever in their next collective for a rank that is gone.
// PyTorch users know torchrun for this; ddprun does the same for the programs of this
// tutorial, or any program that reads those variables, runs a Python script (a name ending in
// .py) or module (-m) with python3 -u as torchrun does, and spells its flags as torchrun does,
// so command lines paste across:
//
//   ddprun --nproc-per-node 4 ./build/cpu/bin/ch04_all_reduce
//   ddprun: starting 4 ranks (node 0 of 1, ranks 0-3), master 127.0.0.1:29500
//
// The ranks share ddprun's stdout and stderr and prefix their own lines, unless --redirects or
// --tee sends them to a log file per rank (logs.h), as torchrun's flags of the same names do.
//
// When a rank fails, --max-restarts N stops every rank and starts them all again, up to N
// times, as torchrun does; each rank is told which attempt it is (TORCHELASTIC_RESTART_COUNT).
//
// What it leaves out: elastic membership (--nnodes MIN:MAX); rendezvous backends (the ranks meet at
// MASTER_ADDR:MASTER_PORT, where rank 0 listens); and starting the other machines: each machine
// runs its own ddprun with its --node-rank.
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "agents.h"
#include "flight.h"
#include "launch.h"
#include "logs.h"
#include "options.h"
#include "report.h"
#include "supervise.h"

namespace {

int usage_failure(const ddprun::UsageError& e) {
  ddprun::say("error: " + std::string(e.what()));
  ddprun::say("hint: " + e.hint());
  return ddprun::kExitUsage;
}

// "ranks 0-3", or "rank 2" when there is one.
std::string rank_range(const ddprun::Options& o) {
  const int first = o.node_rank * o.nproc_per_node;
  const int last = first + o.nproc_per_node - 1;
  if (first == last) return "rank " + std::to_string(first);
  return "ranks " + std::to_string(first) + "-" + std::to_string(last);
}

// The resolved configuration, printed once, before anything starts.
void announce(const ddprun::Options& o, const ddprun::RankLogs& logs) {
  if (ddprun::sets_omp_num_threads(o)) {
    ddprun::say("setting OMP_NUM_THREADS=1 for each rank (it was unset), so that " +
                std::to_string(o.nproc_per_node) +
                " ranks do not oversubscribe the cores; export it to choose another value");
  }
  ddprun::say("starting " + ddprun::count_of(o.nproc_per_node, "rank") + " (node " +
              std::to_string(o.node_rank) + " of " + std::to_string(o.nnodes) + ", " +
              rank_range(o) + "), master " + o.master_addr + ":" + std::to_string(o.master_port) +
              (o.standalone ? " (picked by --standalone)" : ""));
  if (o.runs != ddprun::Options::Runs::kAsIs) {
    // Which Python: a rank that cannot import torch is most often run by another one.
    ddprun::say("each rank runs " + ddprun::python_interpreter() + " -u " +
                (o.runs == ddprun::Options::Runs::kModule ? "-m " : "") + o.program[0] +
                " (PYTHON_EXEC chooses another Python)");
  }
  if (!logs.enabled()) return;
  const std::string files = logs.description();
  if (files.empty()) {
    ddprun::say(
        "--log-dir without --redirects or --tee: every rank writes to this terminal, and "
        "its folder in " +
        logs.attempt_dir() + " stays empty (torchrun's default too); add --redirects 3 or --tee 3");
  } else {
    ddprun::say("logs in " + logs.attempt_dir() + "/LOCAL_RANK/: " + files);
  }
}

// Where node 0's ddprun hosts the agents' rendezvous, and how long the machines wait.
ddprun::AgentSettings agent_settings(const ddprun::Options& o) {
  ddprun::AgentSettings s;
  s.address = o.master_addr;
  s.port = o.agent_port != 0 ? o.agent_port : o.master_port + 1;
  const char* token = std::getenv("DIST_STORE_TOKEN");
  s.token = token != nullptr ? token : "";
  s.node_rank = o.node_rank;
  s.nnodes = o.nnodes;
  s.max_restarts = o.max_restarts;
  s.join_timeout_s = o.join_timeout_s;
  s.exit_barrier_timeout_s = o.exit_barrier_timeout_s;
  s.connect_timeout_s = o.join_timeout_s;  // node 0 may start later than this machine
  s.heartbeat_s = o.monitor_interval_s;
  return s;
}

// "first failure: rank 3 exited with code 1" → "rank 3 exited with code 1", for the others.
std::string failure_for_others(const std::string& why) {
  const std::string prefix = "first failure: ";
  return why.starts_with(prefix) ? why.substr(prefix.size()) : why;
}

}  // namespace

int main(int argc, char** argv) {
  // ---- Step 1: read the command line; a bad value stops here, with exit code 2
  ddprun::Options options;
  try {
    options = ddprun::parse_options(argc, argv);
  } catch (const ddprun::UsageError& e) {
    return usage_failure(e);
  }
  if (options.action == ddprun::Options::Action::kHelp) {
    std::fputs(ddprun::help_text().c_str(), stdout);
    return 0;
  }
  if (options.action == ddprun::Options::Action::kVersion) {
    std::printf("ddprun %s\n", DDPRUN_VERSION);
    return 0;
  }

  // ---- Step 2: settle where the ranks meet, and where their logs go
  // --standalone asks the kernel for a free port.
  if (options.standalone) {
    try {
      options.master_port = ddprun::pick_free_port();
    } catch (const std::system_error& e) {
      ddprun::say("error: --standalone could not find a free port on 127.0.0.1: " +
                  std::string(e.what()));
      return ddprun::kExitCannotStart;
    }
  }

  // A job on one machine gets a store token of its own, so that no other process can join its
  // rendezvous or read its keys. On several machines every node's ranks need the same token,
  // which one ddprun cannot invent for the others: export DIST_STORE_TOKEN on each node.
  const char* token = std::getenv("DIST_STORE_TOKEN");
  if (options.nnodes == 1 && (token == nullptr || *token == '\0')) {
    try {
      options.store_token = ddprun::new_store_token();
    } catch (const std::system_error& e) {
      ddprun::say("error: could not make a store token: " + std::string(e.what()));
      return ddprun::kExitCannotStart;
    }
  }

  // Each run gets a new folder for its logs, inside --log-dir (logs.h); a folder that cannot be
  // made stops ddprun here, with exit code 2, before any rank starts.
  std::optional<ddprun::RankLogs> logs;
  try {
    logs.emplace(options);
  } catch (const ddprun::UsageError& e) {
    return usage_failure(e);
  }

  // The ranks' flight records (flight.h): DIST_TRACE_DIR as exported, or a folder ddprun makes.
  const ddprun::FlightDir flight = ddprun::prepare_flight_dir();
  std::vector<int> local_ranks;  // the global ranks of this machine, whose records it reads
  for (int i = 0; i < options.nproc_per_node; ++i) {
    local_ranks.push_back(options.node_rank * options.nproc_per_node + i);
  }

  // ---- Step 3: hold SIGCHLD, SIGINT, SIGTERM and SIGHUP, so none is lost while ranks start
  const ddprun::SignalMasks masks = ddprun::block_watched_signals();
  ddprun::adopt_orphans();

  // ---- Step 4: start one process per local rank, each told who it is and where to meet; again
  // for every restart (--max-restarts), in a log folder of its own (attempt_K)
  announce(options, *logs);

  // On several machines with restarts, every machine's ddprun joins the agents' rendezvous
  // (agents.h), which node 0's hosts: they start each attempt together, and a failure on any
  // machine ends the attempt on all of them.
  std::unique_ptr<ddprun::MachineAgents> agents;
  if (options.nnodes > 1 && options.max_restarts > 0) {
    try {
      agents = std::make_unique<ddprun::MachineAgents>(agent_settings(options));
    } catch (const ddprun::AgentError& e) {
      ddprun::say("error: " + std::string(e.what()));
      ddprun::say(
          "hint: start node 0's ddprun too, and give every node the same --master-addr, "
          "--agent-port, --nnodes and --max-restarts and the same DIST_STORE_TOKEN");
      return ddprun::kExitCannotStart;
    }
  }
  bool agents_over = false;  // the rendezvous ended the job (abort), or was lost
  ddprun::Supervisor* supervising = nullptr;
  // Before each attempt: after a failure of this machine's ranks, tell node 0 and learn its
  // decision; then wait until every machine has joined the attempt.
  const auto join_attempt = [&](int attempt) -> std::optional<ddprun::Launch> {
    ddprun::AgentNews news;
    if (attempt > agents->attempt()) {
      news = agents->after_failure(supervising->ended_exit_code(),
                                   failure_for_others(supervising->ended_why()));
      if (news.kind != ddprun::AgentNews::Kind::kRestart) {
        agents_over = true;
        return ddprun::Launch{{}, news.text, "", news.code};
      }
    }
    news = agents->begin_attempt();
    if (news.kind == ddprun::AgentNews::Kind::kGo) return std::nullopt;
    agents_over = true;
    return ddprun::Launch{{}, news.text, "", news.code};
  };

  const auto start_attempt = [&](int attempt) {
    if (agents) {
      if (std::optional<ddprun::Launch> refused = join_attempt(attempt)) return *refused;
    }
    if (attempt > 0) {
      ddprun::report_flight_attempt(flight, attempt - 1, local_ranks, supervising->ended_exits());
      // --standalone: a new free port for each attempt, as torchrun --standalone's agent picks
      // one per rendezvous round (torch/distributed/elastic/agent/server/api.py,
      // _set_master_addr_port). The last attempt's port was free for a moment after its ranks
      // ended, and another program may hold it now: ranks that meet there could meet a stranger
      // (a torch rank's store waits for it until its timeout, 30 minutes in 1.13).
      if (options.standalone) {
        try {
          options.master_port = ddprun::pick_free_port();
        } catch (const std::system_error& e) {
          return ddprun::Launch{{},
                                "error: --standalone could not find a free port on 127.0.0.1 "
                                "for attempt " +
                                    std::to_string(attempt) + ": " + e.what(),
                                "",
                                ddprun::kExitCannotStart};
        }
      }
      try {
        logs->begin_attempt(attempt);
      } catch (const ddprun::UsageError& e) {
        return ddprun::Launch{{}, e.what(), e.hint(), ddprun::kExitCannotStart};
      }
      if (!logs->description().empty()) {
        ddprun::say("logs of attempt " + std::to_string(attempt) + " in " + logs->attempt_dir() +
                    "/LOCAL_RANK/");
      }
    }
    ddprun::Launch launch = ddprun::start_ranks(options, masks.original, *logs, attempt);
    logs->start_tee();
    return launch;
  };

  // ---- Step 5: supervise until every rank has exited; the first failure stops the rest, and
  // starts them all again while restarts are left
  ddprun::Supervisor supervisor(start_attempt, options.grace_period_s, options.max_restarts);
  supervisor.before_reports([&logs](bool ranks_done) { logs->catch_up(ranks_done); });
  supervising = &supervisor;
  if (agents) {
    // News while the ranks run: another machine failed (restart), or the job is over.
    const int fd = agents->fd();
    supervisor.watch_fd(fd, [&agents, &agents_over, &supervisor, fd] {
      const ddprun::AgentNews news = agents->news();
      using Kind = ddprun::AgentNews::Kind;
      if (news.kind == Kind::kRestart) {
        supervisor.end_attempt("node " + std::to_string(news.node) + " failed (" + news.text + ")",
                               1);
      } else if (news.kind == Kind::kAbort || news.kind == Kind::kLost) {
        agents_over = true;
        supervisor.unwatch_fd(fd);
        ddprun::say("error: " + news.text);
        supervisor.stop_all(SIGTERM, news.code, news.text);
      }
    });
  }
  int exit_code = supervisor.run(masks.watched);
  // The end of the job, on several machines: a success waits for every machine (the exit
  // barrier); a failure of this machine's ranks with no restarts left is told to the others.
  if (agents && !agents_over && supervisor.interrupted()) {
    agents->stopped(exit_code - 128);  // the job is over on every machine, not restarted there
  } else if (agents && !agents_over) {
    if (exit_code == 0) {
      const ddprun::AgentNews news = agents->after_success();
      if (news.kind != ddprun::AgentNews::Kind::kFinish) {
        ddprun::say("error: " + news.text);
        exit_code = news.code;
      }
    } else {
      agents->after_failure(exit_code, failure_for_others(supervisor.ended_why()));
    }
  }
  logs->finish();
  if (exit_code != 0 && logs->enabled()) {
    ddprun::say("each rank's own output: " + logs->attempt_dir() + "/LOCAL_RANK/");
  }
  // ---- Step 6: a failed job: who was where, from the ranks' flight records
  ddprun::report_flight(flight, exit_code, local_ranks, supervisor.ended_exits());
  return exit_code;
}
