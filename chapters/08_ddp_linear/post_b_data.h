// Post B's data and each rank's initial weights: what chapter 08 trains on, and chapter 11
// trains on again (its CMakeLists.txt compiles this file too), so both start from the same bits.
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>

#include <vector>

namespace ch08 {

// Post B's data, y = 3x + 2 + noise, made so that C++ and PyTorch build the same bits: every
// value comes from torch.randint's draws (dist::randint is the same generator, draw for draw).
// x is uniform in [-2, 2) and the noise uniform in [-0.1, 0.1). The same on every rank.
struct Dataset {
  std::vector<float> x, y;
};
Dataset make_dataset(int n, int seed);

// A rank's own initial weights, uniform in [-1, 1), from a generator seeded seed + 1 + rank: each
// replica starts somewhere else, as models seeded per rank (chapter 06) do.
dist::LinearInit initial_weights(int seed, int rank);

}  // namespace ch08
