// Chapter 09's exercise 3 reads back the trace a dist::Timeline wrote: the spans of one rank, as
// Chrome's trace event format holds them ({"ph": "X", "name": ..., "tid": ..., "ts": start in
// microseconds, "dur": duration}). Only the form Timeline::json() writes is read.
#pragma once

#include <dist/dist.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ch09 {

struct TraceSpan {
  std::string name;        // "backward fc1", "all_reduce bucket 0 (714 values)", ...
  int thread = 0;          // the trace's tid: one per thread ("main", "gradient all_reduce")
  long long start_us = 0;  // from the timeline's start
  long long end_us = 0;    // start_us + the span's duration
};

// Every span ("ph": "X") of the trace file at `path`, in the order they ended.
inline std::vector<TraceSpan> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw dist::Error("cannot read the trace " + path);
  std::stringstream text;
  text << in.rdbuf();
  // A field's text after `"key": ` in one event's line.
  const auto field = [](const std::string& line, const std::string& key) {
    const std::size_t at = line.find("\"" + key + "\": ");
    if (at == std::string::npos) return std::string();
    std::size_t from = at + key.size() + 4, to = 0;
    if (line[from] == '"') {
      to = line.find('"', ++from);
    } else {
      to = line.find_first_of(",}", from);
    }
    return line.substr(from, to - from);
  };
  std::vector<TraceSpan> spans;
  for (std::string line; std::getline(text, line);) {
    if (field(line, "ph") != "X") continue;
    TraceSpan s{field(line, "name"), std::stoi(field(line, "tid")), std::stoll(field(line, "ts")),
                0};
    s.end_us = s.start_us + std::stoll(field(line, "dur"));
    spans.push_back(s);
  }
  return spans;
}

}  // namespace ch09
