// DIST_DEBUG=DETAIL: see debug_group.h.
#include "debug_group.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <vector>

#include "backends/common.h"
#include "dist/check.h"
#include "dist/env.h"

namespace dist {
namespace {

// "all_reduce(SUM, torch.float32, 4 elements, cpu)": what one rank called, as the error shows it.
std::string fingerprint(const char* op, const std::string& detail, const Tensor& t) {
  return std::string(op) + "(" + detail + (detail.empty() ? "" : ", ") +
         std::string(dtype_name(t.dtype())) + ", " + std::to_string(t.numel()) + " elements, " +
         t.device().str() + ")";
}

class DebugProcessGroup : public ProcessGroup {
 public:
  DebugProcessGroup(std::unique_ptr<ProcessGroup> inner, std::shared_ptr<Store> store)
      : ProcessGroup(inner->rank(), inner->size()),
        inner_(std::move(inner)),
        store_(std::move(store)) {}

  std::string backend() const override { return inner_->backend(); }
  std::chrono::milliseconds timeout() const override { return inner_->timeout(); }

  void all_reduce(Tensor& tensor, ReduceOp op) override {
    check(fingerprint("all_reduce", reduce_op_name(op), tensor));
    inner_->all_reduce(tensor, op);
  }
  void broadcast(Tensor& tensor, int src) override {
    check(fingerprint("broadcast", "src " + std::to_string(src), tensor));
    inner_->broadcast(tensor, src);
  }
  void barrier() override {
    check("barrier()");
    inner_->barrier();
  }
  void all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check(fingerprint("all_gather", "", input));
    inner_->all_gather(outputs, input);
  }
  void reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    check(fingerprint("reduce_scatter", reduce_op_name(op), output));
    inner_->reduce_scatter(output, inputs, op);
  }
  void gather(const Tensor& input, std::vector<Tensor>* outputs, int dst) override {
    check(fingerprint("gather", "dst " + std::to_string(dst), input));
    inner_->gather(input, outputs, dst);
  }
  void scatter(Tensor& output, const std::vector<Tensor>* inputs, int src) override {
    check(fingerprint("scatter", "src " + std::to_string(src), output));
    inner_->scatter(output, inputs, src);
  }
  void send(const Tensor& tensor, int dst, int tag) override { inner_->send(tensor, dst, tag); }
  void recv(Tensor& tensor, int src, int tag) override { inner_->recv(tensor, src, tag); }

 private:
  std::string key(std::uint64_t call, int rank) const {
    return std::to_string(call) + "/" + std::to_string(rank);
  }

  // Before every rank throws: rank 0 hosts the store, so it waits (a few seconds at most) until
  // the other ranks in `readers` have read what their own error needs, instead of exiting and
  // leaving them with a lost connection.
  void settle(std::uint64_t call, const std::vector<int>& readers) {
    const std::string topic = "read/" + std::to_string(call);
    if (rank() != 0) {
      acknowledge_read(*store_, topic, rank());
      return;
    }
    std::vector<int> others;
    for (int r : readers) {
      if (r != 0) others.push_back(r);
    }
    wait_for_reads(*store_, topic, others,
                   std::min<std::chrono::milliseconds>(timeout(), std::chrono::seconds(5)));
  }

  // Publishes this rank's call, waits for every rank's, and compares.
  void check(const std::string& mine) {
    const std::uint64_t call = ++calls_;
    store_->set(key(call, rank()), mine);
    std::vector<std::string> keys;
    for (int r = 0; r < size(); ++r) keys.push_back(key(call, r));
    const std::string where = "DIST_DEBUG=DETAIL: collective #" + std::to_string(call) + " " +
                              mine + " on rank " + std::to_string(rank());
    try {
      store_->wait(keys, timeout());
    } catch (const TimeoutError&) {
      std::string missing;
      std::vector<int> came;
      for (int r = 0; r < size(); ++r) {
        if (store_->check({keys[static_cast<std::size_t>(r)]})) {
          came.push_back(r);
        } else {
          missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
      }
      settle(call, came);
      throw TimeoutError(where + ": rank(s) " + missing + " did not reach it within " +
                         backends::seconds(timeout()) +
                         ". Every rank must make the same collective calls in the same order; "
                         "look for a branch that only some ranks take, or a rank that is stuck.");
    }
    std::vector<std::string> calls;
    for (const std::string& k : keys) calls.push_back(store_->get(k));
    // Every rank has published call N, so every rank has read all of call N-1: our key of
    // call N-1 can go, and the store holds at most two calls' keys.
    if (call > 1) store_->delete_key(key(call - 1, rank()));
    if (std::all_of(calls.begin(), calls.end(), [&](const std::string& c) { return c == mine; })) {
      return;
    }
    std::vector<int> everyone(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) everyone[static_cast<std::size_t>(r)] = r;
    settle(call, everyone);
    std::string each;
    for (int r = 0; r < size(); ++r) {
      each += "\n  rank " + std::to_string(r) + ": " + calls[static_cast<std::size_t>(r)];
    }
    throw Error(where + ": the ranks' calls differ:" + each +
                "\nEvery rank must make the same collective calls in the same order, with the "
                "same sizes, dtypes, reduce ops and roots.");
  }

  std::unique_ptr<ProcessGroup> inner_;
  std::shared_ptr<Store> store_;
  std::uint64_t calls_ = 0;
};

}  // namespace

DebugLevel debug_level_from_env() {
  const auto value = env_value("DIST_DEBUG");
  if (!value) return DebugLevel::kOff;
  std::string upper = *value;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (upper == "OFF") return DebugLevel::kOff;
  if (upper == "DETAIL") return DebugLevel::kDetail;
  throw ConfigError("DIST_DEBUG=\"" + *value +
                    "\" is not a debug level: use DETAIL (check that every rank makes the same "
                    "collective calls) or OFF, or leave it unset");
}

std::unique_ptr<ProcessGroup> make_debug_group(std::unique_ptr<ProcessGroup> inner,
                                               std::shared_ptr<Store> store) {
  return std::make_unique<DebugProcessGroup>(std::move(inner), std::move(store));
}

}  // namespace dist
