// probe_worker — a stand-in for a distributed program, for the launcher tests.
//
// It prints, on one line, what its launcher gave it: the variables torchrun sets and its own
// argv. Then, on request, it misbehaves, so that the tests can watch ddprun react:
//
//   --exit-on-rank R:CODE   rank R exits with CODE after a short delay (--fail-after)
//   --sigkill-on-rank R     rank R kills itself with SIGKILL after a short delay
//   --stop-on-rank R        rank R stops itself with SIGSTOP at once (and exits 0 if continued)
//   --sleep SECONDS         every other rank sleeps this long, then exits 0
//   --fail-after SECONDS    the delay of --exit-on-rank and --sigkill-on-rank (default 0.1 s):
//                           longer where the test needs the other ranks started first
//   --ignore-sigterm        ignore SIGTERM, so that only SIGKILL can stop this rank
//   --lines N               first print N lines "rank R out I" on stdout and "rank R err I" on
//                           stderr, then "rank R unterminated" on stderr with no newline (for
//                           the log files: every line, in order, and the last one as it was)
//
// Any other argument (such as --local-rank=N) is ignored; it only shows up in argv=.
// It talks to no other rank: it tests the launcher, not communication.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

#include "launcher_variables.h"

namespace {

// Long enough for the other ranks to be running when this one fails, short for the tests.
constexpr double kFailureDelayS = 0.1;

// Besides what ddprun sets for every rank (tests/support/launcher_variables.h): the thread count
// it sets only sometimes, and a variable of the tests' own, to see the environment passed on.
const char* const kAlsoPrinted[] = {"OMP_NUM_THREADS", "DDPRUN_TEST_MARKER"};

struct Behaviour {
  int exit_rank = -1;
  int exit_code = 0;
  int sigkill_rank = -1;
  int stop_rank = -1;
  double sleep_s = 0;
  double fail_after_s = kFailureDelayS;
  int lines = 0;
  bool ignore_sigterm = false;
};

Behaviour read_behaviour(int argc, char** argv) {
  Behaviour b;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--exit-on-rank") {
      b.exit_rank = std::stoi(value.substr(0, value.find(':')));
      b.exit_code = std::stoi(value.substr(value.find(':') + 1));
    } else if (flag == "--sigkill-on-rank") {
      b.sigkill_rank = std::stoi(value);
    } else if (flag == "--stop-on-rank") {
      b.stop_rank = std::stoi(value);
    } else if (flag == "--sleep") {
      b.sleep_s = std::stod(value);
    } else if (flag == "--fail-after") {
      b.fail_after_s = std::stod(value);
    } else if (flag == "--lines") {
      b.lines = std::stoi(value);
    }
  }
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--ignore-sigterm") b.ignore_sigterm = true;
  }
  return b;
}

// One line, one write(): lines from several ranks never tear into each other.
void print_what_the_launcher_gave(int argc, char** argv) {
  std::string line = "probe: PID=" + std::to_string(::getpid());
  const auto print = [&](const char* name) {
    const char* value = std::getenv(name);
    line += std::string(" ") + name + "=" + (value != nullptr ? value : "<unset>");
  };
  for (const char* name : dist::testing::kDdprunVariables) print(name);
  for (const char* name : kAlsoPrinted) print(name);
  line += " argv=";
  for (int i = 1; i < argc; ++i) line += (i > 1 ? " " : "") + std::string(argv[i]);
  line += "\n";
  [[maybe_unused]] const ssize_t written = ::write(STDOUT_FILENO, line.data(), line.size());
}

void write_text(int fd, const std::string& text) {
  [[maybe_unused]] const ssize_t written = ::write(fd, text.data(), text.size());
}

// Each line with its own write(), as a rank's lines come: the log file must hold them all.
void print_lines(int rank, int n) {
  const std::string who = "rank " + std::to_string(rank);
  for (int i = 0; i < n; ++i) {
    write_text(STDOUT_FILENO, who + " out " + std::to_string(i) + "\n");
    write_text(STDERR_FILENO, who + " err " + std::to_string(i) + "\n");
  }
  write_text(STDERR_FILENO, who + " unterminated");
}

}  // namespace

int main(int argc, char** argv) {
  const Behaviour behaviour = read_behaviour(argc, argv);
  // Before the line is printed: a test that has seen the line knows SIGTERM is already ignored.
  if (behaviour.ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
  print_what_the_launcher_gave(argc, argv);

  const char* rank_text = std::getenv("RANK");
  const int rank = rank_text != nullptr ? std::atoi(rank_text) : -1;
  if (behaviour.lines > 0) print_lines(rank, behaviour.lines);
  if (rank == behaviour.exit_rank) {
    std::this_thread::sleep_for(std::chrono::duration<double>(behaviour.fail_after_s));
    return behaviour.exit_code;
  }
  if (rank == behaviour.stop_rank) {
    std::raise(SIGSTOP);
    return 0;
  }
  if (rank == behaviour.sigkill_rank) {
    std::this_thread::sleep_for(std::chrono::duration<double>(behaviour.fail_after_s));
    std::raise(SIGKILL);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(behaviour.sleep_s));
  return 0;
}
