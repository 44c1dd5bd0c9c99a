// SPDX-License-Identifier: Apache-2.0
// ZeRO stages 1 to 3 (DeepSpeed's names; FSDP's SHARD_GRAD_OP is stage 2, FULL_SHARD stage 3): each rank keeps the
// optimizer state (stage 1), and the reduced gradients too (stage 2), and the parameters too between their uses
// (stage 3), of its own contiguous shard only.
//
//   ZeroLayout      one prepared model's trained parameters laid end to end in one flat buffer of
//                   world x chunk elements (each starting on a 64-byte boundary, as a tensor of its own does; gaps
//                   and the tail padded with zeros); the parameters become views into it, so the all-gather after
//                   a step writes them in place. Rank r owns [r * chunk, (r + 1) * chunk).
//   ZeroGradients   stage 2's gradient reduction (instead of DDP's Reducer): hooks on every parameter's gradient
//                   accumulator reduce buckets, in a fixed order, while backward still runs; each rank keeps
//                   its owned range of the reduced gradient and frees the parameters' full gradients.
//                   Stage 3: one layout per spur::fully_shard unit (fully_shard.h); the buffer's memory exists only
//                   while the unit is gathered (unshard: all-gather from the owned shard; reshard: freed, the
//                   parameters empty), and the owned values live in a shard of their own.
//   ZeroShards      a prepared optimizer's view of the layouts: its parameter groups list this rank's slices of
//                   the parameters (so any LibTorch optimizer whose state is per parameter, and only per element,
//                   steps exactly as it would on the whole), their gradients point at the reduced gradients'
//                   slices, and the step ends with the all-gather.
//
// Reduction: an all-reduce per bucket (shared memory when every rank is on this machine, else Gloo or NCCL,
// started asynchronously so that it overlaps the rest of backward); each rank then keeps its slice. A
// reduce-scatter would move half the bytes; c10d's needs equal slices per rank of every bucket, which buckets cut
// at parameter boundaries do not have (see docs/zero.md).
//
// After a synchronising backward, stage 2 leaves each reduced parameter's .grad() an empty tensor (the marker
// below): the full gradient is not kept, and a zero_grad of the model can still be seen.
//
// Threading: the training thread; the hooks run on autograd's backward thread, which the training thread waits
// for (as the Reducer's).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/types.h>

#include "distributed/communicator.h"

namespace spur::detail {

/// Stage 3: the memory of gathered units, kept for the next gather of the same size instead of going back to the
/// allocator at every free: each block is gathered twice a step, and glibc's heap, handed blocks of a unit's size
/// that often between the step's other allocations, holds several hundred MiB more than the step uses (measured:
/// 870 MiB of heap for 396 in use on a 67 M-parameter model at 3 ranks). At most `keep` blocks per size (one: the
/// block freed after a unit's forward is the next unit's, and two kept 17 MiB more per rank for no gain).
class StoragePool {
 public:
  explicit StoragePool(size_t keep = 1) : keep_(keep) {}
  /// A block of `bytes` for `storage` (kept, else from its allocator).
  at::DataPtr take(c10::StorageImpl& storage, size_t bytes);
  void give(at::DataPtr block, size_t bytes);

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<at::DataPtr>> free_;
  size_t keep_;
};

class ZeroLayout {
 public:
  struct Entry {
    torch::Tensor param;
    int64_t offset = 0;  // in the flat buffer
    int64_t numel = 0;
  };

  /// Flattens `params` (one dtype and device; distinct tensors) into the buffer; their values are kept. Stage 3
  /// takes the buffer from `pool` (a model's units, built one after another, then share one block).
  ZeroLayout(const std::vector<torch::Tensor>& params, int world, int rank, int stage,
             std::shared_ptr<StoragePool> pool = nullptr);

  int stage() const { return stage_; }
  int64_t chunk() const { return chunk_; }
  int64_t owned_begin() const { return rank_ * chunk_; }
  int64_t owned_end() const { return (rank_ + 1) * chunk_; }
  /// The flat range [lo, hi) of `entry` that this rank owns (none: lo >= hi).
  std::pair<int64_t, int64_t> owned_range(const Entry& entry) const;
  const std::vector<Entry>& entries() const { return entries_; }
  /// The entry of `param`, or nullptr when it is not one of this layout's.
  const Entry* find(const torch::Tensor& param) const;
  torch::Tensor& flat() { return flat_; }
  /// Stage 2: the reduced (averaged) gradient of the owned range, `chunk` elements.
  torch::Tensor& grad_shard() { return grad_shard_; }
  /// Stage 2, per entry: grad_shard holds a reduced gradient for it that nobody cleared since (a parameter no rank
  /// used, with find_unused_parameters, gets none: the optimizer skips it, as under DDP).
  std::vector<char> entry_has_grad;

