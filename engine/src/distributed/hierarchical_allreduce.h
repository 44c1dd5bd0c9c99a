// SPDX-License-Identifier: Apache-2.0
// HierarchicalAllreduce: the gradient sum of a run whose ranks share machines across several (2 machines x 2
// ranks, say). Each machine's ranks first sum through their own shared-memory segment; one leader per machine (its
// lowest rank) then all-reduces that sum with the other machines' leaders over Gloo; each leader hands the result
// to its machine's ranks through the segment. So the link between machines carries one stream per machine instead
// of one per rank, and the ranks of a machine never meet over TCP. Every rank ends with the same bits: the order of
// the sum is fixed (each machine's ranks in rank order, then Gloo's among the leaders), never timing's.
//
// Chosen by the Communicator when the run has more than one machine and some machine more than one rank (CPU runs;
// SPUR_HIERARCHICAL_ALLREDUCE=0 or AcceleratorOptions::hierarchical_allreduce = false keep the flat Gloo
// all-reduce). Threads: the training thread, as ShmAllreduce.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "distributed/shm_allreduce.h"

namespace spur::detail {

class HierarchicalAllreduce final : public GradientSum {
 public:
  /// `local`: this machine's segment (nullptr when the rank is alone on its machine); `leaders`: the process group
  /// of the machines' leaders (only on a leader; nullptr elsewhere; its timeout bounds the leg between machines);
  /// `world`: the run's ranks.
  HierarchicalAllreduce(std::unique_ptr<ShmAllreduce> local, c10::intrusive_ptr<c10d::ProcessGroup> leaders, int world);

  void allreduce(at::Tensor& tensor) override;
  int world_size() const override { return world_; }
  /// The machine's sum now; on a leader, the sum among the leaders in the background (Gloo's thread).
  c10::intrusive_ptr<c10::ivalue::Future> start(at::Tensor& tensor) override;
  /// The leader's result to its machine's ranks.
  void finish(at::Tensor& tensor) override;
  /// As ShmAllreduce's: this rank leaves on purpose, or is back.
  void mark_left();
  void mark_present();

 private:
  std::unique_ptr<ShmAllreduce> local_;
  c10::intrusive_ptr<c10d::ProcessGroup> leaders_;
  int world_;
};

}  // namespace spur::detail
