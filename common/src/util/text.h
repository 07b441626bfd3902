// Small pieces of text that several error messages share (internal), so that every message says
// them the same way.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace dist::util {

// "1.5 s"
std::string seconds(std::chrono::milliseconds ms);

// "1, 2, 5": ranks as a message lists them, in the order given.
std::string rank_list(const std::vector<int>& ranks);

// "rank 3" or "ranks 1, 2, 5": the ranks a message is about, in the order given.
std::string ranks_phrase(const std::vector<int>& ranks);

// What a timeout in a collective means, for the end of its message: "not every rank reached
// this call. Every rank must make the same collective calls ...".
inline constexpr const char* kNotEveryRankReached =
    "not every rank reached this call. Every rank must make the same collective calls in the "
    "same order; check for a rank that skipped it, exited, or is stuck";

}  // namespace dist::util
