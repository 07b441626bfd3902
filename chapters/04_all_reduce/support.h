// Chapter 04's support code: printing and the launcher's argument, so that main.cpp is the lesson.
#pragma once

#include <dist/dist.h>

#include <string>
#include <vector>

namespace ch04 {

// "SUM:" padded to one width, so that the tensors line up: "SUM:             tensor([4, 6])".
std::string label(const std::string& name);

// A list of tensors as Python prints one: "[tensor([1, 2]), tensor([3, 4])]".
std::string list_repr(const std::vector<dist::Tensor>& tensors);

// True when both lists have the same length and the same values, wherever the tensors live.
bool equal(const std::vector<dist::Tensor>& got, const std::vector<dist::Tensor>& want);

// Rank 0 prints what the ring of ring_all_reduce() moves: who sends which chunk at each step.
void draw_ring(int world);

// A --local-rank=N (or --local_rank=N) from the launcher that is not LOCAL_RANK is a ConfigError
// naming both; -1 (none passed) is fine.
void check_local_rank_argument(int from_argument, int local_rank);

// "local_rank 1, from LOCAL_RANK; the launcher's --local-rank argument says the same".
std::string where_local_rank_came_from(int local_rank, int from_argument);

// The job's verdict: every rank must call it. It ends the group, and rank 0 prints "OK: what",
// or MISMATCH when some rank's `ok` is false; returns the exit code (only rank 0 fails the job:
// it prints the verdict, and a rank that exited 1 first would make ddprun stop rank 0 before
// its MISMATCH line is out).
int verdict(bool ok, int rank, const std::string& what);

}  // namespace ch04
