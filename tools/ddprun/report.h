// How ddprun talks: one whole line at a time on stderr, and signals by their names.
//
// The ranks write to the same stderr as ddprun, so every line goes out with a single write():
// ddprun's notices then never tear a rank's line in half, or the other way round.
#pragma once

#include <string>

namespace ddprun {

// Writes "ddprun: <line>\n" to stderr in one write().
void say(const std::string& line);

// "SIGTERM" for the signals a learner meets; "signal 42" for the rest.
std::string signal_name(int signal);

// "1 rank", "4 ranks": counts read as sentences.
std::string count_of(int n, const std::string& noun);

}  // namespace ddprun
