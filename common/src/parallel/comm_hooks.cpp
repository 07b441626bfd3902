// dist/comm_hooks.h: DDP communication hooks (chapter 13).
#include "dist/comm_hooks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"

namespace dist {

// ---- CommFuture

void CommFuture::add(const Work& work) {
  bytes_sent_ += work.bytes_sent();
  if (work.start_time() != Work::Clock::time_point{}) {
    if (start_ == Work::Clock::time_point{}) start_ = work.start_time();
    end_ = std::max(end_, work.end_time());
  }
}

void CommFuture::wait() {
  if (waited_) return;
  waited_ = true;  // a failure below is thrown once; the steps after it never run
  first_.wait();
  add(first_);
  for (Step& step : steps_) {
    Work next = step();
    next.wait();
    add(next);
  }
  steps_.clear();
}

// ---- The default hooks

CommFuture allreduce_hook(ProcessGroup& group, GradBucket& bucket) {
  // torch's _allreduce_fut: divide in place, then SUM: the average, bit for bit what DDP's own
  // path computes (it divides each gradient by world_size as it packs it).
  Tensor& buffer = bucket.buffer();
  buffer /= group.size();
  return CommFuture(group.all_reduce(buffer, ReduceOp::SUM, {.async_op = true}));
}

namespace {

// torch's fp16_compress_hook and bf16_compress_hook: cast, divide by world_size in the small
// type, all_reduce, and cast the sum back into the bucket once it has arrived.
CommFuture compress_hook(ProcessGroup& group, GradBucket& bucket, DType dtype) {
  Tensor* buffer = &bucket.buffer();
  auto compressed = std::make_shared<Tensor>(buffer->to(dtype));
  *compressed /= group.size();
  return CommFuture(group.all_reduce(*compressed, ReduceOp::SUM, {.async_op = true}))
      .then([buffer, compressed] {
        buffer->copy_(*compressed);
        return Work();
      });
}

}  // namespace

CommFuture fp16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kFloat16);
}

CommFuture bf16_compress_hook(ProcessGroup& group, GradBucket& bucket) {
  return compress_hook(group, bucket, kBFloat16);
}

// ---- PowerSGD

PowerSGDState::PowerSGDState(PowerSGDOptions options)
    : options_(options), rng_(options.random_seed) {
  if (options_.matrix_approximation_rank < 1) {
    throw ConfigError("PowerSGDState: matrix_approximation_rank = " +
                      std::to_string(options_.matrix_approximation_rank) + " must be 1 or more");
  }
  if (!(options_.min_compression_rate >= 0) || !(options_.orthogonalization_epsilon >= 0)) {
    throw ConfigError("PowerSGDState: min_compression_rate (" +
                      std::to_string(options_.min_compression_rate) +
                      ") and orthogonalization_epsilon (" +
                      std::to_string(options_.orthogonalization_epsilon) + ") must be 0 or more");
  }
  // torch 1.13's rule and reason: the first step runs before DDP has rebuilt its buckets.
  if ((options_.use_error_feedback || options_.warm_start) && options_.start_powerSGD_iter <= 1) {
    throw ConfigError(
        "PowerSGDState: start_powerSGD_iter = " + std::to_string(options_.start_powerSGD_iter) +
        " must be > 1 when use_error_feedback or warm_start is on (torch: \"Expect "
        "`start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is "
        "enabled, because PowerSGD can only be applied after the first two "
        "iterations in DDP.\")");
  }
}

PowerSGDState::CompressionStats PowerSGDState::compression_stats() const {
  CompressionStats stats{0, numel_before_, numel_after_};
  if (numel_after_ > 0) {
    stats.rate = static_cast<double>(numel_before_) / static_cast<double>(numel_after_);
  }
  return stats;
}

void PowerSGDState::maybe_increase_iter(const GradBucket& bucket) {
  if (bucket.is_last()) ++iter_;
}