  // Stage 2 and zero_grad. Under DDP a parameter's .grad() holds the reduced gradient until something clears it:
  // the optimizer's zero_grad, or the model's own (LibTorch's Module::zero_grad, the common idiom), or nothing (the
  // next backward then adds to it). Stage 2 keeps the reduced gradient in grad_shard instead, so that a clearing
  // of .grad() can be seen, each reduced parameter's .grad() is set to a marker: an empty tensor of its dtype.
  // Module::zero_grad replaces it (set_to_none) or a detached copy of it (zeroing in place); settle() notices
  // either before the parameter's gradient is next used (the next backward reaching it, the next reduction, the
  // optimizer's step) and clears the reduced gradient, as DDP's zero_grad clears .grad(). The marker left alone
  // means "not cleared": the next reduction adds to the kept gradient, as DDP's accumulation does.

  /// Stage 2, after a reduction: `entry`'s .grad() becomes the marker (a parameter with elements only).
  void mark_reduced(size_t entry);
  /// Stage 2: if `entry` was cleared since it was marked, drops its reduced gradient (and what zero_grad left of
  /// the marker). A marker still in place stays, so that a later zero_grad is seen too. Before the reduced
  /// gradient is read (clipping, the step).
  void refresh(size_t entry);
  /// Stage 2, before a gradient is accumulated into .grad() (a backward reaching the parameter, a reduction):
  /// refresh(), then the marker goes, so that .grad() is a real gradient or undefined again. A zero_grad after
  /// that clears the local gradient only, not the kept reduced one (DDP's would clear both: their sum is one
  /// tensor there).
  void settle(size_t entry);
  /// Stage 2: drops `entry`'s reduced gradient (its range of grad_shard is zeroed).
  void clear_reduced(size_t entry);
  /// True for a .grad() that is the marker or what zero_grad left of it (not a gradient of the parameter).
  /// is_marker_of reads the entry's size instead of the parameter's (the same numbers; no tensor read).
  static bool is_marker(const torch::Tensor& param, const torch::Tensor& grad) {
    return grad.defined() && grad.numel() == 0 && param.numel() > 0;
  }
  bool is_marker_of(size_t entry, const torch::Tensor& grad) const {
    return grad.defined() && grad.numel() == 0 && entries_[entry].numel > 0;
  }
  // Stage 3. The parameters' values live in shard() (this rank's `chunk` elements of the flat range, owned_begin()
  // on); flat() has memory only while gathered(). unshard() fills it from every rank's shard (a collective: every
  // rank, in the same order) and points the parameters at their places in it again; reshard() frees it (also the
  // memory autograd's saved views of the parameters point at: unshard() refills that same storage in place). The
  // parameters keep their shapes; a use of one while its unit is not gathered fails ("data is not allocated")
  // instead of reading freed memory.

  /// Stage 3: true while flat() holds the whole unit (always true for stages 1 and 2).
  bool gathered() const { return gathered_; }
  /// Stage 3: gathers the unit (nothing when it is gathered already).
  void unshard(Communicator& comm);
  /// Stage 3: gathers again after the shards changed (a step while gathered).
  void regather(Communicator& comm);
  /// Stage 3: frees the gathered unit (nothing when it is not gathered, or pinned).
  void reshard();
  /// Stage 3: kept gathered until as many unpin() calls (summon_full_params: a block called meanwhile, on one rank
  /// only, neither frees it nor gathers it again).
  void pin() { ++pins_; }
  void unpin() { --pins_; }
  /// Stage 3, while gathered: the owned range of flat() back into shard() (weights loaded into the parameters).
  void write_back();
  /// This rank's values of the flat range [lo, hi) inside the owned range: a view the optimizer steps.
  torch::Tensor owned_values(int64_t lo, int64_t hi);
  /// Stage 3: this rank's `chunk` values.
  torch::Tensor& shard() { return shard_; }

  /// Throws spur::Error when a parameter's storage is no longer its place in the buffer (replaced after prepare:
  /// torch::load into the module, module->to(...)): the optimizer would step the buffer and the model read
  /// something else.
  void check_views() const;

