// Test support: the message of the dist::ConfigError a call throws, for tests that check what a
// refusal says.
#pragma once

#include <string>

#include "dist/check.h"

namespace dist::testing {

// The ConfigError's message, or "no ConfigError" when `f` returns normally.
template <typename F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const dist::ConfigError& e) {
    return e.what();
  }
  return "no ConfigError";
}

}  // namespace dist::testing
