// Memory that reads as zeros without having been written: anonymous pages, which the kernel maps
// only when each is first touched. A std::vector<std::byte>(n) writes all n zeros at once, so a
// buffer sized for the largest message costs a page fault per page at start, used or not; on a
// virtual machine those faults are a large part of a short job's life (bench/job_life.py).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <utility>

namespace dist::util {

class ZeroPages {
 public:
  ZeroPages() = default;
  explicit ZeroPages(std::size_t bytes) : size_(bytes) {
    if (bytes == 0) return;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
  }
  ZeroPages(ZeroPages&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  ZeroPages& operator=(ZeroPages other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    return *this;
  }
  ~ZeroPages() {
    if (data_ != nullptr) ::munmap(data_, size_);
  }

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace dist::util
