// DIST_CHECK's failure path (dist/check.h), on its own so that code which needs nothing else of
// the library (the store, in the fuzz target of tests/fuzz) can link it alone.
#include <string>

#include "dist/check.h"

namespace dist {

void fail_check(const char* expr, const char* file, int line, std::string_view hint) {
  std::string msg = "check failed at ";
  msg += file;
  msg += ':';
  msg += std::to_string(line);
  msg += ": `";
  msg += expr;
  msg += '`';
  if (!hint.empty()) {
    msg += ": ";
    msg += hint;
  }
  throw Error(msg);
}

}  // namespace dist
