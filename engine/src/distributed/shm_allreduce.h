// SPDX-License-Identifier: Apache-2.0
// ShmAllreduce: summing tensors over the ranks of a run that live on this machine, through one shared-memory
// segment instead of Gloo's TCP loopback. Gloo moves 0.4-0.9 GB/s over loopback here, memory 10+ GB/s: the
// gradient all-reduce of DDP's buckets (through a Reducer communication hook) is what it is for. When the run spans
// several machines, each machine's ranks share a segment of their own (the first half and last third of the
// hierarchical all-reduce, hierarchical_allreduce.h).
//
// Each tensor goes through in chunks. Per chunk every rank copies its data into its own slot; once all have,
// rank r adds up slice r of the chunk over the slots, in rank order, into an output slot; once all slices are
// done, every rank copies the whole output back. So every rank ends with the same bits, whatever the number of
// ranks, and the sum's order does not depend on timing. Two buffers alternate between chunks, so two barriers per
// chunk suffice. A rank that dies or never arrives is an error naming it, never a hang: each rank holds a lock on
// its own byte of the segment, which the kernel drops when the process dies (checked while waiting; this works
// where ranks share /dev/shm but not a PID namespace). Each chunk also carries what its rank is reducing (call
// count, elements, element size): ranks that reduce different tensors stop with an error naming both, instead of
// summing unrelated values.
//
// Threads: one per process (the training thread, inside backward). The segment is unlinked as soon as every rank
// has mapped it, by every rank that knows its name, so nothing is left in /dev/shm after a crash; a segment left by
// a run killed while it was being made (no byte of it locked any more) is removed by the next run's rank 0.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <ATen/core/ivalue.h>
#include <torch/types.h>

namespace spur::detail {

/// The sum of DDP's (and ZeRO stage 2's) gradient buckets where it does not go through the process group's own
/// all-reduce: through shared memory when every rank is on this machine (ShmAllreduce), or hierarchically when the
/// ranks share machines across several (HierarchicalAllreduce).
class GradientSum {
 public:
  virtual ~GradientSum() = default;
  /// Sums the contiguous CPU `tensor` over every rank of the run, in place; every rank ends with the same bits.
  /// Throws spur::Error naming a rank that did not arrive within the timeout, or died.
  virtual void allreduce(at::Tensor& tensor) = 0;
  /// The ranks of the run.
  virtual int world_size() const = 0;
  /// allreduce in two halves, for DDP's buckets: start() does what must happen now and leaves the rest running
  /// (the hierarchical sum's leg between machines, while backward goes on); its future completes with `tensor`
  /// when finish() may be called, which every rank calls in the order of its start()s (the hierarchical sum hands
  /// the machines' result to each machine's ranks there). Default: the whole sum in start().
  virtual c10::intrusive_ptr<c10::ivalue::Future> start(at::Tensor& tensor);
  virtual void finish(at::Tensor& /*tensor*/) {}
};

class ShmAllreduce final : public GradientSum {
 public:
  /// The machine of every rank (0, 1, ... in the order of each machine's first rank), from what each rank says
  /// about its own (host name, boot id, /dev/shm) through the run's store. Every rank calls it, once.
  static std::vector<int> machines(c10d::Store& store, int rank, int size);
  /// The ranks `members` (global ranks, ascending, all on this machine) call it, `index` being the caller's place
  /// among them. Returns nullptr, with the reason in `why_not`, when shared memory cannot be had; the caller then
  /// stays on Gloo. `attach_timeout` bounds the wait for the other ranks to map the segment, `timeout` each
  /// collective's. Messages name the ranks by their global numbers.
  static std::unique_ptr<ShmAllreduce> create(c10d::Store& store, const std::vector<int>& members, int index,
                                              std::chrono::milliseconds attach_timeout,
                                              std::chrono::milliseconds timeout, std::string* why_not);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  /// Sums the contiguous CPU `tensor` over every member, in place. Throws spur::Error naming a rank that did not
  /// arrive within the timeout or died.
  void allreduce(at::Tensor& tensor) override;
  /// The members' count: the run's ranks where every rank is a member (the only use as a GradientSum).
  int world_size() const override { return size_; }

  /// Overwrites the contiguous CPU `tensor` with that of the member at index `root`, on every member.
  void broadcast(at::Tensor& tensor, int root);

  /// The members (ranks of this machine sharing the segment).
  int size() const { return size_; }
  /// Says to the other ranks that this one is leaving on purpose (its program ended normally): an all-reduce that
  /// then waits for it says so, instead of "gone".
  void mark_left();
  /// Undoes mark_left (a later Accelerator of the same program).
  void mark_present();
  /// This rank failed in a collective beyond this machine (the hierarchical sum's leg between machines): every
  /// member waiting in this segment then stops with an error naming it, instead of waiting out the timeout. Any
  /// thread may call it.
  void fail_members();
  /// Bytes of one chunk (per rank and buffer).
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

 private:
  struct Header;
  ShmAllreduce(void* base, std::size_t bytes, int fd, std::vector<int> members, int index,
               std::chrono::milliseconds timeout);
  static std::string store_prefix();
  std::string rank_name(int index) const { return std::to_string(members_[static_cast<std::size_t>(index)]); }
  void wait_all(const char* what, std::size_t first_offset, uint64_t generation);
  // Publishes this rank's call (count, elements, element size with kBroadcastBit for a broadcast) and arrives.
  void arrive(uint64_t call, int64_t total, uint64_t described, uint64_t generation);
  void check_same_call(uint64_t call, int64_t total, int64_t element) const;
  std::byte* slot(int buffer, int index) const;

  void* base_;
  std::size_t bytes_;
  int fd_;                    // kept open: it holds this rank's liveness lock
  std::vector<int> members_;  // global ranks, by index
  int rank_;                  // this rank's index among members_
  int size_;
  std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace spur::detail
