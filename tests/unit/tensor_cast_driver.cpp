// The C++ half of tensor_cast_parity.py: reads "from to v1 v2 ..." lines from stdin (each dtype one
// of float32 float64 int32 int64 float16 bfloat16; values as Python's repr writes them), makes a
// `from` tensor of the values, converts it with .to(to), and prints each result element's bits
// as an unsigned hexadecimal number of its width ("nan" for any NaN: torch's kernels write
// different NaN bits on different paths), space-separated, one line a case.
// float32, float64 and integer values are parsed straight into their element type; float16 and
// bfloat16 values, which the script picks among those dtypes' own values, as float64 and cast
// exactly.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "dist/run_main.h"
#include "dist/tensor.h"
#include "parity_driver.h"

namespace {

template <typename T>
dist::Tensor parse_tensor(std::istringstream& tokens) {
  std::vector<T> values;
  for (std::string token; tokens >> token;) {
    values.push_back(parity::parse<T>(token, "tensor_cast_driver"));
  }
  return dist::Tensor::from(values);
}

dist::DType dtype_named(const std::string& name) {
  for (dist::DType d : {dist::kFloat32, dist::kFloat64, dist::kInt32, dist::kInt64, dist::kFloat16,
                        dist::kBFloat16}) {
    if ("torch." + name == dist::dtype_name(d)) return d;
  }
  throw dist::ConfigError("tensor_cast_driver: unknown dtype '" + name +
                          "'; expected float32, float64, int32, int64, float16 or bfloat16");
}

dist::Tensor parse_values(dist::DType dtype, std::istringstream& tokens) {
  switch (dtype) {
    case dist::kFloat32:
      return parse_tensor<float>(tokens);
    case dist::kInt32:
      return parse_tensor<std::int32_t>(tokens);
    case dist::kInt64:
      return parse_tensor<std::int64_t>(tokens);
    default:
      return parse_tensor<double>(tokens).to(dtype);  // float64 itself, or exact 16-bit values
  }
}

std::string bits_of(const dist::Tensor& t) {
  std::ostringstream out;
  const auto* bytes = static_cast<const unsigned char*>(t.data());
  const std::size_t size = t.element_size();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (i > 0) out << ' ';
    if (std::isnan(t.item(i))) {
      out << "nan";
      continue;
    }
    std::uint64_t bits = 0;
    std::memcpy(&bits, bytes + static_cast<std::size_t>(i) * size, size);  // little-endian
    out << std::hex << bits;
  }
  return out.str();
}

}  // namespace

int main() {
  return dist::run_main([] {
    for (std::string line; std::getline(std::cin, line);) {
      std::istringstream tokens(line);
      std::string from, to;
      tokens >> from >> to;
      std::cout << bits_of(parse_values(dtype_named(from), tokens).to(dtype_named(to))) << "\n";
    }
    return 0;
  });
}
