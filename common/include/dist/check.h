// dist/check.h — one error idiom for the whole project.
//
// Every failure is a C++ exception derived from dist::Error, thrown where the problem is found and
// caught exactly once, at the program boundary, by dist::run_main() (dist/run_main.h). The
// exception type decides the exit code (DESIGN.md): 1 a failed check or runtime error, 2 bad usage
// or configuration, 77 missing hardware. Messages name the thing to fix: the variable, the value,
// the rank, and a hint.
//
// Taught in: every chapter (the STEP 0 of each main.cpp); first met in chapter 01.
// Built in: common/src/base/check_fail.cpp (DIST_CHECK's failure path).
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace dist {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // a failed check or a runtime error
inline constexpr int kExitUsage = 2;     // bad usage or configuration: fix the command line or env
inline constexpr int kExitSkipped = 77;  // hardware missing (CTest SKIP_RETURN_CODE)

// A runtime failure: a peer died, a check failed, a deadline passed.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  virtual int exit_code() const noexcept { return kExitFailure; }
};

// The user must change something: a variable, a flag, a port.
class ConfigError : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return kExitUsage; }
};

// A wait ran past its deadline. Still exit code 1: nothing in the configuration was wrong.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The program needs hardware this machine lacks (a GPU). Tests treat its exit code as "skipped".
class HardwareMissing : public Error {
 public:
  using Error::Error;
  int exit_code() const noexcept override { return kExitSkipped; }
};

// Throws dist::Error("check failed at file:line: `expr`: hint"). Use through DIST_CHECK.
[[noreturn]] void fail_check(const char* expr, const char* file, int line, std::string_view hint);

}  // namespace dist

// DIST_CHECK(cond, hint): if `cond` is false, throw dist::Error naming the expression, the source
// location and a hint that says what to do about it.
#define DIST_CHECK(cond, hint)                                          \
  do {                                                                  \
    if (!(cond)) ::dist::fail_check(#cond, __FILE__, __LINE__, (hint)); \
  } while (false)
