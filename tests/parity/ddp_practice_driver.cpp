// The C++ half of tests/parity/ddp_practice_parity.py: dist::DistributedDataParallel with unused
// parameters and with dist::Join, on the data of practice_data.py (repeated below, value for
// value), printing what the torch scripts print (ddp_unused.py, ddp_join.py).
//
//   ddprun --standalone --nproc-per-node 2 ddp_practice_driver train finish
//   ddprun --standalone --nproc-per-node 2 ddp_practice_driver error
//   ddprun --standalone --nproc-per-node 3 ddp_practice_driver join 7 4 2
//
// train: the three heads, find_unused_parameters; "mark" says after the forward which heads it
// left out (mark_unused), "finish" lets finish_gradient_sync() find them, "static" trains heads
// a and b on every step with static_graph (c never: found at the first step), "stale" is one
// step on grads that zero_grad() did not clear (see stale()), "view" is "finish" with
// gradient_as_bucket_view. error: head b never used, find_unused_parameters false: the second
// step throws, printed between markers. join: head a only, rank r trains on the r-th count of
// batches inside a dist::Join.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "dist/check.h"
#include "dist/ddp.h"
#include "dist/init.h"
#include "dist/join.h"
#include "dist/nn.h"
#include "dist/optim.h"
#include "dist/run_main.h"