namespace {

// One compressed gradient: an n x m matrix at `offset` in the bucket, rank r, and where its P
// (n x r) and Q (m x r), row-major, start in the bucket's P and Q memory.
struct Compressed {
  std::int64_t offset, n, m, r, p_at, q_at;
};

// torch 1.13's float32 reductions on an x86 CPU with AVX2, in their order, so that PowerSGD's
// small matrices come out bit for bit (tests/parity/comm_hooks_parity.py):
//   * the norm of a contiguous vector (a column of a one-column matrix): 8 lanes, each a fused
//     multiply-add of the squares of every 8th value, the lanes added in order, then the tail:
//     its multiples of 4 added as rounded squares, the rest fused;
//   * the norm of a strided column: one fused multiply-add per value, in order;
//   * a sum of a contiguous vector: torch's cascade of 8-lane partial sums, four at a time
//     (aten's vectorized_inner_sum and multi_row_sum), the tail first, then the lanes.
float fused_square_add(float x, float acc) {
  return std::fma(x, x, acc);
}

float norm_contiguous(const float* x, std::int64_t n) {
  float lanes[8] = {};
  std::int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    for (int j = 0; j < 8; ++j) lanes[j] = fused_square_add(x[d + j], lanes[j]);
  }
  float sum = lanes[0];
  for (int j = 1; j < 8; ++j) sum += lanes[j];
  const std::int64_t rounded_until = d + (n - d) / 4 * 4;
  for (; d < rounded_until; ++d) {
    const float square = x[d] * x[d];
    sum += square;
  }
  for (; d < n; ++d) sum = fused_square_add(x[d], sum);
  return std::sqrt(sum);
}

float norm_strided(const float* x, std::int64_t n, std::int64_t stride) {
  float sum = 0;
  for (std::int64_t k = 0; k < n; ++k) sum = fused_square_add(x[k * stride], sum);
  return std::sqrt(sum);
}

float sum_contiguous(const float* x, std::int64_t n) {
  using Lanes = std::array<float, 8>;
  auto add = [](Lanes& into, const Lanes& more) {
    for (int l = 0; l < 8; ++l) into[l] += more[l];
  };
  auto vec = [&](std::int64_t v) {
    Lanes out;
    std::copy(x + 8 * v, x + 8 * v + 8, out.begin());
    return out;
  };
  const std::int64_t vectors = n / 8, groups = vectors / 4;
  // multi_row_sum: four rows of vectors, partial sums in levels of 2^level_power groups.
  constexpr int kLevels = 4;
  std::int64_t ceil_log2 = 0;
  while ((std::int64_t{1} << ceil_log2) < groups) ++ceil_log2;
  const std::int64_t level_power = std::max<std::int64_t>(4, ceil_log2 / kLevels);
  const std::int64_t level_step = std::int64_t{1} << level_power, level_mask = level_step - 1;
  std::array<std::array<Lanes, 4>, kLevels> acc{};
  std::int64_t i = 0;
  while (i + level_step <= groups) {
    for (std::int64_t j = 0; j < level_step; ++j, ++i) {
      for (int k = 0; k < 4; ++k) add(acc[0][k], vec(4 * i + k));
    }
    for (int j = 1; j < kLevels; ++j) {
      for (int k = 0; k < 4; ++k) {
        add(acc[j][k], acc[j - 1][k]);
        acc[j - 1][k] = Lanes{};
      }
      if ((i & (level_mask << (j * level_power))) != 0) break;
    }
  }
  for (; i < groups; ++i) {
    for (int k = 0; k < 4; ++k) add(acc[0][k], vec(4 * i + k));
  }
  for (int j = 1; j < kLevels; ++j) {
    for (int k = 0; k < 4; ++k) add(acc[0][k], acc[j][k]);
  }
  Lanes total = acc[0][0];
  for (std::int64_t v = groups * 4; v < vectors; ++v) add(total, vec(v));
  for (int k = 1; k < 4; ++k) add(total, acc[0][k]);
  float sum = 0;
  for (std::int64_t k = vectors * 8; k < n; ++k) sum += x[k];
  for (int l = 0; l < 8; ++l) sum += total[l];
  return sum;
}

// Gram-Schmidt on the r columns of a rows x r row-major matrix, as torch's
// _orthogonalize_gram_schmidt: each column divided by its norm (plus epsilon), then its part
// taken out of every later column (the dot products rounded, then summed as torch sums them).
void orthogonalize(float* a, std::int64_t rows, std::int64_t r, float epsilon) {
  std::vector<float> products(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < r; ++i) {
    const float norm = (r == 1 ? norm_contiguous(a, rows) : norm_strided(a + i, rows, r)) + epsilon;
    for (std::int64_t k = 0; k < rows; ++k) a[k * r + i] /= norm;
    for (std::int64_t j = i + 1; j < r; ++j) {
      for (std::int64_t k = 0; k < rows; ++k) products[k] = a[k * r + i] * a[k * r + j];
      const float dot = sum_contiguous(products.data(), rows);
      for (std::int64_t k = 0; k < rows; ++k) {
        const float part = dot * a[k * r + i];
        a[k * r + j] -= part;
      }
    }
  }
}

