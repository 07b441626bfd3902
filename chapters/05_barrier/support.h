// Chapter 05's support code: the clock, where the data set lives, and reading it back. The
// lesson is in main.cpp; nothing here is about barriers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ch05 {

// CLOCK_MONOTONIC in nanoseconds: one clock for every process on a machine, never set back.
std::int64_t now_ns();

// Where this job keeps its data set: the same on every rank of the job (built from what they all
// share: the rendezvous port, or the file:// path), different for two jobs side by side.
std::string default_data_dir();

// What one rank did with the data set: whether it downloaded it, and what it read.
struct DataSet {
  std::int64_t records = 0, sum = 0;
  bool downloaded = false;
};

// Reads the records (one number a line) into `data`, prints what it read, and returns it. Throws
// dist::Error if the file is not there.
DataSet load(const std::filesystem::path& file, DataSet data);

}  // namespace ch05
