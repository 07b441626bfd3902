// dist/run_main.h — the program boundary, where dist/check.h's exceptions are caught.
//
// Every program's main() is `return dist::run_main([&] { ...; return 0; });`. It runs the body and
// turns any exception into a rank-tagged message on stderr ("[rank R/W] error: ...", through
// dist/log.h) and the exit code the exception's type gives (dist/check.h). It sits one floor above
// check and log, so that the error idiom (check) never depends on the printing (log).
//
// Taught in: every chapter (the STEP 0 of each main.cpp); first met in chapter 01.
// Built in: common/src/base/run_main.cpp.
#pragma once

#include <functional>

namespace dist {

// Runs `body` and turns any exception into a rank-tagged message on stderr and an exit code.
int run_main(const std::function<int()>& body) noexcept;

}  // namespace dist
