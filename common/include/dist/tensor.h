// dist/tensor.h — the smallest tensor the chapters need.
//
// A 1-D array with a dtype and a device, enough to show what collectives do. It mirrors torch
// where a reader of the source posts will look: arange/full/zeros, arithmetic with torch's type
// promotion, printing that matches torch's repr character for character (`tensor([4, 6])`,
// `tensor([1.5000, 2.0000])`, `tensor([1, 2], dtype=torch.int32)`,
// `tensor([4, 6], device='cuda:0')`), and `.to(device)` between the CPU and a GPU.
//
// Six dtypes: float32 (the default), float64, int32, int64, and the 16-bit float16 and bfloat16
// of mixed-precision training (their element types dist::Half and dist::BFloat16, with their
// ranges and precision, are in dist/half.h). The 16-bit ones behave as torch's do on the CPU:
//   * a cast to them rounds to nearest, ties to even (float64 goes through float32 first, as in
//     torch), and overflows to inf: `dist::full(1, 65520.0).to(dist::kFloat16)` is inf;
//   * full/fill_/set refuse a finite value beyond the largest finite one (65504 for float16), as
//     torch does with "value cannot be converted to type at::Half without overflow" (torch checks
//     float32 too; this library, only the 16-bit dtypes);
//   * arithmetic between two float16 tensors stays float16, each element computed in float32
//     and rounded once per operation; a scalar keeps the dtype and is rounded to it first (torch
//     1.13: `half_tensor * 0.1` multiplies by 0.0999755859375; later torch keeps the scalar of
//     `*` and `/` in float32, see main's aten/src/ATen/native/cpu/BinaryOpsKernel.cpp);
//   * float16 with bfloat16 gives float32 (torch.promote_types), with float32 or float64 the
//     wider type, with an integer the 16-bit type;
//   * printing converts to float32 first, as torch's _tensor_str does, and names the dtype:
//     `tensor([1.5000, 2.0000], dtype=torch.float16)`.
//
// What it leaves out: more than one dimension, views and strides (but for the one that
// DistributedDataParallel makes of its buckets, detail::view_into), autograd. Two deliberate
// differences from torch:
//   * copying a dist::Tensor copies its data (value semantics), because shared storage behind a
//     copy is a classic source of bugs in C++ code. Pass tensors by reference;
//   * every operation has finished when it returns, on the GPU too (torch queues GPU work and
//     returns at once). Arithmetic on a GPU tensor is computed on the host through a copy: this
//     tensor is for showing collectives, whose data does stay on the GPU; chapter 08's kernels are
//     where the GPU computes.
//
// Taught in: chapter 04 (all_reduce); float16 and bfloat16 in chapter 13 (DDP in practice).
// Built in: common/src/tensor/tensor.cpp (storage, casts, arithmetic), tensor_dtype.cpp (the table
// of dtypes), tensor_repr.cpp (torch's printing rules).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "dist/check.h"
#include "dist/device.h"
#include "dist/half.h"

