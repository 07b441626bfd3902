// Chapter 10's driver plumbing: start ddprun as one or two "machines", collect what they print,
// and never wait past a deadline. Nothing here is distributed training; it is what a person does
// in two terminals, done by a program so that every case ends by itself.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace ch10 {

// One ddprun, as one machine of the job would run it.
struct MachineCommand {
  std::string name;               // "machine A", shown before its lines
  std::vector<std::string> argv;  // ddprun and its arguments
};

// What one machine's ddprun did.
struct MachineResult {
  std::string name;
  std::string output;  // its stdout and stderr, in the order they came
  int exit_code = -1;  // ddprun's exit code (128 + S if a signal S ended it)
};

struct JobResult {
  std::vector<MachineResult> machines;
  bool timed_out = false;  // the deadline passed: every process was killed
  std::chrono::duration<double> elapsed{};
};

// Starts every machine's ddprun at once, with `env` added to this process's environment, each in
// a process group of its own. Echoes each line it prints to stderr as "  <prefix>| line" as it
// comes, waits until all have exited, and kills every process group still alive at `deadline`.
// Throws dist::Error if a process cannot be started.
JobResult run_job(const std::vector<MachineCommand>& machines,
                  const std::vector<std::pair<std::string, std::string>>& env,
                  std::chrono::seconds deadline);

// Makes SIGINT, SIGTERM and SIGHUP, sent to this program, reach the jobs too: run_job starts
// each ddprun in a process group of its own (so that a deadline can kill it whole), where a
// Ctrl-C in the terminal does not reach it. Each job's group gets SIGTERM (ddprun then stops its
// ranks), and this program then dies of the signal as it would have.
void pass_stop_signals_to_jobs();

// A TCP port on 127.0.0.1 that is free now (the kernel picks it). Like ddprun --standalone, it is
// not reserved: another process may take it before the job binds it.
int free_port();

// A socket that listens on 127.0.0.1:port until it is destroyed, without ever answering: the
// "other job" that already holds a port.
class PortHolder {
 public:
  PortHolder();  // listens on a port the kernel picks
  ~PortHolder();
  PortHolder(const PortHolder&) = delete;
  PortHolder& operator=(const PortHolder&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// The directory holding this program, where CMake puts ddprun and ch10_broken too.
std::string program_directory();

}  // namespace ch10
