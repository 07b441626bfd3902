// dist/device.h — where a tensor's numbers live: the CPU, or one of this machine's GPUs.
//
//   auto t = dist::arange(2, dist::kInt64, dist::Device::cuda(local_rank));  // like torch's
//   std::cout << t;                          // tensor([0, 1], device='cuda:0')
//   auto back = t.cpu();                     // copy to the host
//   if (!dist::cuda_is_available()) ...      // torch.cuda.is_available()
//
// One process drives one GPU, chosen by LOCAL_RANK: that is the rule NCCL enforces (two ranks
// on one GPU are refused) and the reason LOCAL_RANK exists at all. A build made with the cpu
// preset has no CUDA: asking it for a GPU tensor is a configuration error (exit 2) that says
// how to build the GPU path.
//
// Taught in: chapter 04 (all_reduce on GPU tensors), chapter 08 (DDP on GPU).
// Built in: common/src/tensor/device.cpp, and gpu/ (the census: cuda_runtime.cpp, or no_cuda.cpp
// without the GPU path).
#pragma once

#include <string>
#include <string_view>

namespace dist {

class Device {
 public:
  enum class Type { kCPU, kCUDA };

  Device() = default;  // the CPU
  static Device cpu() { return Device(); }
  static Device cuda(int index = 0);
  // "cpu", "cuda" (GPU 0) or "cuda:N", as torch.device spells them; ConfigError otherwise.
  static Device parse(std::string_view text);

  Type type() const { return type_; }
  int index() const { return index_; }  // the GPU's number; -1 for the CPU
  bool is_cpu() const { return type_ == Type::kCPU; }
  bool is_cuda() const { return type_ == Type::kCUDA; }
  std::string str() const;  // "cpu" or "cuda:N", as str(torch.device) prints it

  friend bool operator==(const Device&, const Device&) = default;

 private:
  Device(Type type, int index) : type_(type), index_(index) {}
  Type type_ = Type::kCPU;
  int index_ = -1;
};

// torch.cuda.is_available(): this build has the GPU path, a driver is loaded and it sees a GPU.
bool cuda_is_available();
// torch.cuda.device_count(): how many GPUs this process sees (0 without CUDA).
int cuda_device_count();
// Why cuda_is_available() is false, in words a user can act on; "" when it is true.
std::string cuda_unavailable_reason();

}  // namespace dist
