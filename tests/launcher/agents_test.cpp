// The agents' rendezvous (tools/ddprun/agents.h): node 0's server and the nodes' clients, on
// loopback, each node a client in a thread of this test.
//
// What it must get right: every node hears of a failure on any node and moves to the same next
// round; a node that does not come back, or does not finish, is named after the deadline; a
// stranger (a wrong token, a node rank taken twice) is turned away; a client whose server is
// gone hears so at once. Every wait here has a short deadline: nothing can hang.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "agents.h"

namespace {

using ddprun::AgentClient;
using ddprun::AgentError;
using ddprun::AgentNews;
using ddprun::AgentServer;
using ddprun::AgentSettings;
using ddprun::MachineAgents;
using Kind = AgentNews::Kind;
using namespace std::chrono_literals;

constexpr auto kWait =
    5000ms;  // no news in these tests takes near this unless agents.cpp is broken

AgentSettings settings(int nnodes, int max_restarts = 0) {
  AgentSettings s;
  s.port = 0;  // the server asks the kernel for a free port
  s.token = "job-token 42";
  s.nnodes = nnodes;
  s.max_restarts = max_restarts;
  s.join_timeout_s = 0.5;
  s.exit_barrier_timeout_s = 0.5;
  s.connect_timeout_s = 2;
  s.heartbeat_s = 60;  // bare clients do not ping: no test here lasts 3 heartbeats
  return s;
}

// A client for `node` of the job that `server` hosts.
std::unique_ptr<AgentClient> node_client(const AgentServer& server, AgentSettings s, int node) {
  s.port = server.port();
  s.node_rank = node;
  return std::make_unique<AgentClient>(s);
}

std::vector<std::unique_ptr<AgentClient>> all_nodes(const AgentServer& server,
                                                    const AgentSettings& s) {
  std::vector<std::unique_ptr<AgentClient>> nodes;
  for (int n = 0; n < s.nnodes; ++n) nodes.push_back(node_client(server, s, n));
  return nodes;
}

// Every node joins its current round at once (each in its own thread, as the machines would);
// returns what each heard.
std::vector<AgentNews> join_all(std::vector<std::unique_ptr<AgentClient>>& nodes) {
  std::vector<std::future<AgentNews>> joins;
  for (auto& node : nodes) {
    joins.push_back(std::async(std::launch::async, [&node] { return node->join(); }));
  }
  std::vector<AgentNews> news;
  for (auto& j : joins) news.push_back(j.get());
  return news;
}

AgentNews next_news(AgentClient& node) {
  const std::optional<AgentNews> news = node.next(kWait);
  if (!news) {
    ADD_FAILURE() << "no news within " << kWait.count() << " ms";
    return {};
  }
  return *news;
}

TEST(Agents, EveryNodeJoinsTheRoundThenFinishesTogether) {
  const AgentSettings s = settings(3);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  for (const AgentNews& news : join_all(nodes)) {
    EXPECT_EQ(news.kind, Kind::kGo);
    EXPECT_EQ(news.round, 0);
  }
  nodes[0]->report_done();
  nodes[2]->report_done();
  // The exit barrier: nobody hears "finish" while node 1's ranks still run.
  EXPECT_FALSE(nodes[0]->next(100ms).has_value());
  nodes[1]->report_done();
  for (auto& node : nodes) EXPECT_EQ(next_news(*node).kind, Kind::kFinish);
}

TEST(Agents, AFailureOnOneNodeRestartsEveryNodeInTheNextRound) {
  const AgentSettings s = settings(3, /*max_restarts=*/2);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[2]->report_failed(3, "rank 5 exited with code 3");
  for (auto& node : nodes) {
    const AgentNews news = next_news(*node);
    EXPECT_EQ(news.kind, Kind::kRestart);
    EXPECT_EQ(news.round, 1);
    EXPECT_EQ(news.node, 2);
    EXPECT_EQ(news.text, "rank 5 exited with code 3");
    EXPECT_EQ(node->round(), 1);
  }
  for (const AgentNews& news : join_all(nodes)) {
    EXPECT_EQ(news.kind, Kind::kGo);
    EXPECT_EQ(news.round, 1);
  }
  for (auto& node : nodes) node->report_done();
  for (auto& node : nodes) EXPECT_EQ(next_news(*node).kind, Kind::kFinish);
}

TEST(Agents, TwoNodesFailingAtOnceCostOneRestart) {
  const AgentSettings s = settings(2, /*max_restarts=*/1);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[0]->report_failed(1, "rank 0 exited with code 1");
  nodes[1]->report_failed(1, "rank 2 exited with code 1");
  for (auto& node : nodes) EXPECT_EQ(next_news(*node).kind, Kind::kRestart);
  for (const AgentNews& news : join_all(nodes)) EXPECT_EQ(news.kind, Kind::kGo);
  EXPECT_FALSE(nodes[0]->next(100ms).has_value()) << "the late report started another round";
}

TEST(Agents, AFailureAfterAnotherNodeFinishedEndsTheJob) {
  const AgentSettings s = settings(2, /*max_restarts=*/3);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[0]->report_done();
  nodes[1]->report_failed(1, "rank 3 exited with code 1");
  for (auto& node : nodes) {
    const AgentNews news = next_news(*node);
    EXPECT_EQ(news.kind, Kind::kAbort);
    EXPECT_EQ(news.code, 1);
    EXPECT_EQ(news.text,
              "node 1 failed in attempt 0 (rank 3 exited with code 1) after node 0 had finished; "
              "a finished machine does not start again");
  }
}

TEST(Agents, WithNoRestartsLeftEveryNodeStopsWithTheFailedRanksCode) {
  const AgentSettings s = settings(2, /*max_restarts=*/1);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[1]->report_failed(3, "rank 3 exited with code 3");
  for (auto& node : nodes) EXPECT_EQ(next_news(*node).kind, Kind::kRestart);
  join_all(nodes);
  nodes[1]->report_failed(137, "rank 2 was killed by signal 9 (SIGKILL)");
  for (auto& node : nodes) {
    const AgentNews news = next_news(*node);
    EXPECT_EQ(news.kind, Kind::kAbort);
    EXPECT_EQ(news.code, 137);
    EXPECT_EQ(
        news.text,
        "node 1 failed in attempt 1 (rank 2 was killed by signal 9 (SIGKILL)) and no restarts "
        "are left (--max-restarts 1)");
  }
}

TEST(Agents, AStoppedNodeEndsTheJobOnEveryNodeWithoutARestart) {
  const AgentSettings s = settings(2, /*max_restarts=*/3);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[1]->report_stopped(130, "was stopped by SIGINT");
  const AgentNews news = next_news(*nodes[0]);
  EXPECT_EQ(news.kind, Kind::kAbort);
  EXPECT_EQ(news.code, 130);
  EXPECT_EQ(news.text, "node 1 was stopped by SIGINT");
}

TEST(Agents, ANodeThatNeverJoinsIsNamedAfterTheJoinTimeout) {
  const AgentSettings s = settings(3);
  AgentServer server(s);
  auto node0 = node_client(server, s, 0);
  auto node1 = node_client(server, s, 1);
  const auto started = std::chrono::steady_clock::now();
  const AgentNews news = node0->join();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(news.kind, Kind::kAbort);
  EXPECT_EQ(news.code, 1);
  EXPECT_EQ(news.text.rfind("nodes 1, 2 did not join attempt 0 within 0.5 s (--join-timeout)", 0),
            0u)
      << news.text;
  EXPECT_GE(waited, 0.45);
  EXPECT_LT(waited, 3.0);
}

TEST(Agents, ANodeWhoseDdprunDiesRestartsTheOthersThenIsNamed) {
  const AgentSettings s = settings(3, /*max_restarts=*/3);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[1].reset();  // its connection closes, as when its ddprun is killed
  for (int n : {0, 2}) {
    const AgentNews news = next_news(*nodes[n]);
    EXPECT_EQ(news.kind, Kind::kRestart);
    EXPECT_EQ(news.node, 1);
    EXPECT_EQ(news.text, "its ddprun left the rendezvous: it exited or was killed");
  }
  nodes.erase(nodes.begin() + 1);  // nodes 0 and 2 join round 1; node 1 never comes back
  for (const AgentNews& news : join_all(nodes)) {
    EXPECT_EQ(news.kind, Kind::kAbort);
    EXPECT_EQ(news.text.rfind("node 1 did not join attempt 1 within 0.5 s (--join-timeout)", 0), 0u)
        << news.text;
  }
}

TEST(Agents, ANodeWhoseDdprunIsStartedAgainRejoinsTheCurrentRound) {
  AgentSettings s = settings(2, /*max_restarts=*/1);
  s.join_timeout_s = 5;
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[1].reset();
  EXPECT_EQ(next_news(*nodes[0]).kind, Kind::kRestart);
  nodes[1] = node_client(server, s, 1);
  EXPECT_EQ(nodes[1]->round(), 1);
  for (const AgentNews& news : join_all(nodes)) {
    EXPECT_EQ(news.kind, Kind::kGo);
    EXPECT_EQ(news.round, 1);
  }
}

TEST(Agents, ANodeThatDoesNotFinishIsNamedAfterTheExitBarrierTimeout) {
  const AgentSettings s = settings(2);
  AgentServer server(s);
  auto nodes = all_nodes(server, s);
  join_all(nodes);
  nodes[0]->report_done();
  const AgentNews news = next_news(*nodes[0]);
  EXPECT_EQ(news.kind, Kind::kAbort);
  EXPECT_EQ(news.text, "node 1 did not finish within 0.5 s of node 0 (--exit-barrier-timeout)");
}

TEST(Agents, AWrongTokenIsRefused) {
  const AgentSettings s = settings(2);
  AgentServer server(s);
  AgentSettings stranger = s;
  stranger.token = "job-token 43";
  try {
    node_client(server, stranger, 1);
    FAIL() << "a client with a wrong token was let in";
  } catch (const AgentError& e) {
    EXPECT_NE(std::string(e.what()).find("refused node 1: a wrong DIST_STORE_TOKEN"),
              std::string::npos)
        << e.what();
  }
  // The real node 1 still gets in: the stranger took nothing.
  auto node1 = node_client(server, s, 1);
  EXPECT_EQ(node1->round(), 0);
}

TEST(Agents, ANodeRankTakenTwiceOrOtherFlagsAreRefused) {
  const AgentSettings s = settings(2, 1);
  AgentServer server(s);
  auto node1 = node_client(server, s, 1);
  EXPECT_THROW(
      {
        try {
          node_client(server, s, 1);
        } catch (const AgentError& e) {
          EXPECT_NE(std::string(e.what()).find("node 1 is already connected"), std::string::npos);
          throw;
        }
      },
      AgentError);
  AgentSettings other = s;
  other.max_restarts = 2;
  EXPECT_THROW(
      {
        try {
          node_client(server, other, 0);
        } catch (const AgentError& e) {
          EXPECT_NE(std::string(e.what()).find("--max-restarts 2, node 0 with --nnodes 2 "
                                               "--max-restarts 1"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      AgentError);
}

TEST(Agents, AStrangerSpeakingAnotherProtocolIsDroppedAndHarmsNoOne) {
  const AgentSettings s = settings(2);
  AgentServer server(s);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(server.port()));
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  char byte;
  EXPECT_EQ(::read(fd, &byte, 1), 0) << "the server should close a connection without hello";
  ::close(fd);
  auto nodes = all_nodes(server, s);
  for (const AgentNews& news : join_all(nodes)) EXPECT_EQ(news.kind, Kind::kGo);
}

TEST(Agents, AClientHearsAtOnceWhenNode0IsGone) {
  const AgentSettings s = settings(2, 1);
  auto server = std::make_unique<AgentServer>(s);
  auto nodes = all_nodes(*server, s);
  join_all(nodes);
  server.reset();
  const AgentNews news = next_news(*nodes[1]);
  EXPECT_EQ(news.kind, Kind::kLost);
  EXPECT_NE(news.text.find("lost the agents' rendezvous: node 0's ddprun at 127.0.0.1:"),
            std::string::npos)
      << news.text;
}

TEST(Agents, AClientWithNoServerGivesUpAfterItsTimeout) {
  AgentSettings s = settings(2);
  s.connect_timeout_s = 0.3;
  {
    AgentServer probe(s);  // a port that was free a moment ago, and is closed again now
    s.port = probe.port();
  }
  s.node_rank = 1;
  const auto started = std::chrono::steady_clock::now();
  try {
    AgentClient client(s);
    FAIL() << "connected to a closed port";
  } catch (const AgentError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot reach node 0's ddprun at 127.0.0.1:"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("within 0.3 s: Connection refused"), std::string::npos)
        << e.what();
  }
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_GE(waited, 0.25);
  EXPECT_LT(waited, 2.0);
}

// ---- What ddprun's restart loop calls: MachineAgents

// A client for node `node` of the job that node 0's MachineAgents hosts.
std::unique_ptr<AgentClient> node_client(const MachineAgents& node0, AgentSettings s, int node) {
  s.port = node0.port();
  s.node_rank = node;
  return std::make_unique<AgentClient>(s);
}

// Waits until `agents` has news to read, as ddprun's supervision loop does (poll on its fd).
bool next_news_ready(const MachineAgents& agents) {
  pollfd p{agents.fd(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(kWait.count())) == 1;
}

TEST(MachineAgents, TwoMachinesRestartTogetherAndFinishTogether) {
  AgentSettings s = settings(2, /*max_restarts=*/1);
  MachineAgents a(s);
  s.port = a.port();
  s.node_rank = 1;
  MachineAgents b(s);
  const auto begin_both = [&] {
    auto on_b = std::async(std::launch::async, [&] { return b.begin_attempt(); });
    const AgentNews on_a = a.begin_attempt();
    EXPECT_EQ(on_a.kind, Kind::kGo);
    EXPECT_EQ(on_b.get().kind, Kind::kGo);
  };
  begin_both();
  const AgentNews answer = b.after_failure(3, "rank 2 exited with code 3");
  EXPECT_EQ(answer.kind, Kind::kRestart);
  EXPECT_EQ(answer.round, 1);
  const AgentNews on_a = a.news();
  EXPECT_EQ(on_a.kind, Kind::kRestart);
  EXPECT_EQ(on_a.node, 1);
  EXPECT_EQ(on_a.text, "rank 2 exited with code 3");
  EXPECT_EQ(a.attempt(), 1);
  begin_both();
  auto b_done = std::async(std::launch::async, [&] { return b.after_success(); });
  EXPECT_EQ(a.after_success().kind, Kind::kFinish);
  EXPECT_EQ(b_done.get().kind, Kind::kFinish);
}

// A machine that goes silent (powered off, or cut from the network: no connection closes) is
// dropped after 3 heartbeats; one that pings (MachineAgents) is kept.
TEST(MachineAgents, AMachineSilentFor3HeartbeatsFails) {
  AgentSettings s = settings(2);
  s.heartbeat_s = 0.1;
  MachineAgents a(s);
  s.port = a.port();
  auto silent = node_client(a, s, 1);  // a bare client: it never pings
  auto on_a = std::async(std::launch::async, [&] { return a.begin_attempt(); });
  EXPECT_EQ(silent->join().kind, Kind::kGo);
  EXPECT_EQ(on_a.get().kind, Kind::kGo);
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(next_news_ready(a));
  const AgentNews news = a.news();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(news.kind, Kind::kAbort);
  EXPECT_EQ(news.text,
            "node 1 failed in attempt 0 (its ddprun sent nothing for 0.3 s (3 x "
            "--monitor-interval): its machine is down or cannot reach node 0) and no restarts are "
            "left (--max-restarts 0)");
  EXPECT_LT(waited, 2.0);
}

// ddprun blocks SIGINT, SIGTERM and SIGHUP; a machine waiting for the others still ends at once.
TEST(MachineAgents, AStopSignalEndsTheWaitForTheOtherMachines) {
  sigset_t term, before;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &term, &before), 0);
  {
    AgentSettings s = settings(2);
    s.exit_barrier_timeout_s = 30;
    MachineAgents a(s);
    s.port = a.port();
    s.node_rank = 1;
    MachineAgents b(s);
    auto on_a = std::async(std::launch::async, [&] { return a.begin_attempt(); });
    EXPECT_EQ(b.begin_attempt().kind, Kind::kGo);
    EXPECT_EQ(on_a.get().kind, Kind::kGo);
    std::thread raise_later([] {
      std::this_thread::sleep_for(100ms);
      ::kill(::getpid(), SIGTERM);
    });
    const auto started = std::chrono::steady_clock::now();
    const AgentNews news = b.after_success();  // node 0 never finishes: only the signal ends it
    raise_later.join();
    EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
    EXPECT_EQ(news.kind, Kind::kAbort);
    EXPECT_EQ(news.code, 143);
    EXPECT_EQ(news.text, "stopped by SIGTERM while waiting for the other machines to finish");
  }
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &before, nullptr), 0);
}

}  // namespace