namespace dist {

// The numbers are on the wire (the Gloo mesh's headers): a new dtype goes at the end.
enum class DType { kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16 };

inline constexpr DType kFloat32 = DType::kFloat32;
inline constexpr DType kFloat64 = DType::kFloat64;
inline constexpr DType kInt32 = DType::kInt32;
inline constexpr DType kInt64 = DType::kInt64;
inline constexpr DType kFloat16 = DType::kFloat16;    // torch.float16 (torch.half)
inline constexpr DType kBFloat16 = DType::kBFloat16;  // torch.bfloat16

std::size_t element_size(DType dtype);
bool is_floating_point(DType dtype);
std::string_view dtype_name(DType dtype);  // "torch.float32", ... as torch spells them
DType promote_types(DType a, DType b);     // torch.promote_types for these six dtypes

namespace detail {
// Throws dist::Error naming the bad value and the six dtypes; `who` ("dist::Tensor: ", or "")
// opens the message.
[[noreturn]] void throw_invalid_dtype(DType dtype, std::string_view who);
// How a hint spells the dtype as a constant ("dist::kFloat32") and as the C++ element type that
// data_ptr<T>() wants ("float", "dist::Half"); both throw for a value outside the enum.
std::string_view dtype_constant_name(DType dtype);
std::string_view dtype_cpp_name(DType dtype);
}  // namespace detail

// Calls f(std::type_identity<T>{}) with T the C++ element type of `dtype`. It is the one place
// that pairs each dtype with its C++ type (dtype_of reads it backwards, and the library's dtype
// table takes sizes from it) and that turns the run-time dtype into compile-time code, e.g.
//   dist::visit_dtype(t.dtype(), [&]<typename T>(std::type_identity<T>) { T* p = t.data_ptr<T>();
//   });
template <typename F>
constexpr decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32:
      return f(std::type_identity<float>{});
    case DType::kFloat64:
      return f(std::type_identity<double>{});
    case DType::kInt32:
      return f(std::type_identity<std::int32_t>{});
    case DType::kInt64:
      return f(std::type_identity<std::int64_t>{});
    case DType::kFloat16:
      return f(std::type_identity<Half>{});
    case DType::kBFloat16:
      return f(std::type_identity<BFloat16>{});
  }
  detail::throw_invalid_dtype(dtype, "");
}

// The dtype whose element type is T, read back from visit_dtype: dtype_of<float>() is kFloat32.
// It runs at compile time, so for any other T the build stops at the throw below.
template <typename T>
consteval DType dtype_of() {
  for (DType dtype : {kFloat32, kFloat64, kInt32, kInt64, kFloat16, kBFloat16}) {
    if (visit_dtype(dtype,
                    []<typename U>(std::type_identity<U>) { return std::is_same_v<U, T>; })) {
      return dtype;
    }
  }
  throw "dist::dtype_of<T>: T is not the element type of any dist::DType";
}

namespace detail {

// A tensor's bytes on one device, zero-filled when made. Copying it copies the bytes (on the same
// device); moving it moves the pointer.
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t nbytes, Device device);
  Buffer(const Buffer& other);
  Buffer& operator=(const Buffer& other);
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer();

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  Device device() const { return device_; }

  // A buffer that shows `size` bytes of another buffer's storage, which must outlive it (DDP's
  // gradient_as_bucket_view: a grad that is a slice of its bucket). It is not counted by
  // memory_allocated() and frees nothing. Assigning it a buffer of its size and device writes
  // the bytes into the storage it shows (so `grad += x` and `grad = y` land in the bucket);
  // another size makes it an owning buffer again. Copying it makes an owning copy; moving it
  // moves the view.
  static Buffer view(std::byte* data, std::size_t size, Device device);
  bool is_view() const { return !owned_; }

 private:
  void release() noexcept;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  Device device_;
  bool owned_ = true;
};

// Copies `bytes` from one device's memory to another's (either may be the CPU); finished on return.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device,
                std::size_t bytes);

}  // namespace detail

class Tensor;
namespace detail {
// Elements [start, start + length) of `base`, shared, not copied (detail::Buffer::view): what
// DistributedDataParallel makes its parameters' grads with gradient_as_bucket_view. `base` must
// outlive the view and never be reallocated. Throws dist::Error for a range outside `base`.
Tensor view_into(Tensor& base, std::int64_t start, std::int64_t length);
}  // namespace detail

class Tensor {
 public:
  Tensor() = default;  // an empty float32 tensor on the CPU
  Tensor(std::int64_t numel, DType dtype, Device device = {});  // zero-filled