 private:
  int stage_;
  int rank_;
  int64_t chunk_ = 0;
  torch::Tensor flat_;
  torch::Tensor grad_shard_;
  torch::Tensor marker_;  // stage 2: what reduced parameters' .grad() is set to
  torch::Tensor shard_;   // stage 3: the owned values
  bool gathered_ = true;
  int pins_ = 0;
  std::shared_ptr<StoragePool> pool_;
  std::vector<char> marked_;  // stage 2, per entry: .grad() was set to marker_ and not settled since
  std::vector<Entry> entries_;
  std::unordered_map<const void*, size_t> index_;
};

class ZeroGradients : public std::enable_shared_from_this<ZeroGradients> {
 public:
  /// Hooks every parameter of `layout`; the hooks hold the result weakly (a parameter outliving it is harmless).
  static std::shared_ptr<ZeroGradients> create(std::shared_ptr<ZeroLayout> layout, std::shared_ptr<Communicator> comm,
                                               std::size_t bucket_bytes, std::size_t first_bucket_bytes,
                                               bool find_unused);
  ZeroGradients(std::shared_ptr<ZeroLayout> layout, std::shared_ptr<Communicator> comm, bool find_unused);
  ZeroGradients(const ZeroGradients&) = delete;
  ZeroGradients& operator=(const ZeroGradients&) = delete;
  /// Arms the hooks for the coming backward (a synchronising one). A previous backward that failed part-way (an
  /// exception: its end-of-backward callback never ran) is discarded first, with the gradients it had reduced.
  void prepare_for_backward();
  /// Armed and not finished: what the end of backward does (every bucket reduced, the shard's gradients marked).
  /// Stage 3 calls it for every unit in one order at the end of backward; the callback each queues then finds
  /// nothing left.
  void finish_if_armed() {
    if (armed_) finish();
  }
  /// Waits for the buckets already started and keeps their slices (their full-size buffers are freed).
  void drain();
  /// Stage 3: the model's end of backward finishes every unit's reduction in one order; no callback of its own.
  void finish_by_owner() { owner_finishes_ = true; }
  /// Stage 3: a backward that stopped part-way is forgotten (what it had reduced dropped) and the reduction
  /// disarmed, so that a following local micro-step (no_sync) keeps its gradients.
  void reset();
  /// A gradient of this layout came in the current backward.
  bool started() const { return started_; }

 private:
  struct Bucket {
    int64_t begin = 0;  // flat range [begin, end), parameters entries [first, last]
    int64_t end = 0;
    std::vector<size_t> entries;
    size_t pending = 0;
    torch::Tensor buffer;
    Communicator::WorkPtr work;
  };
  void ready(size_t entry);
  void launch(Bucket& bucket);
  void complete(Bucket& bucket);
  void finish();

  std::shared_ptr<ZeroLayout> layout_;
  std::shared_ptr<Communicator> comm_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;                    // entry -> bucket
  std::vector<bool> seen_;                           // entry: gradient ready in this backward
  std::vector<char> had_grad_;                       // entry: a gradient (not none) came in this backward
  bool find_unused_ = false;                         // agree over the ranks on which parameters got one at all
  bool started_ = false;                             // a hook fired in this backward
  std::vector<std::shared_ptr<void>> accumulators_;  // autograd holds gradient accumulators only weakly
  size_t next_ = 0;                                  // next bucket to launch
  size_t completed_ = 0;                             // buckets whose slice is in grad_shard
  bool armed_ = false;
  bool finish_queued_ = false;
  bool owner_finishes_ = false;
};

class ZeroShards {
 public:
  /// Replaces the optimizer's parameters by this rank's slices of them. Throws spur::Error when a parameter is in
  /// no layout (the model was not prepared first), the optimizer already has state, or it is not element-wise
  /// (LBFGS).
  ZeroShards(torch::optim::Optimizer& optimizer, const std::vector<std::shared_ptr<ZeroLayout>>& layouts,
             std::shared_ptr<Communicator> comm);
  /// Points each slice's gradient at the reduced gradient (stage 1: a view of the parameter's full gradient as it is
  /// now; stage 2: of the layout's grad_shard, if it holds one that was not cleared). Before unscaling, clipping
  /// and stepping; again is harmless (views of the same values).
  void attach_gradients();
  /// After the step: the slices let go of the gradients (stage 1's views would keep a replaced gradient alive).
  void detach_gradients();
  /// After the optimizer stepped its slices: every rank's slices to every rank.
  void all_gather();
  /// Clears every gradient the optimizer's parameters have (full ones, and stage 2's shards).
  void zero_grad(bool set_to_none);
  /// This rank's slices, with the parameters they came from (for clipping a given parameter list).
  struct Slice {
    torch::Tensor shard;
    torch::Tensor param;
    ZeroLayout* layout;
    size_t entry;   // in the layout
    int64_t begin;  // flat range
    int64_t end;
  };
  const std::vector<Slice>& slices() const { return slices_; }
  const std::vector<torch::Tensor>& params() const { return params_; }

 private:
  std::vector<Slice> slices_;
  std::vector<torch::Tensor> params_;                    // the optimizer's original parameters
  std::vector<std::pair<ZeroLayout*, size_t>> entries_;  // where each of them is (also those with no slice here)
  std::vector<ZeroLayout*> layouts_;                     // those its parameters are in
  std::shared_ptr<Communicator> comm_;
};

}  // namespace spur::detail
