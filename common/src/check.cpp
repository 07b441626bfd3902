// The one error idiom (dist/check.h): throw where the problem is found, catch once in run_main.
#include "dist/check.h"

#include <exception>
#include <string>

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
