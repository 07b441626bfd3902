// The agents' rendezvous: how the ddprun of every machine restarts its ranks in the same attempt.
//
// On one machine, ddprun sees every rank and restarts them all when one fails. On several, each
// ddprun sees only its own ranks: when a rank on machine B dies, the ranks on machine A do not
// die with it, they wait in their next collective until it times out. torchrun solves this with
// its agents (one per machine) meeting in a rendezvous of their own: with the c10d backend, a
// failed agent joins the next round, and the others notice it waiting (num_nodes_waiting in
// torch/distributed/elastic/agent/server/api.py, torch 1.13) and restart their workers too.
//
// ddprun does the same with a small line protocol of its own. Node 0's ddprun hosts an
// AgentServer (one thread, one poll loop) at --agent-port on its machine; every node's ddprun,
// node 0's included, talks to it through an AgentClient:
//
//   client                              server
//   hello TOKEN NODE NNODES MAXRESTARTS  welcome ROUND        (or: refused WHY)
//   join ROUND                           go ROUND             every node has joined ROUND
//   failed ROUND CODE WHY                restart ROUND+1 NODE WHY   to every node: stop, join again
//                                        abort CODE WHY       no restarts left, or a node missing
//   done ROUND                           finish               every node's ranks exited 0
//   stop CODE WHY                        abort CODE WHY       a ddprun was stopped (Ctrl-C)
//                                        abort CODE WHY       a node failed after another finished
//
// It is separate from the ranks' own store (which rank 0 hosts at MASTER_PORT): the ranks come
// and go with every attempt, the agents stay. Every wait has a deadline, and a node that misses
// one is named. DIST_STORE_TOKEN, which every node must share anyway, keeps strangers out.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

namespace ddprun {

// Where the agents meet, and how long they wait for each other.
struct AgentSettings {
  std::string address = "127.0.0.1";  // node 0's machine (--master-addr)
  int port = 29501;                   // --agent-port, by default MASTER_PORT + 1
  std::string token;                  // DIST_STORE_TOKEN
  int node_rank = 0;
  int nnodes = 1;
  int max_restarts = 0;
  double join_timeout_s = 60;           // --join-timeout: every node joins a round within this
  double exit_barrier_timeout_s = 300;  // --exit-barrier-timeout: torchrun's default, 300 s
  double connect_timeout_s = 60;        // a client keeps trying to reach node 0 this long
  // --monitor-interval: every machine's ddprun says "ping" this often; node 0 counts a machine
  // silent for 3 of them as failed (c10d's keep-alive: 5 s, 3 attempts, in torch 1.13).
  double heartbeat_s = 5;
};

// The rendezvous could not be set up or was lost: what() says which, and names the node.
class AgentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a client hears from the rendezvous.
struct AgentNews {
  enum class Kind {
    kGo,       // every node joined `round`: start the ranks
    kRestart,  // round `round - 1` ended: node `node` failed (`text`); stop the ranks, join again
    kAbort,    // the job is over: exit with `code`; `text` says why (names the node)
    kFinish,   // every node's ranks exited 0: exit 0
    kLost,     // the server is gone (node 0's ddprun died): `text` says so
  };
  Kind kind = Kind::kLost;
  int round = 0;
  int node = -1;
  int code = 0;
  std::string text;
};

// Node 0's side: accepts the nodes, keeps the round number, decides restarts and aborts.
// Runs in a thread of its own from the constructor to the destructor.
class AgentServer {
 public:
  // Binds the port on every interface, or throws AgentError naming the port and why.
  explicit AgentServer(const AgentSettings& settings);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  int port() const { return port_; }  // the bound port (settings.port 0: one the kernel picked)