// out (rows x r) = A (rows x inner) B (inner x r), or A^T B when `transpose_a` (A then inner x
// rows). Sums in float32 in order of the inner index, as torch's bmm does for small matrices.
void matmul(const float* a, const float* b, float* out, std::int64_t rows, std::int64_t inner,
            std::int64_t r, bool transpose_a) {
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < r; ++j) {
      float sum = 0;
      for (std::int64_t k = 0; k < inner; ++k) {
        sum += (transpose_a ? a[k * rows + i] : a[i * inner + k]) * b[k * r + j];
      }
      out[i * r + j] = sum;
    }
  }
}

// Everything the steps after the first collective need, shared by them.
struct PowerSgdStep {
  PowerSGDState* state;
  ProcessGroup* group;
  Tensor* buffer;  // the bucket's, on its device
  std::size_t bucket;
  bool is_last;
  std::vector<float> input;  // the buffer (with the error added), on the host
  std::vector<float> sent;   // input as it was before compression, for the error
  std::vector<Compressed> compressed;
  std::vector<std::pair<std::int64_t, std::int64_t>> uncompressed;  // (offset, numel)
  Tensor uncompressed_values;  // what the first collective all_reduces
};

}  // namespace

CommFuture powerSGD_hook(PowerSGDState& state, GradBucket& bucket) {
  ProcessGroup& group =
      state.options_.process_group != nullptr ? *state.options_.process_group : default_group();
  if (state.iter_ < state.options_.start_powerSGD_iter) {
    state.maybe_increase_iter(bucket);
    return allreduce_hook(group, bucket);
  }
  const PowerSGDOptions& o = state.options_;
  Tensor& buffer = bucket.buffer();
  const Device device = buffer.device();
  const std::size_t index = bucket.index();
  const std::int64_t total = buffer.numel();

  auto step = std::make_shared<PowerSgdStep>();
  step->state = &state;
  step->group = &group;
  step->buffer = &buffer;
  step->bucket = index;
  step->is_last = bucket.is_last();
  step->input = buffer.to_vector<float>();
  if (o.use_error_feedback) {
    auto [it, made] = state.error_.try_emplace(index, Tensor(total, kFloat32));
    if (!made) {
      const std::vector<float> error = it->second.to_vector<float>();
      for (std::int64_t i = 0; i < total; ++i) step->input[i] += error[i];
    }
    step->sent = step->input;
  }

  // Which gradients to compress, and the shapes of their P and Q. torch groups the matrices by
  // shape, in the order each shape first appears, and lays P and Q out in that order.
  std::vector<Compressed> by_order;
  std::int64_t p_size = 0, q_size = 0;
  for (std::size_t k = 0; k < bucket.parameters().size(); ++k) {
    const Parameter* p = bucket.parameters()[k];
    const std::int64_t numel = p->data.numel();
    const std::vector<std::int64_t> sizes = p->sizes();
    std::int64_t product = 1;
    for (const std::int64_t size : sizes) product *= size;
    if (product != numel) {
      throw ConfigError("powerSGD_hook: parameter '" + p->name + "' has " + std::to_string(numel) +
                        " values but its shape holds " + std::to_string(product) +
                        ": set Parameter::shape to its sizes, or leave it empty");
    }
    const std::int64_t n = sizes.front();
    const std::int64_t m = n > 0 ? numel / n : 0;
    const std::int64_t r = std::min<std::int64_t>({n, m, o.matrix_approximation_rank});
    state.numel_before_ += n * m;
    if (static_cast<double>((n + m) * r) * o.min_compression_rate < static_cast<double>(n * m)) {
      by_order.push_back({bucket.offsets()[k], n, m, r, 0, 0});
      state.numel_after_ += (n + m) * r;
    } else {
      step->uncompressed.emplace_back(bucket.offsets()[k], numel);
      state.numel_after_ += n * m;
    }
  }
  std::vector<bool> taken(by_order.size(), false);
  for (std::size_t a = 0; a < by_order.size(); ++a) {
    if (taken[a]) continue;
    for (std::size_t b = a; b < by_order.size(); ++b) {
      if (taken[b] || by_order[b].n != by_order[a].n || by_order[b].m != by_order[a].m) continue;
      taken[b] = true;
      Compressed c = by_order[b];
      c.p_at = p_size;
      c.q_at = q_size;
      p_size += c.n * c.r;
      q_size += c.m * c.r;
      step->compressed.push_back(c);
    }
  }

  std::vector<float> uncompressed;
  for (const auto& [offset, numel] : step->uncompressed) {
    uncompressed.insert(uncompressed.end(), step->input.begin() + offset,
                        step->input.begin() + offset + numel);
  }

  // Q: last step's (warm start), orthogonalized again, or drawn afresh.
  const auto epsilon = static_cast<float>(o.orthogonalization_epsilon);
  const bool draw = !o.warm_start || !state.p_memory_.contains(index);
  std::vector<float> q(static_cast<std::size_t>(q_size));
  if (draw) {
    // torch: with torch.random.fork_rng(): torch.manual_seed(rng.randint(1_000_000_000)), then
    // one torch.randn per matrix; the program's own generator is left as it was.
    Generator generator(static_cast<std::uint64_t>(state.rng_.randint(1'000'000'000)));
    for (const Compressed& c : step->compressed) {
      const std::vector<float> drawn = randn(c.m * c.r, generator).to_vector<float>();
      std::copy(drawn.begin(), drawn.end(), q.begin() + c.q_at);
    }
  } else {
    q = state.q_memory_.at(index).to_vector<float>();
  }
  for (const Compressed& c : step->compressed) orthogonalize(q.data() + c.q_at, c.m, c.r, epsilon);
  std::vector<float> p(static_cast<std::size_t>(p_size));
  for (const Compressed& c : step->compressed) {
    matmul(step->input.data() + c.offset, q.data() + c.q_at, p.data() + c.p_at, c.n, c.m, c.r,
           false);
  }
  state.p_memory_[index] = Tensor::from(p, device);
  state.q_memory_[index] = Tensor::from(q, device);

  // Three collectives, each needing the one before: the uncompressed values (started now), P,
  // then Q (started by the steps, when DDP waits for this bucket).
  step->uncompressed_values = Tensor::from(uncompressed, device);
  Work first = group.all_reduce(step->uncompressed_values, ReduceOp::SUM, {.async_op = true});
  return CommFuture(std::move(first))
      .then([step] {
        const int world = step->group->size();
        const std::vector<float> sums = step->uncompressed_values.to_vector<float>();
        std::size_t at = 0;
        for (const auto& [offset, numel] : step->uncompressed) {
          for (std::int64_t i = 0; i < numel; ++i) {
            step->input[offset + i] = sums[at++] / static_cast<float>(world);
          }
        }
        return step->group->all_reduce(step->state->p_memory_.at(step->bucket), ReduceOp::SUM,
                                       {.async_op = true});
      })
      .then([step, epsilon] {
        PowerSGDState& s = *step->state;
        std::vector<float> p_sum = s.p_memory_.at(step->bucket).to_vector<float>();
        std::vector<float> q_new(static_cast<std::size_t>(s.q_memory_.at(step->bucket).numel()));
        for (const Compressed& c : step->compressed) {
          orthogonalize(p_sum.data() + c.p_at, c.n, c.r, epsilon);
          matmul(step->input.data() + c.offset, p_sum.data() + c.p_at, q_new.data() + c.q_at, c.m,
                 c.n, c.r, true);
        }
        s.p_memory_[step->bucket] = Tensor::from(p_sum, step->buffer->device());
        s.q_memory_[step->bucket] = Tensor::from(q_new, step->buffer->device());
        return step->group->all_reduce(s.q_memory_.at(step->bucket), ReduceOp::SUM,
                                       {.async_op = true});
      })
      .then([step] {
        PowerSGDState& s = *step->state;
        const int world = step->group->size();
        Tensor& q_tensor = s.q_memory_.at(step->bucket);
        q_tensor /= world;
        const std::vector<float> q_avg = q_tensor.to_vector<float>();
        const std::vector<float> p_all = s.p_memory_.at(step->bucket).to_vector<float>();
        for (const Compressed& c : step->compressed) {  // M = P Q^T
          for (std::int64_t i = 0; i < c.n; ++i) {
            for (std::int64_t j = 0; j < c.m; ++j) {
              float sum = 0;
              for (std::int64_t k = 0; k < c.r; ++k) {
                sum += p_all[c.p_at + i * c.r + k] * q_avg[c.q_at + j * c.r + k];
              }
              step->input[c.offset + i * c.m + j] = sum;
            }
          }
        }
        step->buffer->copy_(Tensor::from(step->input, step->buffer->device()));
        if (s.options_.use_error_feedback) {
          std::vector<float> error(step->input.size());
          for (std::size_t i = 0; i < error.size(); ++i) error[i] = step->sent[i] - step->input[i];
          s.error_[step->bucket] = Tensor::from(error, step->buffer->device());
        }
        if (!s.options_.warm_start) {
          s.p_memory_.clear();
          s.q_memory_.clear();
        }
        if (step->is_last) ++s.iter_;
        return Work();
      });
}

}  // namespace dist
