// Chapter 09's data set: Fashion-MNIST's gzipped IDX files, shrunk to 14x14 and prepared once
// into one file; the initial weights and the batches, drawn as twin.py draws them; how a run's
// loss and accuracy print. Chapter 12 trains on the same data (its CMakeLists.txt compiles
// fashion_data.cpp too).
#pragma once

#include <dist/dist.h>
#include <dist/nn.h>

#include <cstdint>
#include <istream>
#include <string>
#include <utility>
#include <vector>

namespace ch09 {

using Indices = std::vector<std::int64_t>;
constexpr std::int64_t kSide = 14, kPixels = kSide * kSide, kClasses = 10;

// ---- The data: what rank 0 prepares while the others wait

struct Images {
  std::vector<float> pixels;  // size() * kPixels values in [0, 1], row after row
  std::vector<std::int64_t> labels;
  std::int64_t size() const { return static_cast<std::int64_t>(labels.size()); }
};

// Where the prepared file goes: its name holds the sizes, so other sizes make another file.
std::string prepared_path(const std::string& data_dir, std::int64_t train, std::int64_t test);
// Reads the first `train` training and `test` test images of Debian's dataset-fashion-mnist
// (gzip, IDX; magic numbers and sizes checked), shrinks each 28x28 picture to 14x14 (the mean of
// each 2x2 block), and writes both sets to one file with dist::write_file_atomically: written
// whole or not at all, so a rank that reads it never sees half of it. Says so on stderr.
void prepare(const std::string& path, std::int64_t train, std::int64_t test);
// Every rank: the two sets from the prepared file.
std::pair<Images, Images> load(const std::string& path, std::int64_t train, std::int64_t test);

// nn.Linear's default initialisation, uniform in [-1/sqrt(in), 1/sqrt(in)), from torch.randint's
// draws of `g` (as twin.py draws them): the weights first, then the biases.
dist::LinearInit uniform_init(std::int64_t in, std::int64_t out, dist::Generator& g);

// A batch's pixels and labels on `device`. With `flips` (training), each picture is mirrored
// left-right with probability 1/2: a random augmentation, drawn from a per-rank generator.
std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Images& set, const Indices& batch,
                                                    dist::Device device, dist::Generator* flips);

// ---- Printing a run's results

std::string fixed4(double value);                            // "0.8323"
std::string percent(std::int64_t part, std::int64_t whole);  // "81.05%"

// ---- Raw binary files (the prepared data, chapter 09's checkpoints): values as they lie in memory

// Appends the values' bytes to `out`.
template <typename T>
void append(std::string& out, const std::vector<T>& values) {
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// Reads values.size() values; a file that ends first is an error naming it and what to do.
template <typename T>
void take(std::istream& in, std::vector<T>& values, const std::string& path,
          const std::string& what_to_do) {
  if (!in.read(reinterpret_cast<char*>(values.data()),
               static_cast<std::streamsize>(values.size() * sizeof(T)))) {
    throw dist::Error(path + " is shorter than its header says: " + what_to_do);
  }
}

}  // namespace ch09