 private:
  struct State;
  void loop();

  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a byte here ends the loop
  std::unique_ptr<State> state_;
  std::thread thread_;
};

// Every node's side: one connection to node 0's server for the whole life of ddprun.
class AgentClient {
 public:
  // Connects (retrying until settings.connect_timeout_s: node 0 may start later) and says
  // hello. Throws AgentError when node 0 cannot be reached, or it refuses (a wrong token, a
  // node rank already taken, different --nnodes or --max-restarts).
  explicit AgentClient(const AgentSettings& settings);
  ~AgentClient();
  AgentClient(const AgentClient&) = delete;
  AgentClient& operator=(const AgentClient&) = delete;

  // The round this node is in: the server's current round at hello, then each restart's.
  int round() const { return round_; }

  // Readable when the server has news: a supervision loop polls it beside its ranks.
  int fd() const { return fd_; }

  // Says "join the current round"; the answer comes through next().
  void join_round();

  // Joins the current round and waits for every other node: kGo, or kAbort naming the nodes
  // that did not join in time, or kLost.
  AgentNews join();

  // "My ranks failed in this round": the server answers every node with kRestart or kAbort,
  // read with next().
  void report_failed(int code, const std::string& why);

  // "This machine's ddprun was stopped (`why`: 'was stopped by SIGINT')": the server ends the
  // job on every node with kAbort and `code`.
  void report_stopped(int code, const std::string& why);

  // "My ranks exited 0 in this round" (the exit barrier): kFinish when every node has, read
  // with next(); a kAbort if another node failed meanwhile.
  void report_done();

  // The next piece of news, waiting at most `timeout` (forever without one); nullopt when the
  // time ran out. A kRestart moves round() on.
  std::optional<AgentNews> next(std::optional<std::chrono::milliseconds> timeout);

  // "I am alive": safe to call from another thread than the one reading.
  void ping() { send("ping"); }

 private:
  void send(const std::string& line);
  void close_connection();
  std::optional<std::string> read_line(std::optional<std::chrono::steady_clock::time_point> until);

  AgentSettings settings_;
  int fd_ = -1;
  int round_ = 0;
  std::string buffer_;
  std::mutex send_mutex_;  // ping() comes from another thread; the fd closes under it too
};

// One machine's part in the agents' rendezvous, as ddprun's restart loop uses it: node 0 hosts
// the server, and every node (node 0 too) is a client of it.
//
//   for each attempt:  begin_attempt()            kGo: start the ranks
//     while they run:  fd() readable → news()    kRestart / kAbort / kLost: stop the ranks
//     a rank failed:   after_failure(code, why)  kRestart: next attempt; kAbort: exit its code
//     all exited 0:    after_success()           kFinish: exit 0; kAbort: another node failed
//
// The waits also end at SIGINT, SIGTERM or SIGHUP (blocked by ddprun; read here through a
// signalfd), as a kAbort with code 128+signal: Ctrl-C never waits for another machine.
class MachineAgents {
 public:
  // Throws AgentError: the port cannot be bound (node 0), or node 0 cannot be reached.
  explicit MachineAgents(const AgentSettings& settings);
  ~MachineAgents();
  MachineAgents(const MachineAgents&) = delete;
  MachineAgents& operator=(const MachineAgents&) = delete;

  int attempt() const { return client_->round(); }
  int port() const { return settings_.port; }  // node 0: the port its server bound
  int fd() const { return client_->fd(); }
  AgentNews begin_attempt();
  AgentNews news();  // once fd() is readable
  AgentNews after_failure(int code, const std::string& why);
  AgentNews after_success();
  // A signal stopped this machine's ddprun: every machine stops (the others exit 128+signal).
  void stopped(int signal);

 private:
  // The next news that is not an earlier round's "go", waiting at most `limit`, or a signal.
  AgentNews wait(std::chrono::milliseconds limit, const std::string& waiting_for);

  AgentSettings settings_;
  std::unique_ptr<AgentServer> server_;  // node 0 only
  std::unique_ptr<AgentClient> client_;
  int signal_fd_ = -1;
  // The heartbeat: a thread that pings every settings_.heartbeat_s until the destructor.
  std::mutex pinger_mutex_;
  std::condition_variable pinger_wake_;
  bool pinger_stop_ = false;
  std::thread pinger_;
};

}  // namespace ddprun
