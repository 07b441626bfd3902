// What the torch-parity drivers share (sampler_driver.cpp, tensor_repr_driver.cpp: the C++ halves
// of sampler_parity.py and tensor_repr_parity.py, which share parity_harness.py): one token of a
// case line, parsed whole into its element type.
#pragma once

#include <charconv>
#include <string>
#include <system_error>

#include "dist/check.h"
#include "dist/tensor.h"

namespace parity {

// The whole token as a T, or a ConfigError naming the driver, the token and the type. from_chars
// rejects a leading '+' but accepts "-inf"; Python's repr never writes "+".
template <typename T>
T parse(const std::string& token, const char* driver) {
  T value{};
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (ec != std::errc{} || end != token.data() + token.size()) {
    throw dist::ConfigError(std::string(driver) + ": cannot parse '" + token + "' as " +
                            std::string(dist::dtype_name(dist::dtype_of<T>())));
  }
  return value;
}

}  // namespace parity
