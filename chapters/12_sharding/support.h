// Chapter 12's support code: what the run needs but the lesson does not teach, so that main.cpp
// reads as the run itself. The flags; the model's sizes; printing. The data set, the initial
// weights and the batches are chapter 09's (../09_ddp_classifier/fashion_data.h).
#pragma once

#include <dist/dist.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ch12 {

// The classifier: 196 pixels, three hidden layers of 512, 10 classes. Wider than chapter 09's,
// so that its 631,306 parameters and Adam's state (10 MB at 16 bytes a parameter) are worth
// sharding, yet one epoch trains in seconds on two CPU cores.
constexpr std::int64_t kWidths[] = {196, 512, 512, 512, 10};
constexpr std::size_t kLayers = 4;

// Every flag, with its default. --help lists them.
struct Flags {
  int train_samples = 4000, test_samples = 1000, batch_size = 32, epochs = 2, seed = 0, stage = 3;
  double lr = 1e-3, bucket_mb = 1;
  bool prefetch = true, check = true, throughput = false;
  std::string data_dir = "data";
  dist::InitOptions init;
};

// The flags from argv, or nothing after --help. --data-dir is created and must be writable (exit
// 2 with a message naming the flag otherwise).
std::optional<Flags> parse_flags(int argc, char** argv);

// What each stage keeps sharded, in ZeRO's words: "stage 2: optimizer state and gradients
// sharded (ZeRO-2)".
std::string stage_name(int stage);

// Bytes as people read them: "10,101,024" and "9.63 MiB".
std::string grouped(std::int64_t n);
std::string mib(std::int64_t bytes);
std::string scientific(double value);  // "3.1e-07"

// Two runs' weights, value by value: the largest difference, and whether every value is within
// torch.testing.assert_close's float32 tolerance, |a - b| <= 1e-5 + 1.3e-6 |b|.
struct Compared {
  double largest = 0;
  bool close = true;
};
Compared compare(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ch12
