// Chapter 07's support code: printing and the closed-form check, so that main.cpp is the lesson.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ch07 {

using Indices = std::vector<std::int64_t>;

// "0 3 8" (as the indices line prints them) and "[0, 3, 8]" (as Python prints a list).
std::string join(const Indices& v, const char* sep = " ");
// " [0, 3, 8, 1] [7, 10]": batches as the twin prints a DataLoader's batches.
std::string batches_text(const std::vector<Indices>& batches);
// " [10, 4, 5, 2] [9, 6] | [0, 2, 7, 4]": the batches of a run that starts a pass, with a '|'
// where the next pass begins (every per_pass batches).
std::string pass_marks(const std::vector<Indices>& batches, std::int64_t per_pass);
// " (set_epoch 0, 2, 4)": the set_epoch of each pass of a run from start_iter to num_iterations,
// which IterationBasedBatchSampler seeds with the iteration the pass starts at ("" for none).
std::string pass_seeds(std::int64_t start_iter, std::int64_t num_iterations, std::int64_t per_pass);
// "iterations 4-5", "iteration 5", or "no iteration" (first > last).
std::string iterations_text(std::int64_t first, std::int64_t last);

// Rank 0 draws who reads which index in one epoch: x a read, p a read of the padding (a position
// past the end of the shuffled list, so an index some rank already reads), . nothing.
void draw_grid(std::int64_t epoch, const std::vector<Indices>& shards, std::int64_t n);

// The closed form the shards must meet: without drop_last each index is read at least once and
// exactly total_size - n reads are repeats; with drop_last W * floor(n / W) distinct indices.
bool covers_dataset(const std::vector<Indices>& shards, std::int64_t n, bool drop_last);

}  // namespace ch07
