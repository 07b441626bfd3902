// dist::Tensor (dist/tensor.h): its storage on the CPU or a GPU, and torch's casts, type
// promotion and arithmetic. The dtype table is in tensor_dtype.cpp; printing, a port of
// torch/_tensor_str.py, is in tensor_repr.cpp.
#include "dist/tensor.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <concepts>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>

#include "gpu/gpu.h"
#include "util/wrapping.h"

namespace dist {
namespace {

// The shortest text that reads back as `value` ("0.1", "1e+20", "nan"), for error messages.
std::string shortest_text(double value) {
  char buf[32];
  const auto result = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, result.ptr);
}

// torch casts float -> int by truncating toward zero. For NaN, infinities and values outside the
// integer range C++ leaves the cast undefined (torch prints whatever the hardware gives), so this
// refuses them instead.
template <typename To>
To float_to_int(double value) {
  constexpr double kLow = static_cast<double>(std::numeric_limits<To>::min());  // -2^(bits-1)
  const double truncated = std::trunc(value);
  if (!(truncated >= kLow && truncated < -kLow)) {
    throw Error("dist::Tensor: cannot convert " + shortest_text(value) + " to " +
                std::string(dtype_name(dtype_of<To>())) + ": it is NaN, infinite or outside [" +
                std::to_string(std::numeric_limits<To>::min()) + ", " +
                std::to_string(std::numeric_limits<To>::max()) +
                "]. Check the data for NaN/inf, or keep a floating dtype");
  }
  return static_cast<To>(truncated);
}

// double -> float: IEEE rounds finite values beyond FLT_MAX to +-FLT_MAX or +-inf, as torch does,
// but C++ calls that conversion undefined, so the rounding is spelled out here.
float narrow_to_float(double value) {
  constexpr float kFloatMax = std::numeric_limits<float>::max();  // 2^128 - 2^104
  constexpr double kHalfwayToInf = 0x1p128 - 0x1p103;  // ties round to even: 2^128, i.e. inf
  if (std::isfinite(value) && std::fabs(value) > kFloatMax) {
    const float magnitude =
        std::fabs(value) >= kHalfwayToInf ? std::numeric_limits<float>::infinity() : kFloatMax;
    return value < 0 ? -magnitude : magnitude;
  }
  return static_cast<float>(value);
}

// One element converted as torch's .to(dtype) converts it. Int -> int wraps modulo 2^bits (C++20
// defines that), int -> float rounds to nearest. Anything -> float16/bfloat16 goes through float,
// as c10's conversions do (c10::Half and c10::BFloat16 are constructed from a float only), so
// float64 -> float16 or bfloat16 rounds twice, and so does an integer beyond 2^24 -> bfloat16.
template <typename To, typename From>
To convert(From value) {
  if constexpr (std::is_integral_v<To> && is_floating_element_v<From>) {
    return float_to_int<To>(static_cast<double>(value));
  } else if constexpr (std::is_same_v<To, float> && std::is_same_v<From, double>) {
    return narrow_to_float(value);
  } else if constexpr (SixteenBitFloat<To> && std::is_same_v<From, double>) {
    return To(narrow_to_float(value));
  } else if constexpr (SixteenBitFloat<To>) {
    return To(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

// A value given as a number (full, fill_, set) must fit the 16-bit dtypes: torch refuses a finite
// one beyond the largest finite value, where a cast (.to) would round it to inf, and says "value
// cannot be converted to type at::Half without overflow" (c10's `overflows` in Half.h, 1.13).
// infinities and NaN pass, as in torch.
template <typename T>
void check_fits(double value) {
  if constexpr (SixteenBitFloat<T>) {
    constexpr bool kHalf = std::is_same_v<T, Half>;
    constexpr double kMax = static_cast<float>(T::from_bits(kHalf ? 0x7bff : 0x7f7f));
    if (std::isfinite(value) && std::fabs(value) > kMax) {
      throw Error("dist::Tensor: value " + shortest_text(value) + " cannot be converted to " +
                  std::string(dtype_name(dtype_of<T>())) + " without overflow (torch: \"value " +
                  "cannot be converted to type at::" + (kHalf ? "Half" : "BFloat16") +
                  " without overflow\"); its largest finite value is " + shortest_text(kMax) +
                  ". Scale the value down, or use dist::kFloat32");
    }
  }
}

// +, -, * as torch computes them: integers wrap modulo 2^bits (util/wrapping.h, shared with the
// Gloo backend's reductions).
using Add = util::WrappingAdd;
using Subtract = util::WrappingSubtract;
using Multiply = util::WrappingMultiply;

// torch's `/` is true division: its operands are always converted to a floating dtype first, so
// x / 0 is inf or nan, never undefined behaviour.
template <typename T>
concept Floating = is_floating_element_v<T>;  // float, double, Half, BFloat16

struct TrueDivide {
  template <Floating T>
  T operator()(T a, T b) const {
    return a / b;
  }
};

// Dispatches on a result dtype, instantiating only the element types `Op` is defined for.
template <typename Op, typename F>
void visit_result_dtype(DType dtype, F&& f) {
  visit_dtype(dtype, [&]<typename T>(std::type_identity<T> type) {
    if constexpr (std::is_invocable_v<Op, T, T>) {
      f(type);
    } else {
      throw Error("dist::Tensor: internal error: " + std::string(dtype_name(dtype)) +
                  " reached a floating-only kernel; true division must convert integers first");
    }
  });
}

// torch gives integer inputs its default dtype, float32, where the result must be floating: true
// division, and arithmetic with a Python float.
DType floating_result_type(DType dtype) {
  return is_floating_point(dtype) ? dtype : kFloat32;
}

// Two tensors in one operation must be on one device; torch says so in these words.
Device common_device(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.device() == b.device()) return a.device();
  throw Error("dist::Tensor a " + std::string(op) +
              " b: Expected all tensors to be on the same device, but found at least two "
              "devices, " +
              a.device().str() + " and " + b.device().str() + "! Move one with .to(" +
              "dist::Device::...) first");
}

void check_same_numel(const Tensor& a, const Tensor& b, std::string_view op) {
  if (a.numel() == b.numel()) return;
  throw Error("dist::Tensor a " + std::string(op) + " b: sizes differ (a has " +
              std::to_string(a.numel()) + " elements, b has " + std::to_string(b.numel()) +
              "); dist::Tensor does not broadcast, so both operands need the same numel");
}

// a op b elementwise, computed in `result` after converting both operands to it, as torch does.
template <typename Op>
Tensor combine(const Tensor& a, const Tensor& b, DType result, Op op, std::string_view symbol) {
  check_same_numel(a, b, symbol);
  if (const Device device = common_device(a, b, symbol); device.is_cuda()) {
    return combine(a.cpu(), b.cpu(), result, op, symbol).to(device);
  }
  Tensor out = a.to(result);
  const Tensor rhs = b.to(result);
  visit_result_dtype<Op>(result, [&]<typename T>(std::type_identity<T>) {
    T* o = out.data_ptr<T>();
    const T* r = rhs.data_ptr<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) o[i] = op(o[i], r[i]);
  });
  return out;
}

// a op s elementwise. torch converts the scalar to the result dtype before computing, so
// float32 + 0.1 adds 0.1f in float arithmetic, and an int32 tensor + 2^40 adds 2^40 mod 2^32.
template <typename Op, typename Scalar>
Tensor combine_scalar(const Tensor& a, Scalar s, DType result, Op op) {
  if (a.is_cuda()) return combine_scalar(a.cpu(), s, result, op).to(a.device());
  Tensor out = a.to(result);
  visit_result_dtype<Op>(result, [&]<typename T>(std::type_identity<T>) {
    const T scalar = convert<T>(s);
    T* o = out.data_ptr<T>();
    for (std::int64_t i = 0; i < out.numel(); ++i) o[i] = op(o[i], scalar);
  });
  return out;
}

// `self op= x` is `self = self op x` stored back in self's dtype. Like torch, it refuses a floating
// result for an integer tensor rather than silently truncating it.
Tensor& assign_result(Tensor& self, Tensor result, std::string_view op) {
  if (is_floating_point(result.dtype()) && !is_floating_point(self.dtype())) {
    throw Error("dist::Tensor " + std::string(op) + ": result type " +
                std::string(dtype_name(result.dtype())) +
                " can't be cast to the desired output type " +
                std::string(dtype_name(self.dtype())) +
                " (torch refuses this too). Convert the tensor first: t = t.to(" +
                std::string(detail::dtype_constant_name(result.dtype())) + "); t " +
                std::string(op) + " ...");
  }
  self = result.dtype() == self.dtype() ? std::move(result) : result.to(self.dtype());
  return self;
}

// The storage counters of memory_allocated(): live and peak bytes per kind of device, changed
// only by Buffer, which allocates and frees every tensor's bytes.
struct StorageCounter {
  std::atomic<std::int64_t> live{0};
  std::atomic<std::int64_t> peak{0};

  void allocated(std::int64_t bytes) {
    const std::int64_t now = live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
  }
  void freed(std::int64_t bytes) { live.fetch_sub(bytes, std::memory_order_relaxed); }
};

// Initialised before any code runs (constinit) and never destroyed (a trivial destructor): tensors
// in other static objects may be made and freed before main and after it.
constinit StorageCounter cpu_storage, cuda_storage;
static_assert(std::is_trivially_destructible_v<StorageCounter>);

StorageCounter& storage_counter(Device device) {
  return device.is_cpu() ? cpu_storage : cuda_storage;
}

}  // namespace

std::int64_t memory_allocated(Device device) {
  return storage_counter(device).live.load(std::memory_order_relaxed);
}

std::int64_t max_memory_allocated(Device device) {
  return storage_counter(device).peak.load(std::memory_order_relaxed);
}

void reset_peak_memory_stats(Device device) {
  StorageCounter& counter = storage_counter(device);
  counter.peak.store(counter.live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

namespace detail {

Buffer::Buffer(std::size_t nbytes, Device device) : size_(nbytes), device_(device) {
  if (nbytes == 0) return;
  data_ = device.is_cpu() ? new std::byte[nbytes]()  // () zero-fills
                          : static_cast<std::byte*>(gpu::allocate(nbytes, device.index()));
  storage_counter(device_).allocated(static_cast<std::int64_t>(size_));
}

Buffer::Buffer(const Buffer& other) : Buffer(other.size_, other.device_) {
  copy_bytes(data_, device_, other.data_, other.device_, size_);
}

Buffer& Buffer::operator=(const Buffer& other) {
  if (this != &other) *this = Buffer(other);
  return *this;
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      device_(other.device_),
      owned_(std::exchange(other.owned_, true)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    if (!owned_ && other.size_ == size_ && other.device_ == device_) {
      // A view keeps showing its storage: the bytes go there. (A failed GPU copy here ends the
      // process, as any failure in a noexcept function does.)
      copy_bytes(data_, device_, other.data_, other.device_, size_);
      return *this;
    }
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = other.device_;
    owned_ = std::exchange(other.owned_, true);
  }
  return *this;
}

Buffer Buffer::view(std::byte* data, std::size_t size, Device device) {
  Buffer b;
  b.data_ = data;
  b.size_ = size;
  b.device_ = device;
  b.owned_ = false;
  return b;
}

Buffer::~Buffer() {
  release();
}

void Buffer::release() noexcept {
  if (!owned_) {  // a view frees nothing
    data_ = nullptr;
    owned_ = true;
    return;
  }
  if (data_ != nullptr) storage_counter(device_).freed(static_cast<std::int64_t>(size_));
  if (device_.is_cpu()) {
    delete[] data_;
  } else {
    gpu::release(data_, device_.index());
  }
  data_ = nullptr;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, bytes);
  } else {
    gpu::copy(dst, src, bytes, dst_device.is_cuda() ? dst_device.index() : src_device.index());
  }
}

}  // namespace detail

Tensor::Tensor(std::int64_t numel, DType dtype, Device device) : numel_(numel), dtype_(dtype) {
  if (numel < 0) {
    throw ConfigError("dist::Tensor: numel must be >= 0, got " + std::to_string(numel) +
                      "; check the size passed to the factory (zeros/full/arange)");
  }
  const std::size_t size = dist::element_size(dtype);
  if (static_cast<std::uint64_t>(numel) > std::numeric_limits<std::ptrdiff_t>::max() / size) {
    throw ConfigError("dist::Tensor: numel " + std::to_string(numel) + " of " +
                      std::string(dtype_name(dtype)) + " does not fit in memory");
  }
  bytes_ = detail::Buffer(static_cast<std::size_t>(numel) * size, device);
}

Tensor Tensor::zeros(std::int64_t n, DType dtype, Device device) {
  return Tensor(n, dtype, device);
}

// full and arange fill on the host and copy the values over: the same numbers torch's kernels
// would write, since each element is one exact conversion.
Tensor Tensor::full(std::int64_t n, double value, DType dtype, Device device) {
  Tensor t(n, dtype);
  t.fill_(value);
  if (!device.is_cpu()) return t.to(device);
  return t;  // moved out, not copied (a ?: of t would copy it)
}

Tensor Tensor::arange(std::int64_t n, DType dtype, Device device) {
  Tensor t(n, dtype);
  visit_dtype(dtype, [&]<typename T>(std::type_identity<T>) {
    T* p = t.data_ptr<T>();
    for (std::int64_t i = 0; i < n; ++i) p[i] = convert<T>(i);
  });
  if (!device.is_cpu()) return t.to(device);
  return t;  // moved out, not copied (a ?: of t would copy it)
}

Tensor Tensor::to(Device device) const {
  Tensor out(numel_, dtype_, device);
  detail::copy_bytes(out.data(), device, data(), this->device(), nbytes());
  return out;
}

double Tensor::item(std::int64_t i) const {
  if (i < 0 || i >= numel_) {
    throw Error("dist::Tensor::item(" + std::to_string(i) + "): index out of range for a tensor " +
                "with " + std::to_string(numel_) + " elements; valid indices are 0..numel()-1");
  }
  if (is_cuda()) return slice(i, 1).cpu().item(0);
  return visit_dtype(dtype_, [&]<typename T>(std::type_identity<T>) {
    return static_cast<double>(data_ptr<T>()[i]);
  });
}

void Tensor::set(std::int64_t i, double value) {
  if (i < 0 || i >= numel_) {
    throw Error("dist::Tensor::set(" + std::to_string(i) + ", ...): index out of range for a " +
                "tensor with " + std::to_string(numel_) +
                " elements; valid indices are 0..numel()-1");
  }
  if (is_cuda()) return assign_slice(i, full(1, value, dtype_));
  visit_dtype(dtype_, [&]<typename T>(std::type_identity<T>) {
    check_fits<T>(value);
    data_ptr<T>()[i] = convert<T>(value);
  });
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return *this;
  if (is_cuda()) return cpu().to(dtype).to(device());
  Tensor out(numel_, dtype);
  visit_dtype(dtype_, [&]<typename From>(std::type_identity<From>) {
    visit_dtype(dtype, [&]<typename To>(std::type_identity<To>) {
      const From* src = data_ptr<From>();
      To* dst = out.data_ptr<To>();
      for (std::int64_t i = 0; i < numel_; ++i) dst[i] = convert<To>(src[i]);
    });
  });
  return out;
}

void Tensor::fill_(double value) {
  if (is_cuda()) return assign_slice(0, full(numel_, value, dtype_));
  visit_dtype(dtype_, [&]<typename T>(std::type_identity<T>) {
    check_fits<T>(value);
    std::fill_n(data_ptr<T>(), numel_, convert<T>(value));
  });
}

void Tensor::copy_(const Tensor& src) {
  if (src.numel() != numel_) {
    throw Error("dist::Tensor::copy_: source has " + std::to_string(src.numel()) +
                " elements, destination has " + std::to_string(numel_) +
                "; copy_ needs equal numel (use assign_slice to write part of a tensor)");
  }
  assign_slice(0, src);  // converts the dtype; the destination keeps its device
}

Tensor Tensor::slice(std::int64_t start, std::int64_t length) const {
  if (start < 0 || length < 0 || start > numel_ || length > numel_ - start) {
    throw Error("dist::Tensor::slice(start=" + std::to_string(start) +
                ", length=" + std::to_string(length) + ") does not fit in a tensor with " +
                std::to_string(numel_) + " elements; need 0 <= start and start + length <= numel");
  }
  Tensor out(length, dtype_, device());
  detail::copy_bytes(out.data(), out.device(), bytes_.data() + start * element_size(), device(),
                     out.nbytes());
  return out;
}

Tensor detail::view_into(Tensor& base, std::int64_t start, std::int64_t length) {
  if (start < 0 || length < 0 || start > base.numel_ || length > base.numel_ - start) {
    throw Error("dist::detail::view_into(start=" + std::to_string(start) +
                ", length=" + std::to_string(length) + ") does not fit in a tensor with " +
                std::to_string(base.numel_) + " elements");
  }
  Tensor out;
  out.numel_ = length;
  out.dtype_ = base.dtype_;
  const std::size_t size = base.element_size();
  out.bytes_ = detail::Buffer::view(base.bytes_.data() + static_cast<std::size_t>(start) * size,
                                    static_cast<std::size_t>(length) * size, base.device());
  return out;
}

void Tensor::assign_slice(std::int64_t start, const Tensor& values) {
  if (start < 0 || start > numel_ || values.numel() > numel_ - start) {
    throw Error("dist::Tensor::assign_slice(start=" + std::to_string(start) + ", " +
                std::to_string(values.numel()) + " values) does not fit in a tensor with " +
                std::to_string(numel_) +
                " elements; need 0 <= start and start + values.numel() <= numel");
  }
  const Tensor converted = values.to(dtype_);
  detail::copy_bytes(bytes_.data() + start * element_size(), device(), converted.data(),
                     converted.device(), converted.nbytes());
}

Tensor cat(const std::vector<Tensor>& tensors, Device device) {
  std::int64_t total = 0;
  for (const Tensor& t : tensors) total += t.numel();
  Tensor out(total, tensors.empty() ? kFloat32 : tensors.front().dtype(), device);
  std::int64_t at = 0;
  for (const Tensor& t : tensors) {
    out.assign_slice(at, t);
    at += t.numel();
  }
  return out;
}

std::vector<Tensor> split(const Tensor& tensor, std::int64_t split_size) {
  if (split_size <= 0 || tensor.numel() % split_size != 0) {
    throw Error("dist::split: runs of " + std::to_string(split_size) +
                " elements do not divide a tensor of " + std::to_string(tensor.numel()) +
                "; split_size must be positive and divide numel");
  }
  std::vector<Tensor> runs;
  for (std::int64_t at = 0; at < tensor.numel(); at += split_size) {
    runs.push_back(tensor.slice(at, split_size));
  }
  return runs;
}

bool Tensor::equal(const Tensor& other) const {
  const Device device = common_device(*this, other, "equal");
  if (dtype_ != other.dtype_ || numel_ != other.numel_) return false;
  if (device.is_cuda()) return cpu().equal(other.cpu());
  return visit_dtype(dtype_, [&]<typename T>(std::type_identity<T>) {
    const T* a = data_ptr<T>();
    return std::equal(a, a + numel_, other.data_ptr<T>());  // NaN == NaN is false, as in torch
  });
}

double Tensor::sum() const {
  if (is_cuda()) return cpu().sum();
  return visit_dtype(dtype_, [&]<typename T>(std::type_identity<T>) {
    const T* p = data_ptr<T>();
    double total = 0;
    for (std::int64_t i = 0; i < numel_; ++i) total += static_cast<double>(p[i]);
    return total;
  });
}

void Tensor::check_dtype(DType expected) const {
  if (expected == dtype_) return;
  throw Error("dist::Tensor::data_ptr<" + std::string(detail::dtype_cpp_name(expected)) +
              ">() on a " + std::string(dtype_name(dtype_)) +
              " tensor: the element type must match the dtype; " + "use data_ptr<" +
              std::string(detail::dtype_cpp_name(dtype_)) + ">() or convert first with .to(" +
              std::string(detail::dtype_constant_name(expected)) + ")");
}

Tensor& Tensor::operator+=(const Tensor& other) {
  return assign_result(*this, *this + other, "+=");
}
Tensor& Tensor::operator-=(const Tensor& other) {
  return assign_result(*this, *this - other, "-=");
}
Tensor& Tensor::operator*=(const Tensor& other) {
  return assign_result(*this, *this * other, "*=");
}
Tensor& Tensor::operator/=(const Tensor& other) {
  return assign_result(*this, *this / other, "/=");
}
Tensor& Tensor::operator+=(std::int64_t s) {
  return assign_result(*this, *this + s, "+=");
}
Tensor& Tensor::operator-=(std::int64_t s) {
  return assign_result(*this, *this - s, "-=");
}
Tensor& Tensor::operator*=(std::int64_t s) {
  return assign_result(*this, *this * s, "*=");
}
Tensor& Tensor::operator/=(std::int64_t s) {
  return assign_result(*this, *this / s, "/=");
}
Tensor& Tensor::operator+=(double s) {
  return assign_result(*this, *this + s, "+=");
}
Tensor& Tensor::operator-=(double s) {
  return assign_result(*this, *this - s, "-=");
}
Tensor& Tensor::operator*=(double s) {
  return assign_result(*this, *this * s, "*=");
}
Tensor& Tensor::operator/=(double s) {
  return assign_result(*this, *this / s, "/=");
}

Tensor operator+(const Tensor& a, const Tensor& b) {
  return combine(a, b, promote_types(a.dtype(), b.dtype()), Add{}, "+");
}
Tensor operator-(const Tensor& a, const Tensor& b) {
  return combine(a, b, promote_types(a.dtype(), b.dtype()), Subtract{}, "-");
}
Tensor operator*(const Tensor& a, const Tensor& b) {
  return combine(a, b, promote_types(a.dtype(), b.dtype()), Multiply{}, "*");
}
Tensor operator/(const Tensor& a, const Tensor& b) {
  return combine(a, b, floating_result_type(promote_types(a.dtype(), b.dtype())), TrueDivide{},
                 "/");
}

// A Python int keeps the tensor's dtype; a Python float makes an integer tensor float32.
Tensor operator+(const Tensor& a, std::int64_t s) {
  return combine_scalar(a, s, a.dtype(), Add{});
}
Tensor operator-(const Tensor& a, std::int64_t s) {
  return combine_scalar(a, s, a.dtype(), Subtract{});
}
Tensor operator*(const Tensor& a, std::int64_t s) {
  return combine_scalar(a, s, a.dtype(), Multiply{});
}
Tensor operator/(const Tensor& a, std::int64_t s) {
  return combine_scalar(a, s, floating_result_type(a.dtype()), TrueDivide{});
}
Tensor operator+(const Tensor& a, double s) {
  return combine_scalar(a, s, floating_result_type(a.dtype()), Add{});
}
Tensor operator-(const Tensor& a, double s) {
  return combine_scalar(a, s, floating_result_type(a.dtype()), Subtract{});
}
Tensor operator*(const Tensor& a, double s) {
  return combine_scalar(a, s, floating_result_type(a.dtype()), Multiply{});
}
Tensor operator/(const Tensor& a, double s) {
  return combine_scalar(a, s, floating_result_type(a.dtype()), TrueDivide{});
}

}  // namespace dist
