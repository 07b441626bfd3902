// dist/init_options.h — what init_process_group is given (InitOptions) and what get_dist_info
// answers (DistInfo), apart from the calls themselves (dist/init.h), so that the rendezvous that
// resolves them (common/src/init/rendezvous.h) needs no part of init.
//
// Taught in: chapter 01 (DistInfo), chapter 02 (InitOptions).
// Built in: common/src/init/rendezvous.cpp (resolves InitOptions), init.cpp (fills DistInfo).
#pragma once

#include <chrono>
#include <string>

namespace dist {

// The default for every wait in a group, the rendezvous and every collective, on both backends:
// long enough for a person to start the second program of chapter 03 by hand, short enough
// that a mistake ends in a message rather than a hang. (torch's default differs by version and
// backend: 30 minutes in 1.13, where an nccl collective is bounded only with NCCL_BLOCKING_WAIT
// or NCCL_ASYNC_ERROR_HANDLING set; since 2.2, 10 minutes for nccl and 30 for gloo.)
inline constexpr std::chrono::seconds kDefaultTimeout{60};

struct InitOptions {
  // "gloo" (CPU, any machine), "nccl" (GPU tensors; one GPU per rank, chosen by LOCAL_RANK) or
  // "auto": NCCL when every rank has a GPU of its own, else Gloo; rank 0 prints which and why.
  // An explicit "nccl" on a rank without a usable GPU stops every rank with a ConfigError (exit
  // 2) that says what is missing.
  std::string backend = "gloo";
  std::string init_method;                              // "" means "env://"
  int world_size = -1;                                  // -1: from the URL or the environment
  int rank = -1;                                        // -1: from the URL or the environment
  std::chrono::milliseconds timeout = kDefaultTimeout;  // positive, at most dist::kMaxTimeout
  // Names the group's keys in the store, as torch 1.13's group_name prefixes them. The default
  // is torch's, "" (which 1.13 turns into "0"), not post B's 'default'; current PyTorch ignores
  // the argument.
  std::string group_name;
};

// Everything a program may want to print about its place in the job. Before init it answers as
// mmcv's get_dist_info does: rank 0, world_size 1.
struct DistInfo {
  bool initialized = false;
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // "" for file://
  int master_port = 0;      // 0 for file://
  std::string backend;      // "" before init
  std::string init_method;  // "env://", "tcp://host:port" or "file:///path" (no query)
};

}  // namespace dist
