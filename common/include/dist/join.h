// dist/join.h — Join: training on when ranks have different numbers of batches.
//
//   dist::DistributedDataParallel ddp(model.parameters());
//   dist::Join join(ddp);                  // torch: `with Join([ddp]):`
//   for (batch : my_batches) {             // 5 batches on rank 0, 3 on rank 1
//     ... forward, backward, ddp.average_gradients(), optimizer.step() ...
//   }
//   join.join();                           // this rank is out of batches: shadow the others
//
// Without it, a rank that runs out of batches stops calling the gradients' all_reduce while the
// others still call it: they wait until the group's timeout, and the error names that all_reduce
// (chapter 10). Inside a Join, every step of a rank that still trains begins with one small
// all_reduce, the count of ranks still training. A rank that has called join() answers it with
// 0 and, while the count is not 0, makes the step's other calls with zeros: each bucket's
// all_reduce, or the communication hook's calls on a bucket of zeros (dist/comm_hooks.h, as
// torch's join hook runs the hook), and, with find_unused_parameters, the used-parameter map. The
// ranks still training still divide by the initial world size, so a joined rank's zeros count in
// the average: torch's default, divide_by_initial_world_size=True. When the count is 0, every rank
// has joined; the model of the last rank to join (the highest rank among those that joined last) is
// broadcast to all, so the replicas end equal, as torch's post-hook does.
//
// What torch does the same way (1.13, torch/distributed/algorithms/join.py and DDP's
// _DDPJoinHook): the count, the zeros, the divisor, the final broadcast. What differs: torch
// counts every forward through DDP (and sends a second count, whether backward will sync), this
// library every step that averages gradients (a step inside no_sync() sends nothing, on any rank);
// torch's joined ranks also shadow the buffers' broadcast, which this Join refuses (a DDP with
// broadcast_buffers and buffers is a dist::ConfigError); torch takes a list of Joinables (a
// module that is not one raises), this Join one DistributedDataParallel, so wrapping anything
// else does not compile. throw_on_early_termination is not offered.
//
// Taught in: chapter 13 (DDP in practice).
// Built in: common/src/parallel/join.cpp.
#pragma once

#include "dist/ddp.h"

namespace dist {

class Join {
 public:
  // Enters the context: from the next step on, every step of `ddp` tells the other ranks that
  // this rank still trains. Every rank must enter it before the same step. Throws
  // dist::ConfigError for a DDP that broadcasts buffers, or one already in a Join.
  explicit Join(DistributedDataParallel& ddp);
  // Leaves the context. If join() was not called (an exception, or a missing call) nothing is
  // sent: the ranks still training then stop at the group's timeout.
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank has no more batches: a collective with the others' steps, as described above.
  // Returns once every rank has joined and the final model has been broadcast. Call it between
  // steps, once.
  void join();
  // Whether this rank was among the last to join (torch's is_last_joiner); valid after join().
  bool last_joiner() const { return last_joiner_; }
  // How many steps this rank shadowed with zeros in join().
  int shadowed_steps() const { return shadowed_; }

 private:
  DistributedDataParallel* ddp_;
  bool joined_ = false;
  bool last_joiner_ = true;
  int shadowed_ = 0;
};

}  // namespace dist
