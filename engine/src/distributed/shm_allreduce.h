// SPDX-License-Identifier: Apache-2.0
// ShmAllreduce: summing tensors over the ranks of a run that all live on this machine, through one shared-memory
// segment instead of Gloo's TCP loopback. Gloo moves 0.4-0.9 GB/s over loopback here, memory 10+ GB/s: the
// gradient all-reduce of DDP's buckets (through a Reducer communication hook) is what it is for.
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

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/types.h>

namespace spur::detail {

class ShmAllreduce {
 public:
  /// Every rank calls it (through the run's store). Returns nullptr, with the reason in `why_not`, when the
  /// ranks are not all on this machine or shared memory cannot be had; the caller then stays on Gloo.
  /// `attach_timeout` bounds the wait for the other ranks to map the segment, `timeout` each collective's.
  static std::unique_ptr<ShmAllreduce> create(c10d::Store& store, int rank, int size,
                                              std::chrono::milliseconds attach_timeout,
                                              std::chrono::milliseconds timeout, std::string* why_not);
  ~ShmAllreduce();
  ShmAllreduce(const ShmAllreduce&) = delete;
  ShmAllreduce& operator=(const ShmAllreduce&) = delete;

  /// Sums the contiguous CPU `tensor` over every rank, in place. Throws spur::Error naming a rank that did not
  /// arrive within the timeout or died.
  void allreduce(at::Tensor& tensor);

  int size() const { return size_; }
  /// Says to the other ranks that this one is leaving on purpose (its program ended normally): an all-reduce that
  /// then waits for it says so, instead of "gone".
  void mark_left();
  /// Undoes mark_left (a later Accelerator of the same program).
  void mark_present();
  /// Bytes of one chunk (per rank and buffer).
  static constexpr std::size_t kChunkBytes = std::size_t{4} << 20;

 private:
  struct Header;
  ShmAllreduce(void* base, std::size_t bytes, int fd, int rank, int size, std::chrono::milliseconds timeout);
  void wait_all(const char* what, std::size_t counter_offset, uint64_t generation);
  void check_same_call(uint64_t call, int64_t total, int64_t element) const;
  std::byte* slot(int buffer, int index) const;

  void* base_;
  std::size_t bytes_;
  int fd_;  // kept open: it holds this rank's liveness lock
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  uint64_t generation_ = 0;
  uint64_t calls_ = 0;
};

}  // namespace spur::detail
