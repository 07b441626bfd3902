// Test helpers compiled by nvcc (spin_kernel.cu), callable from plain C++ tests.
#pragma once

#include <chrono>

namespace dist::testing {

// Queues a one-thread kernel on the legacy default stream that returns after `duration`. The
// call itself returns at once; false if the launch failed.
bool spin_on_default_stream(std::chrono::milliseconds duration);

// cudaDeviceSynchronize(): true when everything queued on the current GPU finished cleanly.
bool wait_for_the_gpu();

}  // namespace dist::testing
