// The C++ half of randn_parity.py: reads one case per line from stdin and prints one line per
// case. The cases:
//   randn SEED N1 N2 ...   dist::manual_seed(SEED), then dist::randn(N1), dist::randn(N2), ...
//                          in turn from the same generator; the values' float32 bits as 8 hex
//                          digits each, one call's values after another, calls separated by ';'
//   numpy SEED HIGH COUNT  NumpyRandomState(SEED).randint(HIGH), COUNT times, in decimal
#include <bit>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>

#include "dist/check.h"
#include "dist/run_main.h"
#include "dist/seed.h"
#include "parity_driver.h"

namespace {

template <typename T>
T next(std::istringstream& in) {
  std::string token;
  if (!(in >> token)) throw dist::ConfigError("randn_driver: a case line is too short");
  return parity::parse<T>(token, "randn_driver");
}

std::string run_case(const std::string& line) {
  std::istringstream in(line);
  std::string kind;
  in >> kind;
  std::string out;
  if (kind == "randn") {
    dist::Generator generator(static_cast<std::uint64_t>(next<std::int64_t>(in)));
    for (std::string token; in >> token;) {
      const dist::Tensor values =
          dist::randn(parity::parse<std::int64_t>(token, "randn_driver"), generator);
      if (!out.empty()) out += ";";
      for (const float v : values.to_vector<float>()) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "%08x", std::bit_cast<std::uint32_t>(v));
        out += std::string(out.empty() || out.back() == ';' ? "" : " ") + hex;
      }
    }
    return out;
  }
  if (kind == "numpy") {
    dist::NumpyRandomState state(static_cast<std::uint32_t>(next<std::int64_t>(in)));
    const auto high = next<std::int64_t>(in);
    const auto count = next<std::int64_t>(in);
    for (std::int64_t i = 0; i < count; ++i)
      out += (i ? " " : "") + std::to_string(state.randint(high));
    return out;
  }
  throw dist::ConfigError("randn_driver: unknown case kind '" + kind + "'");
}

}  // namespace

int main() {
  return dist::run_main([] {
    std::string out;
    for (std::string line; std::getline(std::cin, line);) out += run_case(line) + "\n";
    std::cout << out;
    return 0;
  });
}
