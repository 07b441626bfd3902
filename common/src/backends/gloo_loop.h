// LoopWaker: keeps Gloo's event loop turning while a rank connects and closes its pairs
// (internal).
//
// Gloo's TCP device runs an event loop on a thread of its own, which sleeps in epoll_wait for at
// most 10 ms at a time. Whenever Gloo takes a socket out of that loop, it then waits for the
// loop's next turn, so that the loop is known to be done with the socket: the connecting side of
// a new pair gives up its listening socket, a pair switches to synchronous mode (gloo_mesh.h), a
// pair closes, the device stops. With nothing else happening the next turn is the 10 ms timeout,
// so each of these waits costs 5 ms on average, and a rank has about six of them in its life:
// more than everything else a 2-rank job does (bench/README.md, "A job's whole life"). That is
// true of Debian's Gloo (0.0~git20220518) and of Gloo today, whose Loop::unregisterDescriptor
// still waits for a turn of a loop that wakes every 10 ms.
//
// The waker is one more descriptor in the loop, an eventfd. It cannot change how Gloo waits,
// only when the turn comes: while armed, the eventfd stays readable, so epoll_wait returns at
// once, each turn follows the last (after a sched_yield, so that the waiting thread gets the
// core), and a waiting call goes on within microseconds instead of at the next timeout. A loop
// that turns without pause costs CPU, so the waker is armed only around the calls that wait for
// a turn: a group's teardown; the switch of the pairs to synchronous mode; and the connection
// of a pair, from the moment this rank reads the peer's address (Gloo connects that pair right
// after) for at most `limit`, because on the listening side of a pair the same call waits for
// the peer instead, and a slow peer must not keep the loop spinning. A wait that outlasts the
// limit is no worse than Gloo on its own: it ends at the next 10 ms turn.
#pragma once

#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

#include <chrono>
#include <mutex>

namespace dist::backends {

class LoopWaker final : public gloo::transport::tcp::Handler {
 public:
  using Clock = std::chrono::steady_clock;

  // Registers the eventfd with `device`'s loop. The waker must outlive that loop: the loop may
  // call handleEvents until the device is destroyed.
  explicit LoopWaker(gloo::transport::tcp::Device& device);
  ~LoopWaker() override;
  LoopWaker(const LoopWaker&) = delete;
  LoopWaker& operator=(const LoopWaker&) = delete;

  // Keeps the loop turning until disarm(), or until `limit` has passed.
  void arm(Clock::duration limit = Clock::duration::max());
  void disarm();

  // Called by the loop's thread on each turn while armed; disarms once the limit has passed.
  void handleEvents(int events) override;

 private:
  void drain();  // makes the eventfd unreadable; mu_ held

  int fd_ = -1;
  std::mutex mu_;
  bool armed_ = false;
  Clock::time_point until_{};
};

}  // namespace dist::backends
