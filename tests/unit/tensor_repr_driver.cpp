// The C++ half of tensor_repr_parity.py: reads "dtype[@device] v1 v2 ..." lines from stdin (dtype
// one of float32 float64 int32 int64 float16 bfloat16; device as torch spells it, e.g. cuda:0;
// values as Python's repr writes them, "nan"/"inf"/"-inf" allowed), and prints each tensor's repr()
// followed by a line "---". A device is printed as if the tensor lived there (repr_as_if_on), so
// the device suffix is checked on machines without a GPU. Values are parsed straight into the
// element type, so int64 beyond 2^53 and every float32 survive the text round trip exactly.
// float16 and bfloat16 values are parsed as float64 and cast with .to(dtype), as torch.tensor
// casts the Python floats it is given, so the rounding is checked along with the printing.
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "dist/run_main.h"
#include "dist/tensor.h"
#include "parity_driver.h"
#include "tensor/tensor_repr.h"

namespace {

template <typename T>
dist::Tensor parse_tensor(std::istringstream& tokens) {
  std::vector<T> values;
  for (std::string token; tokens >> token;) {
    values.push_back(parity::parse<T>(token, "tensor_repr_driver"));
  }
  return dist::Tensor::from(values);
}

dist::Tensor parse_values(const std::string& dtype, std::istringstream& tokens) {
  if (dtype == "float32") return parse_tensor<float>(tokens);
  if (dtype == "float64") return parse_tensor<double>(tokens);
  if (dtype == "int32") return parse_tensor<std::int32_t>(tokens);
  if (dtype == "int64") return parse_tensor<std::int64_t>(tokens);
  if (dtype == "float16") return parse_tensor<double>(tokens).to(dist::kFloat16);
  if (dtype == "bfloat16") return parse_tensor<double>(tokens).to(dist::kBFloat16);
  throw dist::ConfigError("tensor_repr_driver: unknown dtype '" + dtype +
                          "'; expected float32, float64, int32, int64, float16 or bfloat16");
}

std::string repr_of_line(const std::string& line) {
  std::istringstream tokens(line);
  std::string head;
  tokens >> head;
  const auto at = head.find('@');
  const dist::Tensor values = parse_values(head.substr(0, at), tokens);
  if (at == std::string::npos) return values.repr();
  return dist::repr_as_if_on(values, dist::Device::parse(head.substr(at + 1)));
}

}  // namespace

int main() {
  return dist::run_main([] {
    for (std::string line; std::getline(std::cin, line);) {
      std::cout << repr_of_line(line) << "\n---\n";
    }
    return 0;
  });
}
