// LoopWaker: see gloo_loop.h.
#include "backends/gloo_loop.h"

#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "dist/check.h"

namespace dist::backends {

LoopWaker::LoopWaker(gloo::transport::tcp::Device& device) {
  fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (fd_ < 0) throw Error(std::string("eventfd for Gloo's event loop: ") + std::strerror(errno));
  // Level-triggered (no EPOLLET): while the counter is not 0, every epoll_wait returns at once.
  device.registerDescriptor(fd_, EPOLLIN, this);
}

LoopWaker::~LoopWaker() {
  ::close(fd_);
}

void LoopWaker::arm(Clock::duration limit) {
  std::lock_guard lock(mu_);
  const auto now = Clock::now();
  until_ = limit >= Clock::time_point::max() - now ? Clock::time_point::max() : now + limit;
  if (armed_) return;
  armed_ = true;
  const std::uint64_t one = 1;
  // Adding 1 to a counter of 0 cannot fail; if it did, the waits would last Gloo's 10 ms.
  [[maybe_unused]] const ssize_t written = ::write(fd_, &one, sizeof one);
}

void LoopWaker::disarm() {
  std::lock_guard lock(mu_);
  if (armed_) drain();
}

void LoopWaker::handleEvents(int /*events*/) {
  {
    std::lock_guard lock(mu_);
    if (!armed_ || Clock::now() >= until_) {
      drain();
      return;
    }
  }
  // Give the core away before the next turn: the thread waiting for the turn needs it, and so
  // do the other ranks where there are fewer cores than threads. Without this, a turn every
  // few microseconds on 2 cores kept the waiting thread off them for milliseconds.
  ::sched_yield();
}

void LoopWaker::drain() {
  std::uint64_t count = 0;
  [[maybe_unused]] const ssize_t got = ::read(fd_, &count, sizeof count);  // EAGAIN: already 0
  armed_ = false;
}

}  // namespace dist::backends
