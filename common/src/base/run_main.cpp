// run_main (dist/run_main.h): the one place where the error idiom of dist/check.h catches.
#include "dist/run_main.h"

#include <exception>
#include <string>

#include "dist/check.h"
#include "dist/log.h"

namespace dist {

int run_main(const std::function<int()>& body) noexcept {
  try {
    return body();
  } catch (const Error& e) {
    err() << "error: " << e.what();
    return e.exit_code();
  } catch (const std::exception& e) {
    err() << "error: " << e.what();
    return kExitFailure;
  } catch (...) {
    err() << "error: an unknown exception escaped main";
    return kExitFailure;
  }
}

}  // namespace dist