namespace {

constexpr int kIn = 3, kRows = 4, kSteps = 6;
constexpr double kLr = 0.1;

struct Batch {
  std::vector<float> x, y;
};

// practice_data.batch: every value a multiple of 1/8, exact in float32.
Batch batch(int step, int rank) {
  Batch b;
  for (int i = 0; i < kRows; ++i) {
    for (int j = 0; j < kIn; ++j) {
      b.x.push_back(static_cast<float>(((step * 7 + rank * 5 + i * 3 + j * 2) % 11 - 5) / 8.0));
    }
    b.y.push_back(static_cast<float>(((step + rank * 3 + i) % 5 - 2) / 4.0));
  }
  return b;
}

struct Head {
  Head(const char* name, dist::LinearInit init) : linear(kIn, 1, init) {
    for (dist::Parameter* p : linear.parameters()) p->name = std::string(name) + "." + p->name;
  }
  dist::Linear linear;
};

struct Heads {
  Head a{"a", {{0.25f, -0.5f, 0.125f}, {0.0625f}}};
  Head b{"b", {{-0.25f, 0.375f, 0.5f}, {-0.125f}}};
  Head c{"c", {{0.5f, 0.25f, -0.375f}, {0.25f}}};
  std::vector<Head*> all() { return {&a, &b, &c}; }
  std::vector<dist::Parameter*> parameters() {
    std::vector<dist::Parameter*> out;
    for (Head* h : all()) {
      for (dist::Parameter* p : h->linear.parameters()) out.push_back(p);
    }
    return out;
  }
};

std::string bits(const dist::Tensor& t) {
  std::string out;
  for (float v : t.to_vector<float>()) {
    std::uint32_t u = 0;
    std::memcpy(&u, &v, sizeof u);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", u);
    out += (out.empty() ? "" : " ") + std::string(hex);
  }
  return out;
}

void print(const char* what, const std::vector<dist::Parameter*>& params, int rank, bool grads) {
  for (const dist::Parameter* p : params) {
    std::cout << what << " " << p->name << " " << rank << " " << bits(grads ? p->grad : p->data)
              << "\n";
  }
  std::cout.flush();
}

// One step through the heads `used` names ("a", "ab", "ac", "abc"): forward, loss, backward.
std::vector<dist::Parameter*> step_through(Heads& heads, const std::string& used, const Batch& b,
                                           std::vector<dist::Parameter*>& unused) {
  const dist::Tensor x = dist::Tensor::from(b.x), y = dist::Tensor::from(b.y);
  std::vector<Head*> through;
  for (Head* h : heads.all()) {
    const bool uses = used.find(h->linear.parameters()[0]->name[0]) != std::string::npos;
    for (dist::Parameter* p : h->linear.parameters()) {
      if (!uses) unused.push_back(p);
    }
    if (uses) through.push_back(h);
  }
  dist::Tensor out = through[0]->linear.forward(x);
  for (std::size_t i = 1; i < through.size(); ++i) out += through[i]->linear.forward(x);
  const dist::MseLoss loss = dist::mse_loss(out, y);
  std::vector<dist::Parameter*> ready;
  for (auto it = through.rbegin(); it != through.rend(); ++it) {
    (*it)->linear.backward(loss.grad);
    for (dist::Parameter* p : (*it)->linear.parameters()) ready.push_back(p);
  }
  return ready;
}

std::string heads_of(int step, int rank) {  // practice_data.heads
  return std::string("a") + ((step + rank) % 2 == 1 ? "b" : "") + (step % 3 == 0 ? "c" : "");
}

int train(const std::string& how, int rank) {
  Heads heads;
  const bool is_static = how == "static";
  dist::DistributedDataParallel ddp(heads.parameters(), {.find_unused_parameters = !is_static,
                                                         .static_graph = is_static,
                                                         .gradient_as_bucket_view = how == "view"});
  dist::SGD optimizer(heads.parameters(), kLr);
  for (int step = 0; step < kSteps; ++step) {
    optimizer.zero_grad();
    std::vector<dist::Parameter*> unused;
    const std::string used = is_static ? "ab" : heads_of(step, rank);
    const Batch b = batch(step, rank);
    if (how == "mark") {  // the forward's unused heads are known before backward
      const dist::Tensor x = dist::Tensor::from(b.x);
      for (Head* h : heads.all()) {
        if (used.find(h->linear.parameters()[0]->name[0]) == std::string::npos) {
          for (dist::Parameter* p : h->linear.parameters()) unused.push_back(p);
        }
      }
      ddp.mark_unused(unused);
      unused.clear();
    }
    ddp.grads_ready(step_through(heads, used, b, unused));
    ddp.finish_gradient_sync();
    if (step == 1) print("grad", heads.parameters(), rank, true);
    optimizer.step();
  }
  print("param", heads.parameters(), rank, false);
  return dist::kExitOk;
}

// ddp_unused.py stale: one step without zero_grad(), every grad holding 100 + rank (c.bias's 0,
// where torch's is None); rank 1 uses heads a and b, the others a.
int stale(int rank) {
  Heads heads;
  dist::DistributedDataParallel ddp(heads.parameters(), {.find_unused_parameters = true});
  for (dist::Parameter* p : heads.parameters()) p->grad.fill_(p->name == "c.bias" ? 0 : 100 + rank);
  std::vector<dist::Parameter*> unused;
  ddp.grads_ready(step_through(heads, rank == 1 ? "ab" : "a", batch(0, rank), unused));
  ddp.finish_gradient_sync();
  print("grad", heads.parameters(), rank, true);
  return dist::kExitOk;
}

int error(int rank) {
  Heads heads;
  dist::DistributedDataParallel ddp(heads.parameters());
  const Batch b = batch(0, rank);
  for (int step = 0; step < 2; ++step) {
    std::vector<dist::Parameter*> unused;
    try {
      ddp.grads_ready(step_through(heads, "a", b, unused));
      ddp.finish_gradient_sync();
    } catch (const dist::Error& e) {
      std::cout << "ERROR-BEGIN\n" << e.what() << "\nERROR-END" << std::endl;
      return dist::kExitOk;
    }
  }
  std::cout << "no error" << std::endl;
  return dist::kExitFailure;
}

int join(const std::vector<int>& counts, int rank) {
  Heads heads;
  std::vector<dist::Parameter*> params = heads.a.linear.parameters();
  dist::DistributedDataParallel ddp(params);
  dist::SGD optimizer(params, kLr);
  dist::Join join(ddp);
  for (int step = 0; step < counts.at(static_cast<std::size_t>(rank)); ++step) {
    optimizer.zero_grad();
    std::vector<dist::Parameter*> unused;
    ddp.grads_ready(step_through(heads, "a", batch(step, rank), unused));
    ddp.finish_gradient_sync();
    optimizer.step();
  }
  join.join();
  std::cout << "joined " << rank << " shadowed " << join.shadowed_steps() << " last "
            << join.last_joiner() << "\n";
  print("param", params, rank, false);
  return dist::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  return dist::run_main([&] {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty()) throw dist::ConfigError("ddp_practice_driver: train|error|join ...");
    dist::init_process_group();
    const int rank = dist::get_rank();
    int code = dist::kExitFailure;
    if (args[0] == "train" && args.size() > 1 && args[1] == "stale") {
      code = stale(rank);
    } else if (args[0] == "train") {
      code = train(args.size() > 1 ? args[1] : "finish", rank);
    } else if (args[0] == "error") {
      code = error(rank);
    } else if (args[0] == "join") {
      std::vector<int> counts;
      for (std::size_t i = 1; i < args.size(); ++i) counts.push_back(std::stoi(args[i]));
      if (static_cast<int>(counts.size()) != dist::get_world_size()) {
        throw dist::ConfigError("ddp_practice_driver join: one batch count per rank");
      }
      code = join(counts, rank);
    } else {
      throw dist::ConfigError("ddp_practice_driver: unknown scenario '" + args[0] + "'");
    }
    dist::destroy_process_group();
    return code;
  });
}
