// dist::Tensor's repr (dist/tensor.h, tensor_repr.h): a port of torch/_tensor_str.py from PyTorch
// 1.13, with its default print options, for 1-D tensors, so that what a rank prints reads exactly
// like the Python program it mirrors. It only reads values; storage, casts and arithmetic are in
// tensor.cpp, the dtype names in tensor_dtype.cpp.
#include "tensor_repr.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace dist {
namespace {

// torch's default print options (threshold, edgeitems, linewidth) and the text a repr opens with.
constexpr std::int64_t kThreshold = 1000;  // more elements than this are summarized
constexpr std::int64_t kEdgeItems = 3;     // elements kept at each end of a summary
constexpr std::size_t kLineWidth = 80;
constexpr std::string_view kPrefix = "tensor(";  // its length is the continuation indent

// The values torch formats: all of them, or only the kEdgeItems at each end when summarizing
// (torch sizes its formatter on the summarized data, too).
template <typename To, typename From>
std::vector<To> shown_values(const From* data, std::int64_t numel) {
  std::vector<To> values;
  const auto take = [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) values.push_back(static_cast<To>(data[i]));
  };
  if (numel > kThreshold) {
    take(0, kEdgeItems);
    take(numel - kEdgeItems, numel);
  } else {
    take(0, numel);
  }
  return values;
}

std::string pad_left(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

// Python's "{:.4f}" / "{:.4e}" / "{:.0f}": the same digits as printf (correctly rounded, two-digit
// exponent at least), but NaN prints as "nan" whatever its sign bit.
std::string python_format(double value, std::chars_format format, int precision) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buf[400];  // "{:.4f}" of 1.8e308 needs 315 characters
  const auto result = std::to_chars(buf, buf + sizeof buf, value, format, precision);
  return std::string(buf, result.ptr);
}

// torch's _Formatter for a floating tensor. Three modes, chosen from the nonzero finite values:
//   int mode    every value is an integer: "1.", "-0.", "100."
//   fixed mode  "%.4f": "1.5000"
//   sci mode    "%.4e": "1.0000e+08", when the values span more than 1000x, exceed 1e8, or (outside
//               int mode) go below 1e-4
// and a common width that right-aligns every element.
class FloatFormatter {
 public:
  explicit FloatFormatter(const std::vector<double>& values) {
    std::vector<double> nonzero_finite;
    std::copy_if(values.begin(), values.end(), std::back_inserter(nonzero_finite),
                 [](double v) { return std::isfinite(v) && v != 0; });
    if (nonzero_finite.empty()) return;  // torch keeps int mode and width 1: "0.", "nan"

    double min_abs = std::numeric_limits<double>::infinity();
    double max_abs = 0;
    for (double v : nonzero_finite) {
      min_abs = std::min(min_abs, std::fabs(v));
      max_abs = std::max(max_abs, std::fabs(v));
    }
    int_mode_ = std::all_of(nonzero_finite.begin(), nonzero_finite.end(),
                            [](double v) { return v == std::ceil(v); });
    // torch checks "< 1e-4" only outside int mode; inside, it could not fire: nonzero integers
    // are at least 1.
    sci_mode_ = max_abs / min_abs > 1000.0 || max_abs > 1.0e8 || min_abs < 1.0e-4;
    for (double v : nonzero_finite) max_width_ = std::max(max_width_, unpadded(v).size());
  }

  std::size_t width() const { return max_width_; }

  std::string format(double value) const { return pad_left(unpadded(value), max_width_); }

 private:
  std::string unpadded(double value) const {
    if (sci_mode_) return python_format(value, std::chars_format::scientific, 4);
    if (!int_mode_) return python_format(value, std::chars_format::fixed, 4);
    // The trailing dot marks a floating tensor whose values happen to be integers.
    std::string text = python_format(value, std::chars_format::fixed, 0);
    if (std::isfinite(value)) text += '.';
    return text;
  }

