// dist::DeviceMesh (dist/device_mesh.h): the row-major grid of ranks and one new_group per
// dimension and row of it.
#include "dist/device_mesh.h"

#include <functional>
#include <utility>

#include "dist/check.h"
#include "dist/init.h"

namespace dist {
namespace {

std::string names(const std::vector<MeshDim>& dims) {
  std::string out;
  for (const MeshDim& d : dims) out += (out.empty() ? "" : ", ") + d.name;
  return out;
}

std::string shape(const std::vector<MeshDim>& dims) {
  std::string out;
  for (const MeshDim& d : dims)
    out += (out.empty() ? "" : ", ") + d.name + " = " + std::to_string(d.size);
  return out;
}

// The row-major strides: the last dimension varies fastest.
std::vector<int> strides_of(const std::vector<MeshDim>& dims) {
  std::vector<int> strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i].size;
  return strides;
}

void check_dims(const std::vector<MeshDim>& dims, int world_size) {
  if (dims.empty()) throw ConfigError("a DeviceMesh needs at least one dimension");
  long long product = 1;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const MeshDim& d = dims[i];
    if (d.name.empty())
      throw ConfigError("DeviceMesh dimension " + std::to_string(i) +
                        " has no name: name each one (\"dp\", \"tp\")");
    for (std::size_t j = 0; j < i; ++j) {
      if (dims[j].name == d.name)
        throw ConfigError("DeviceMesh dimension name \"" + d.name +
                          "\" is used twice: each dimension needs a name of its own");
    }
    if (d.size < 1)
      throw ConfigError("DeviceMesh dimension " + d.name + " has size " + std::to_string(d.size) +
                        ": a size must be at least 1");
    // Past 2^31 the product is too large for any world anyway: stop multiplying, so that absurd
    // sizes cannot overflow it.
    if (product <= (1LL << 31)) product *= d.size;
  }
  if (product != world_size) {
    const std::string holds = product > (1LL << 31) ? "more than 2^31" : std::to_string(product);
    throw ConfigError("a DeviceMesh of " + shape(dims) + " holds " + holds +
                      " ranks, but the world has " + std::to_string(world_size) +
                      ": the sizes must multiply to the world size (run " + holds +
                      " ranks, or change the sizes)");
  }
}

}  // namespace

DeviceMesh::DeviceMesh(std::vector<MeshDim> dims) : dims_(std::move(dims)) {
  const int world = get_world_size();
  check_dims(dims_, world);
  const int me = get_rank();
  const std::vector<int> strides = strides_of(dims_);
  coords_.resize(dims_.size());
  for (std::size_t i = 0; i < dims_.size(); ++i) coords_[i] = me / strides[i] % dims_[i].size;

  // For each dimension, every line of the grid along it, in the order of the ranks where the lines
  // start: the same calls, in the same order, on every rank.
  groups_.resize(dims_.size());
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    for (int start = 0; start < world; ++start) {
      if (start / strides[d] % dims_[d].size != 0) continue;  // not the first rank of its line
      std::vector<int> line;
      for (int k = 0; k < dims_[d].size; ++k) line.push_back(start + k * strides[d]);
      std::unique_ptr<ProcessGroup> group = new_group(line);
      if (group->is_member()) groups_[d] = std::move(group);
    }
  }
}

DeviceMesh::DeviceMesh(DeviceMesh&&) noexcept = default;
DeviceMesh& DeviceMesh::operator=(DeviceMesh&&) noexcept = default;
DeviceMesh::~DeviceMesh() = default;

int DeviceMesh::index_of(const std::string& dim) const {
  for (std::size_t i = 0; i < dims_.size(); ++i)
    if (dims_[i].name == dim) return static_cast<int>(i);
  throw ConfigError("this DeviceMesh has no dimension \"" + dim + "\"; its dimensions are " +
                    names(dims_));
}

int DeviceMesh::size(const std::string& dim) const {
  return dims_[static_cast<std::size_t>(index_of(dim))].size;
}

int DeviceMesh::size() const {
  int n = 1;
  for (const MeshDim& d : dims_) n *= d.size;
  return n;
}

ProcessGroup& DeviceMesh::group(const std::string& dim) {
  return *groups_[static_cast<std::size_t>(index_of(dim))];
}

int DeviceMesh::coordinate(const std::string& dim) const {
  return coords_[static_cast<std::size_t>(index_of(dim))];
}

int DeviceMesh::rank_at(const std::vector<int>& coords) const {
  if (coords.size() != dims_.size()) {
    throw ConfigError("rank_at needs " + std::to_string(dims_.size()) + " coordinates (" +
                      names(dims_) + "), got " + std::to_string(coords.size()));
  }
  const std::vector<int> strides = strides_of(dims_);
  int rank = 0;
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (coords[i] < 0 || coords[i] >= dims_[i].size) {
      throw ConfigError("coordinate " + std::to_string(coords[i]) + " is outside dimension " +
                        dims_[i].name + " of size " + std::to_string(dims_[i].size));
    }
    rank += coords[i] * strides[i];
  }
  return rank;
}

std::string DeviceMesh::str() const {
  // Nested lists, row-major: "[[0, 1], [2, 3]]".
  const std::function<std::string(std::size_t, int)> nest = [&](std::size_t d, int base) {
    const std::vector<int> strides = strides_of(dims_);
    std::string out = "[";
    for (int k = 0; k < dims_[d].size; ++k) {
      if (k > 0) out += ", ";
      const int at = base + k * strides[d];
      out += d + 1 == dims_.size() ? std::to_string(at) : nest(d + 1, at);
    }
    return out + "]";
  };
  return nest(0, 0) + " (" + names(dims_) + ")";
}

DeviceMesh init_device_mesh(std::vector<MeshDim> dims) {
  return DeviceMesh(std::move(dims));
}

}  // namespace dist
