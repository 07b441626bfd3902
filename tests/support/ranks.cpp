// Test support: run a function as N real processes (see ranks.h).
#include "ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "dist/check.h"
#include "dist/run_main.h"
#include "launcher_variables.h"

namespace dist::testing {
namespace {

int run_child(int rank, const std::function<int(int)>& body, FILE* capture) {
  ::dup2(fileno(capture), STDOUT_FILENO);
  ::dup2(fileno(capture), STDERR_FILENO);
  const int code = dist::run_main([&] { return body(rank); });
  std::fflush(nullptr);
  return code;
}

}  // namespace

std::vector<RankResult> run_ranks(int world_size, const std::function<int(int)>& body,
                                  std::chrono::seconds deadline) {
  std::vector<RankResult> results(static_cast<std::size_t>(world_size));
  std::vector<pid_t> pids(static_cast<std::size_t>(world_size), -1);
  std::vector<FILE*> captures(static_cast<std::size_t>(world_size), nullptr);
  std::fflush(nullptr);
  for (int r = 0; r < world_size; ++r) {
    captures[static_cast<std::size_t>(r)] = std::tmpfile();
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(run_child(r, body, captures[static_cast<std::size_t>(r)]));
    pids[static_cast<std::size_t>(r)] = pid;
  }
  const auto end = std::chrono::steady_clock::now() + deadline;
  int running = world_size;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (int r = 0; r < world_size; ++r) {
        if (pids[static_cast<std::size_t>(r)] != pid) continue;
        results[static_cast<std::size_t>(r)].exit_code =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        pids[static_cast<std::size_t>(r)] = -1;
        --running;
      }
      continue;
    }
    if (std::chrono::steady_clock::now() > end) {
      for (pid_t p : pids) {
        if (p > 0) ::kill(p, SIGKILL);
      }
      for (pid_t p : pids) {
        if (p > 0) ::waitpid(p, nullptr, 0);
      }
      break;  // exit_code stays -1 for the killed ones
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < world_size; ++r) {
    FILE* f = captures[static_cast<std::size_t>(r)];
    std::rewind(f);
    std::string out;
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
    results[static_cast<std::size_t>(r)].output = out;
  }
  return results;
}

Listener listen_on_loopback() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 16) != 0) {
    throw std::runtime_error("cannot listen on 127.0.0.1");
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return {fd, ntohs(addr.sin_port)};
}

int free_port() {
  const Listener l = listen_on_loopback();
  ::close(l.fd);
  return l.port;
}

void set_env(const std::map<std::string, std::string>& vars) {
  for (const auto& [k, v] : vars) {
    if (v.empty()) {
      ::unsetenv(k.c_str());
    } else {
      ::setenv(k.c_str(), v.c_str(), 1);
    }
  }
}

void clear_launcher_env() {
  for (const char* name : kDdprunVariables) ::unsetenv(name);
  for (const char* name : kOtherLauncherVariables) ::unsetenv(name);
}

void set_launcher_env(int rank, int world_size, int port) {
  clear_launcher_env();
  set_env({{"RANK", std::to_string(rank)},
           {"WORLD_SIZE", std::to_string(world_size)},
           {"LOCAL_RANK", std::to_string(rank)},
           {"LOCAL_WORLD_SIZE", std::to_string(world_size)},
           {"MASTER_ADDR", "127.0.0.1"},
           {"MASTER_PORT", std::to_string(port)}});
}

std::vector<RankResult> run_group(int world_size, const dist::InitOptions& options,
                                  const std::function<int(int rank)>& body, const GroupRun& run) {
  const int port = run.port != 0 ? run.port : free_port();
  return run_ranks(
      world_size,
      [&](int rank) {
        set_launcher_env(rank, world_size, port);
        set_env(run.env);
        dist::init_process_group(options);
        const int code = body(rank);
        if (dist::is_initialized()) dist::destroy_process_group();
        return code;
      },
      run.deadline);
}

void expect_all_ok(const std::vector<RankResult>& results) {
  for (const auto& r : results) EXPECT_EQ(r.exit_code, 0) << describe(results);
}

std::string describe(const std::vector<RankResult>& results) {
  std::ostringstream s;
  for (std::size_t r = 0; r < results.size(); ++r) {
    s << "---- rank " << r << " exit " << results[r].exit_code << "\n" << results[r].output;
  }
  return s.str();
}

}  // namespace dist::testing