  bool int_mode_ = true;
  bool sci_mode_ = false;
  std::size_t max_width_ = 1;
};

struct FormattedElements {
  std::vector<std::string> items;  // each padded to `width`
  std::size_t width = 1;
};

FormattedElements format_floats(const std::vector<double>& values) {
  const FloatFormatter formatter(values);
  FormattedElements out{{}, formatter.width()};
  for (double v : values) out.items.push_back(formatter.format(v));
  return out;
}

FormattedElements format_integers(const std::vector<std::int64_t>& values) {
  FormattedElements out;
  for (std::int64_t v : values) {
    out.items.push_back(std::to_string(v));
    out.width = std::max(out.width, out.items.back().size());
  }
  for (std::string& item : out.items) item = pad_left(std::move(item), out.width);
  return out;
}

FormattedElements format_elements(const Tensor& t) {
  return visit_dtype(t.dtype(), [&]<typename T>(std::type_identity<T>) {
    // torch formats floats through Python floats, i.e. float32 values widened to double; it
    // converts float16 and bfloat16 tensors to float32 first (exact), so they print the same way.
    if constexpr (is_floating_element_v<T>) {
      return format_floats(shown_values<double>(t.data_ptr<T>(), t.numel()));
    } else {
      return format_integers(shown_values<std::int64_t>(t.data_ptr<T>(), t.numel()));
    }
  });
}

// torch's _vector_str: as many elements per line as fit in the line width after the indent,
// continuation lines aligned one past the "[".
std::string vector_text(const std::vector<std::string>& items, std::size_t width) {
  const std::size_t per_line =
      std::max<std::size_t>(1, (kLineWidth - kPrefix.size()) / (width + 2));
  const std::string line_break = ",\n" + std::string(kPrefix.size() + 1, ' ');
  std::string text = "[";
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i % per_line == 0 ? line_break : ", ";
    text += items[i];
  }
  return text + "]";
}

// torch's _add_suffixes: each suffix ("device='cuda:0'", "dtype=torch.int32") goes on its own
// line when the last line would pass the line width. The arithmetic is torch's, including its
// count of the first last line (two more than its characters) and of later ones.
std::string add_suffixes(std::string text, const std::vector<std::string>& suffixes) {
  const std::size_t newline = text.rfind('\n');
  std::size_t last_line_len =
      newline == std::string::npos ? text.size() + 2 : text.size() - newline + 1;
  for (const std::string& suffix : suffixes) {
    if (last_line_len + suffix.size() + 2 > kLineWidth) {
      text += ",\n" + std::string(kPrefix.size(), ' ') + suffix;
      last_line_len = kPrefix.size() + suffix.size();
    } else {
      text += ", " + suffix;
      last_line_len += suffix.size() + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string Tensor::repr() const {
  return is_cuda() ? repr_as_if_on(cpu(), device()) : repr_as_if_on(*this, device());
}

std::string repr_as_if_on(const Tensor& host, Device shown) {
  std::string text(kPrefix);
  std::vector<std::string> suffixes;
  // torch names the device of every tensor that is not on its default device, the CPU.
  if (shown.is_cuda()) suffixes.push_back("device='" + shown.str() + "'");
  bool shows_dtype = false;
  if (host.numel() == 0) {
    // No values to infer the dtype from, so torch names every dtype but the default float32.
    text += "[]";
    shows_dtype = host.dtype() != kFloat32;
  } else {
    FormattedElements elements = format_elements(host);
    if (host.numel() > kThreshold)
      elements.items.insert(elements.items.begin() + kEdgeItems, " ...");
    text += vector_text(elements.items, elements.width);
    // float32 and int64 are what torch.tensor infers from Python floats and ints; the others are
    // named.
    shows_dtype = host.dtype() != kFloat32 && host.dtype() != kInt64;
  }
  if (shows_dtype) suffixes.push_back("dtype=" + std::string(dtype_name(host.dtype())));
  return add_suffixes(std::move(text), suffixes);
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  return os << t.repr();
}

}  // namespace dist