  // Factories, named and defaulted as in torch.
  static Tensor zeros(std::int64_t n, DType dtype = kFloat32, Device device = {});
  static Tensor full(std::int64_t n, double value, DType dtype = kFloat32, Device device = {});
  static Tensor arange(std::int64_t n, DType dtype = kInt64, Device device = {});  // 0, ..., n-1
  template <typename T>
  static Tensor from(const std::vector<T>& values, Device device = {}) {
    Tensor t(static_cast<std::int64_t>(values.size()), dtype_of<T>());
    if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
    if (!device.is_cpu()) return t.to(device);
    return t;  // moved out, not copied (a ?: of t would copy it)
  }
  template <typename T>
  static Tensor from(std::initializer_list<T> values, Device device = {}) {
    return from(std::vector<T>(values), device);
  }

  std::int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  Device device() const { return bytes_.device(); }
  bool is_cuda() const { return device().is_cuda(); }
  std::size_t element_size() const { return dist::element_size(dtype_); }
  std::size_t nbytes() const { return bytes_.size(); }
  // The first byte, in the tensor's device memory: a GPU address for a GPU tensor (as in torch),
  // which host code must not dereference. Hand it to NCCL or a kernel; read values with item(),
  // to_vector() or cpu().
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

  // Typed access to the same address; throws dist::Error if T does not match the dtype.
  template <typename T>
  T* data_ptr() {
    check_dtype(dtype_of<T>());
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <typename T>
  const T* data_ptr() const {
    check_dtype(dtype_of<T>());
    return reinterpret_cast<const T*>(bytes_.data());
  }
  // The values, copied to the host.
  template <typename T>
  std::vector<T> to_vector() const {
    if (is_cuda()) return cpu().to_vector<T>();
    const T* p = data_ptr<T>();
    return std::vector<T>(p, p + numel_);
  }

  // The same values on another device: torch's .to(device), .cpu() and .cuda(index). A tensor
  // already there is copied all the same (value semantics).
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // Element i as a double (exact for every int32 and for int64 up to 2^53), and assignment
  // (converted as .to(dtype) converts; a float16/bfloat16 tensor refuses a finite value beyond
  // its range, as torch does).
  double item(std::int64_t i) const;
  void set(std::int64_t i, double value);

  // Converts as torch's .to(dtype) does: float -> int truncates, to float16/bfloat16 rounds to
  // nearest even (float64 via float32) and overflows to inf.
  Tensor to(DType dtype) const;
  Tensor clone() const { return *this; }
  void fill_(double value);
  void copy_(const Tensor& src);  // same numel; converts dtype

  // Elements [start, start + length) as a new tensor, and writing one back.
  Tensor slice(std::int64_t start, std::int64_t length) const;
  void assign_slice(std::int64_t start, const Tensor& values);

  // Same dtype, same numel and the same values (NaNs compare unequal, as torch.equal does). Like
  // torch.equal, both tensors must be on the same device.
  bool equal(const Tensor& other) const;

  // Arithmetic with torch's type promotion: an int tensor with an integer scalar stays an int
  // tensor; with a floating scalar it becomes float32; `/` always gives a floating tensor (true
  // division), so `int_tensor /= 2` is an error, exactly as in torch.
  Tensor& operator+=(const Tensor& other);
  Tensor& operator-=(const Tensor& other);
  Tensor& operator*=(const Tensor& other);
  Tensor& operator/=(const Tensor& other);
  Tensor& operator+=(std::int64_t s);
  Tensor& operator-=(std::int64_t s);
  Tensor& operator*=(std::int64_t s);
  Tensor& operator/=(std::int64_t s);
  Tensor& operator+=(double s);
  Tensor& operator-=(double s);
  Tensor& operator*=(double s);
  Tensor& operator/=(double s);
  Tensor& operator+=(int s) { return *this += static_cast<std::int64_t>(s); }
  Tensor& operator-=(int s) { return *this -= static_cast<std::int64_t>(s); }
  Tensor& operator*=(int s) { return *this *= static_cast<std::int64_t>(s); }
  Tensor& operator/=(int s) { return *this /= static_cast<std::int64_t>(s); }

  double sum() const;  // as a double, for checks and printing

  // torch's repr: "tensor([4, 6])", "tensor([4, 6], device='cuda:0')".
  std::string repr() const;

  // Whether this tensor shares another's elements (detail::view_into); copies never do.
  bool is_view() const { return bytes_.is_view(); }

 private:
  friend Tensor detail::view_into(Tensor& base, std::int64_t start, std::int64_t length);
  void check_dtype(DType expected) const;
  std::int64_t numel_ = 0;
  DType dtype_ = kFloat32;
  detail::Buffer bytes_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, std::int64_t s);
Tensor operator-(const Tensor& a, std::int64_t s);
Tensor operator*(const Tensor& a, std::int64_t s);
Tensor operator/(const Tensor& a, std::int64_t s);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
inline Tensor operator+(const Tensor& a, int s) {
  return a + static_cast<std::int64_t>(s);
}
inline Tensor operator-(const Tensor& a, int s) {
  return a - static_cast<std::int64_t>(s);
}
inline Tensor operator*(const Tensor& a, int s) {
  return a * static_cast<std::int64_t>(s);
}
inline Tensor operator/(const Tensor& a, int s) {
  return a / static_cast<std::int64_t>(s);
}
inline Tensor operator+(std::int64_t s, const Tensor& a) {
  return a + s;
}
inline Tensor operator*(std::int64_t s, const Tensor& a) {
  return a * s;
}
inline Tensor operator+(int s, const Tensor& a) {
  return a + s;
}
inline Tensor operator*(int s, const Tensor& a) {
  return a * s;
}
inline Tensor operator+(double s, const Tensor& a) {
  return a + s;
}
inline Tensor operator*(double s, const Tensor& a) {
  return a * s;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Free-function spellings that read like the source posts: dist::arange(world, dist::kInt64).
inline Tensor arange(std::int64_t n, DType dtype = kInt64, Device device = {}) {
  return Tensor::arange(n, dtype, device);
}
inline Tensor zeros(std::int64_t n, DType dtype = kFloat32, Device device = {}) {
  return Tensor::zeros(n, dtype, device);
}
inline Tensor full(std::int64_t n, double v, DType dtype = kFloat32, Device device = {}) {
  return Tensor::full(n, v, dtype, device);
}

// torch.cat for these one-dimensional tensors: tensors[0], tensors[1], ... end to end, in one new
// tensor of the first one's dtype (the others are converted to it) on `device`. torch.cat takes
// the device of its inputs and refuses an empty list; here the caller names the device, so that
// an empty list gives an empty float32 tensor there.
Tensor cat(const std::vector<Tensor>& tensors, Device device);
// torch.split(tensor, split_size) for a tensor of `split_size * n` elements: the n runs of
// `split_size` elements, in order, as new tensors (torch returns views of `tensor`; a dist::Tensor
// owns its values). Throws dist::Error unless split_size > 0 divides tensor.numel().
std::vector<Tensor> split(const Tensor& tensor, std::int64_t split_size);

// Bytes of tensor storage this process holds, counted where every dist::Tensor's storage is made
// and freed: torch.cuda.memory_allocated, max_memory_allocated and reset_peak_memory_stats, for
// the CPU as well as the GPU. One count per kind of device: `device` is Device::cpu() (the
// default) or any cuda:i, and every GPU of the process counts together (one per rank in the
// chapters). Only tensors count: not the library's other buffers (DDP's buckets are tensors;
// a backend's own scratch memory, NCCL's included, is not), nor what the allocator rounds up.
// Safe to call from any thread.
//
//   dist::reset_peak_memory_stats();
//   ... one training step ...
//   std::int64_t peak = dist::max_memory_allocated();  // the step's high-water mark, in bytes
std::int64_t memory_allocated(Device device = {});      // live now
std::int64_t max_memory_allocated(Device device = {});  // the most live since start or last reset
void reset_peak_memory_stats(Device device = {});       // the peak becomes the live count

}  // namespace dist
