// WorkerSignals: keeps the signals a process is asked to act on away from the library's threads
// (internal).
//
// A signal sent to a process (kill PID, ddprun stopping a rank) goes to any one of its threads
// that does not block it. The flight recorder's SIGTERM and SIGUSR1 handlers (dist/
// flight_recorder.h) write what the rank was doing: if the signal lands on a background thread
// (Gloo's event loop, the store's server, a group's communication thread, DDP's worker), the main
// thread runs on meanwhile, and the record can show calls made after the signal. That is what a
// rank stopped with SIGSTOP showed, now and then, once ddprun sent SIGTERM and SIGCONT: every
// thread wakes at once, and the one that takes the signal is chance. A thread starts with its
// creator's signal mask, so the library starts each of its threads while one of these guards
// holds SIGTERM and SIGUSR1 blocked in the creating thread: the new thread keeps them blocked
// for its life, and the process's threads that do not (the program's own) take them.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace dist::util {

class WorkerSignals {
 public:
  WorkerSignals() {
    sigset_t blocked;
    sigemptyset(&blocked);
    sigaddset(&blocked, SIGTERM);
    sigaddset(&blocked, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &blocked, &previous_);
  }
  ~WorkerSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  WorkerSignals(const WorkerSignals&) = delete;
  WorkerSignals& operator=(const WorkerSignals&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace dist::util
