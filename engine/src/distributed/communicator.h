// SPDX-License-Identifier: Apache-2.0
// Communicator: this process's membership of the run's process group (rendezvous store plus Gloo or NCCL), and
// the blocking collectives the engine builds on. Internal; one per process, shared by every Accelerator.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/types.h>

#include <spur/state.h>

#include "distributed/hierarchical_allreduce.h"
#include "distributed/shm_allreduce.h"

namespace spur::detail {

class Communicator {
 public:
  /// A collective in flight (c10d::Work from LibTorch 2.0, c10d::ProcessGroup::Work before).
  using WorkPtr = decltype(std::declval<c10d::ProcessGroup&>().barrier());

  struct Config {
    ProcessState state;
    torch::Device device{torch::kCPU};
    std::chrono::seconds rendezvous_timeout{300};
    std::chrono::seconds collective_timeout{1800};
    int gloo_channels = 2;
    /// Gloo runs whose ranks are all on this machine sum DDP's gradients through shared memory.
    bool shared_memory_allreduce = true;
    /// Gloo runs whose ranks share machines across several sum them hierarchically (hierarchical_allreduce.h).
    bool hierarchical_allreduce = true;
  };

  /// Rendezvous and process-group creation. The first call in a process joins; later calls return the same
  /// Communicator, which lives until the process exits.
  static std::shared_ptr<Communicator> join(const Config& config);
  /// The process's Communicator once an Accelerator joined the group, else nullptr (the logger's in_order).
  static std::shared_ptr<Communicator> current();

  int rank() const { return rank_; }
  int size() const { return size_; }
  torch::Device device() const { return device_; }
  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }
  /// The shared-memory all-reduce for gradients, when every rank is on this machine (Gloo runs); else nullptr.
  ShmAllreduce* shared_memory() const { return shm_.get(); }
  /// Why there is none ("the ranks are on several machines", "disabled by SPUR_SHM_ALLREDUCE=0"...).
  const std::string& shared_memory_note() const { return shm_note_; }
  /// The hierarchical sum, when the ranks share machines across several (Gloo runs); else nullptr.
  const HierarchicalAllreduce* hierarchical() const { return hier_.get(); }
  /// The gradient buckets' sum where it does not go through the process group: shared memory, or hierarchical;
  /// nullptr: the process group's all-reduce.
  GradientSum* gradient_sum() const { return shm_ ? static_cast<GradientSum*>(shm_.get()) : hier_.get(); }
  /// "rank 1 of 2 (gloo, store 127.0.0.1:29500)", for error messages.
  std::string describe() const;

  /// Sums `tensor` over ranks, in place.
  void allreduce_(torch::Tensor& tensor);
  /// Every rank's `tensor` (same shape and dtype on every rank), in rank order.
  std::vector<torch::Tensor> allgather(const torch::Tensor& tensor);
  /// `flat` holds size() equal chunks; each rank's own chunk goes to every rank, in place (ZeRO's parameter
  /// all-gather after each rank stepped its shard).
  void allgather_chunks_(torch::Tensor& flat);
  /// Starts summing `tensor` over ranks in place; finish with wait().
  WorkPtr allreduce_async(torch::Tensor& tensor);
  /// Waits for `work`; a failure is rethrown as fail(operation) does.
  void wait(const WorkPtr& work, const char* operation);
  /// Overwrites `tensor` with rank `root`'s (same shape and dtype on every rank).
  void broadcast_(torch::Tensor& tensor, int root);
  void barrier();
  /// Rethrows a failure of `operation` (a collective that a peer's death broke) as a spur::Error naming this rank.
  [[noreturn]] void fail(const std::string& operation, const std::exception& cause) const;
  /// True for errors raised by the transport (a peer gone, a timeout), not by local computation.
  static bool is_communication_error(const std::exception& error);
  /// This rank leaves on purpose (its Accelerator goes without an error): told to the others through the
  /// shared-memory segment and the store, so their failing collectives say that it left (see fail()).
  void mark_left();
  /// A new Accelerator of this process joins again (join() returned the same Communicator): no longer left.
  void mark_present();

  Communicator(const Config& config, c10::intrusive_ptr<c10d::Store> store,
               c10::intrusive_ptr<c10d::ProcessGroup> group);

 private:
  // The gradient sum's shared memory: one segment when every rank is on this machine, else one per machine and
  // the leaders' group (HierarchicalAllreduce) when some machine has several ranks. Every rank calls it.
  void join_shared_memory(const Config& config, const c10::intrusive_ptr<c10d::Store>& store,
                          std::chrono::milliseconds timeout);
  int rank_;
  int size_;
  torch::Device device_;
  std::string endpoint_;
  std::string backend_;
  c10::intrusive_ptr<c10d::Store> store_;
  // A collective failed (fail()): this rank did not leave on purpose, and the store may be out of reach.
  mutable std::atomic<bool> failed_{false};
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::unique_ptr<ShmAllreduce> shm_;
  std::string shm_note_;
  std::unique_ptr<HierarchicalAllreduce> hier_;
};

/// What a collective that waited for a rank which left on purpose says about it: "left ..." and how to stop
/// together (set_trigger / check_trigger).
std::string left_early_explanation();

/// Connects to (rank 0: hosts) the TCPStore at MASTER_ADDR:MASTER_PORT and waits until every rank has checked
/// in. Throws spur::Error naming the host, port, timeout and the ranks that never arrived.
c10::intrusive_ptr<c10d::Store> rendezvous(const ProcessState& state, std::chrono::seconds timeout);

}  // namespace spur::detail
