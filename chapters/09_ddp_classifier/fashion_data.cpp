// Chapter 09's data set and initial weights (see fashion_data.h).
#include "fashion_data.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace ch09 {
namespace {

const std::string kSource = "/usr/share/datasets/fashion-mnist";

std::vector<unsigned char> read_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) {
    throw dist::ConfigError(path +
                            " cannot be read: this chapter's data set comes from Debian's "
                            "dataset-fashion-mnist package (sudo apt-get install "
                            "dataset-fashion-mnist)");
  }
  std::vector<unsigned char> bytes;
  unsigned char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(f, chunk, sizeof chunk)) > 0) bytes.insert(bytes.end(), chunk, chunk + n);
  gzclose(f);
  if (n < 0) throw dist::Error(path + " is not a readable gzip file: reinstall the package");
  return bytes;
}

std::uint32_t big_endian(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}

// The first `count` images of an IDX pair (magic 2051 for images, 2049 for labels), each 28x28
// picture shrunk to 14x14 by averaging 2x2 blocks, scaled to [0, 1].
Images read_idx(const std::string& prefix, std::int64_t count) {
  const std::vector<unsigned char> img = read_gzip(prefix + "-images-idx3-ubyte.gz");
  const std::vector<unsigned char> lab = read_gzip(prefix + "-labels-idx1-ubyte.gz");
  if (img.size() < 16 || big_endian(&img[0]) != 2051 || big_endian(&img[8]) != 28 ||
      big_endian(&img[12]) != 28 || lab.size() < 8 || big_endian(&lab[0]) != 2049) {
    throw dist::Error(prefix + "-*-ubyte.gz are not the IDX files of 28x28 images expected");
  }
  const std::int64_t available = std::min(big_endian(&img[4]), big_endian(&lab[4]));
  if (count > available) {
    throw dist::ConfigError(prefix + " has " + std::to_string(available) + " images, fewer than " +
                            "the " + std::to_string(count) + " asked for");
  }
  Images out;
  for (std::int64_t i = 0; i < count; ++i) {
    const unsigned char* picture = &img[16 + static_cast<std::size_t>(i) * 28 * 28];
    for (std::int64_t r = 0; r < kSide; ++r) {
      for (std::int64_t c = 0; c < kSide; ++c) {
        const int sum = picture[2 * r * 28 + 2 * c] + picture[2 * r * 28 + 2 * c + 1] +
                        picture[(2 * r + 1) * 28 + 2 * c] + picture[(2 * r + 1) * 28 + 2 * c + 1];
        out.pixels.push_back(static_cast<float>(sum) / (4 * 255.0f));
      }
    }
    out.labels.push_back(lab[8 + static_cast<std::size_t>(i)]);
  }
  return out;
}

}  // namespace

std::string prepared_path(const std::string& data_dir, std::int64_t train, std::int64_t test) {
  return data_dir + "/fashion-mnist-14x14-" + std::to_string(train) + "-" + std::to_string(test) +
         ".bin";
}

void prepare(const std::string& path, std::int64_t train, std::int64_t test) {
  const Images a = read_idx(kSource + "/train", train), b = read_idx(kSource + "/t10k", test);
  std::string bytes = "FMNIST14";
  append(bytes, std::vector<std::int64_t>{train, test});
  append(bytes, a.pixels);
  append(bytes, a.labels);
  append(bytes, b.pixels);
  append(bytes, b.labels);
  dist::write_file_atomically(path, bytes);
  dist::write_stderr("[rank " + std::to_string(dist::get_rank()) + "/" +
                     std::to_string(dist::get_world_size()) + "] prepared " + path + "\n");
}

std::pair<Images, Images> load(const std::string& path, std::int64_t train, std::int64_t test) {
  const std::string remade = "delete it, and it is made again";
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  std::vector<std::int64_t> sizes(2);
  if (!in.read(magic, 8) || std::memcmp(magic, "FMNIST14", 8) != 0) {
    throw dist::Error(path + " is not a prepared data file: " + remade);
  }
  take(in, sizes, path, remade);
  if (sizes[0] != train || sizes[1] != test) throw dist::Error(path + " holds other sizes");
  std::pair<Images, Images> sets;
  for (auto [set, n] : {std::pair{&sets.first, train}, std::pair{&sets.second, test}}) {
    set->pixels.resize(static_cast<std::size_t>(n * kPixels));
    set->labels.resize(static_cast<std::size_t>(n));
    take(in, set->pixels, path, remade);
    take(in, set->labels, path, remade);
  }
  return sets;
}

dist::LinearInit uniform_init(std::int64_t in, std::int64_t out, dist::Generator& g) {
  const double bound = 1 / std::sqrt(static_cast<double>(in));
  const auto draws = [&](std::int64_t n) {
    std::vector<float> values;
    for (std::int64_t k : dist::randint(0, 1 << 24, n, g).to_vector<std::int64_t>()) {
      values.push_back(static_cast<float>((static_cast<double>(k) / (1 << 24) * 2 - 1) * bound));
    }
    return values;
  };
  dist::LinearInit init;
  init.weight = draws(in * out);
  init.bias = draws(out);
  return init;
}

std::pair<dist::Tensor, dist::Tensor> batch_tensors(const Images& set, const Indices& batch,
                                                    dist::Device device, dist::Generator* flips) {
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i : batch) {
    const bool mirror = flips != nullptr && flips->random() % 2 == 1;
    for (std::int64_t r = 0; r < kSide; ++r) {
      for (std::int64_t c = 0; c < kSide; ++c) {
        x.push_back(set.pixels[i * kPixels + r * kSide + (mirror ? kSide - 1 - c : c)]);
      }
    }
    y.push_back(set.labels[i]);
  }
  return {dist::Tensor::from(x, device), dist::Tensor::from(y, device)};
}

std::string fixed4(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", value);
  return text;
}

std::string percent(std::int64_t part, std::int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * static_cast<double>(part) / whole);
  return text;
}

}  // namespace ch09
