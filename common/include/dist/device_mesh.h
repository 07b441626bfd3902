// dist/device_mesh.h — the ranks laid out as a grid with named dimensions, and a process group
// along each dimension (torch 2.x's DeviceMesh).
//
//   dist::init_process_group({.backend = "gloo"});                  // 4 ranks
//   dist::DeviceMesh mesh = dist::init_device_mesh({{"dp", 2}, {"tp", 2}});
//   dist::ProcessGroup& tp = mesh.group("tp");   // rank 2: global ranks 2 and 3
//   dist::ProcessGroup& dp = mesh.group("dp");   // rank 2: global ranks 0 and 2
//   int tp_rank = mesh.coordinate("tp");          // rank 2: 0 (its row is [2, 3])
//
// The grid is row-major, as torch's (torch.arange(world_size).view(mesh_shape)): with dimensions
// dp = 2 and tp = 2 the ranks are [[0, 1], [2, 3]], a row is a "tp" group ({0, 1}, {2, 3}) and a
// column a "dp" group ({0, 2}, {1, 3}). The last dimension varies fastest, so put the dimension
// that talks most (tensor parallel) last: its ranks are neighbours, on one machine when each
// machine runs consecutive ranks.
//
// Making a mesh is a collective over the default group: every rank calls it with the same
// dimensions. It makes every group of every dimension with new_group(ranks) (dist/init.h), in
// the same order on every rank, and keeps the one group per dimension that this rank is in.
//
// torch: torch.distributed.device_mesh.init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp",
// "tp")), public from 2.2 on (earlier 2.x releases kept a private DeviceMesh under
// torch.distributed._tensor); get_group("tp"), get_local_rank("tp"), size("tp"),
// get_coordinate(). torch 1.13 has no DeviceMesh: build the
// same groups with new_group(ranks), as chapter 15's twin does. Here the device is the default
// group's (the CPU under Gloo, cuda:LOCAL_RANK under NCCL). torch refuses only a mesh larger than
// the world ("Mesh should not be bigger than default world size ..."); this one also refuses a
// smaller one, which would leave ranks out of every group.
//
// Taught in: chapter 15 (tensor parallel, and DP x TP on a 2 x 2 mesh).
// Built in: common/src/init/device_mesh.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"

namespace dist {

// One dimension of a mesh: its name ("dp", "tp", "pp") and its size.
struct MeshDim {
  std::string name;
  int size = 1;
};

class DeviceMesh {
 public:
  // A collective over the default group: see above. Throws a ConfigError, before any rank
  // connects, when the sizes do not multiply to the world size, a size is below 1, or a name is
  // empty or used twice.
  explicit DeviceMesh(std::vector<MeshDim> dims);
  DeviceMesh(DeviceMesh&&) noexcept;
  DeviceMesh& operator=(DeviceMesh&&) noexcept;
  ~DeviceMesh();

  const std::vector<MeshDim>& dims() const { return dims_; }
  // The size of dimension `dim` (torch: mesh.size(dim)); size() is every rank of the mesh.
  int size(const std::string& dim) const;
  int size() const;
  // The group of this rank along `dim` (torch: mesh.get_group(dim)); its ranks are the mesh's
  // ranks that share every other coordinate with this one.
  ProcessGroup& group(const std::string& dim);
  // This rank's place along `dim`, which is also its rank in group(dim) (torch:
  // mesh.get_local_rank(dim)); coordinates() gives all of them, in the dimensions' order
  // (torch: mesh.get_coordinate()).
  int coordinate(const std::string& dim) const;
  const std::vector<int>& coordinates() const { return coords_; }
  // The global rank at `coords` (torch: mesh.mesh[coords]).
  int rank_at(const std::vector<int>& coords) const;
  // "[[0, 1], [2, 3]] (dp, tp)": the grid, then the names.
  std::string str() const;

 private:
  int index_of(const std::string& dim) const;

  std::vector<MeshDim> dims_;
  std::vector<int> coords_;
  std::vector<std::unique_ptr<ProcessGroup>> groups_;  // one per dimension, this rank's
};

// torch's init_device_mesh(device_type, mesh_shape, mesh_dim_names=...): the same as the
// constructor.
DeviceMesh init_device_mesh(std::vector<MeshDim> dims);

}  // namespace dist
