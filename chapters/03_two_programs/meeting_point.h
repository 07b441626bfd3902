// Chapter 03: where the two programs meet. Both ch03_rank0 and ch03_rank1 take the same two flags
// and decide the address the same way, so they cannot disagree about it.
#pragma once

#include <dist/dist.h>

#include <cstdlib>
#include <string>

namespace ch03 {

struct MeetingPoint {
  std::string addr, port;  // from --master-addr / --master-port; empty: not given
};

// The two flags, and the usage line that says how to start the pair (`partner`: the other one).
inline void add_meeting_flags(dist::Cli& cli, MeetingPoint& meet, const std::string& partner) {
  cli.add_string("--master-addr", &meet.addr,
                 "where rank 0 hosts the store; else MASTER_ADDR, else 127.0.0.1");
  cli.add_string("--master-port", &meet.port,
                 "its port, the same for both programs; else MASTER_PORT, else 29501");
  cli.set_run_hint("Run it in a terminal of its own, and " + partner +
                   " in another: either may start first.");
}

// Like post B's os.environ['MASTER_PORT'] = '29501', except that it does not overwrite: a flag
// wins, then a variable already in the environment, then post B's 127.0.0.1:29501. Returns
// "ADDR:PORT".
inline std::string set_master(const MeetingPoint& meet) {
  if (!meet.port.empty()) dist::parse_int("--master-port", meet.port, 1, 65535);  // validate
  const auto choose = [](const char* name, const std::string& flag, const char* post_value) {
    if (!flag.empty()) {
      ::setenv(name, flag.c_str(), 1);
    } else if (!dist::env_value(name)) {  // unset or empty: post B's value
      ::setenv(name, post_value, 1);
    }
  };
  choose("MASTER_ADDR", meet.addr, "127.0.0.1");
  choose("MASTER_PORT", meet.port, "29501");
  return *dist::env_value("MASTER_ADDR") + ":" + *dist::env_value("MASTER_PORT");
}

}  // namespace ch03
