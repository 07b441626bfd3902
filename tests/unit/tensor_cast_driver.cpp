// The C++ half of tensor_cast_parity.py: reads "from to v1 v2 ..." lines from stdin (each dtype one
// of float32 float64 int32 int64 float16 bfloat16; values as Python's repr writes them), makes a
// `from` tensor of the values, converts it with .to(to), and prints each result element's bits
// as an unsigned hexadecimal number of its width ("nan" for any NaN: torch's kernels write
// different NaN bits on different paths), space-separated, one line a case.
// A line may instead be arithmetic, to check promotion and the rounding of each operation:
//   "OP A B n a1 .. an b1 .. bn"  tensor OP tensor (OP one of + - * /, A and B dtypes)
//   "OP A scalar S a1 .. an"      tensor OP scalar; S an integer (no '.', 'e', "inf" or "nan")
//                                 is an int64 scalar, anything else a double
// and its answer is the result's dtype name, then its bits as above.
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

template <typename S>
dist::Tensor apply(char op, const dist::Tensor& a, const S& b) {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return a / b;
  }
  throw dist::ConfigError(std::string("tensor_cast_driver: unknown operator '") + op +
                          "'; expected + - * /");
}

// The rest of an arithmetic line (after OP), answered.
std::string arithmetic(char op, std::istringstream& tokens) {
  std::string a_name, b_name;
  tokens >> a_name >> b_name;
  const dist::DType a_dtype = dtype_named(a_name);
  dist::Tensor result;
  if (b_name == "scalar") {
    std::string scalar;
    tokens >> scalar;
    const dist::Tensor a = parse_values(a_dtype, tokens);
    const bool integer = scalar.find_first_of(".eEin") == std::string::npos;
    result = integer ? apply(op, a, parity::parse<std::int64_t>(scalar, "tensor_cast_driver"))
                     : apply(op, a, parity::parse<double>(scalar, "tensor_cast_driver"));
  } else {
    std::size_t n = 0;
    tokens >> n;
    std::string token;
    std::vector<std::string> values;
    while (tokens >> token) values.push_back(token);
    const auto part = [&](std::size_t begin, std::size_t end) {
      std::string joined;
      for (std::size_t i = begin; i < end && i < values.size(); ++i) joined += values[i] + " ";
      return std::istringstream(joined);
    };
    std::istringstream a_tokens = part(0, n), b_tokens = part(n, 2 * n);
    const dist::Tensor a = parse_values(a_dtype, a_tokens);
    const dist::Tensor b = parse_values(dtype_named(b_name), b_tokens);
    result = apply(op, a, b);
  }
  return std::string(dist::dtype_name(result.dtype())) + " " + bits_of(result);
}

}  // namespace

int main() {
  return dist::run_main([] {
    for (std::string line; std::getline(std::cin, line);) {
      std::istringstream tokens(line);
      std::string from, to;
      tokens >> from;
      if (from.size() == 1) {
        std::cout << arithmetic(from[0], tokens) << "\n";
        continue;
      }
      tokens >> to;
      std::cout << bits_of(parse_values(dtype_named(from), tokens).to(dtype_named(to))) << "\n";
    }
    return 0;
  });
}
