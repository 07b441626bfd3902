// Chapter 04's exercise 1 prints the collectives each rank made, so that the grader can check the
// task's "a single all_reduce" from what the program did, not from its text. The library's flight
// recorder (chapter 10) keeps every collective a rank makes; ddprun turns it on for every job.
#pragma once

#include <dist/dist.h>
#include <dist/flight_recorder.h>

#include <string>

namespace ch04 {

// "1 (all_reduce)": how many collectives this rank made, and which, in order.
inline std::string collectives_made() {
  const dist::FlightRecorder* recorder = dist::flight::recorder();
  if (recorder == nullptr) return "not recorded (no DIST_TRACE_DIR: run it under ddprun)";
  std::string ops;
  const auto entries = recorder->entries();
  for (const auto& e : entries) ops += (ops.empty() ? "" : ", ") + std::string(e.call.op);
  return std::to_string(entries.size()) + (ops.empty() ? "" : " (" + ops + ")");
}

}  // namespace ch04
