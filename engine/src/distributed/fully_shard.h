// SPDX-License-Identifier: Apache-2.0
// ZeRO stage 3 of one prepared model (spur/fully_shard.h is the user's side). Each spur::fully_shard block of the
// model is a unit, and the parameters no block holds are the root unit; each unit is a stage-3 ZeroLayout (its
// parameters flat, this rank's shard kept, the whole gathered only around its uses) with its own ZeroGradients
// (its gradients reduced into the shard as they come, as stage 2's).
//
// One step, per unit:
//   forward   the prepared model's call gathers the root; a block's call gathers the block (all-gather from the
//             shards), runs it, hooks its outputs and frees it again (reshard_after_forward).
//   backward  the first gradient reaching a block's outputs gathers it again (the memory its saved views point at
//             is refilled in place); once every parameter of the unit has its gradient, the unit is freed, and its
//             reduction's buffers with it (shared memory reduces synchronously), or the previous unit's reduction
//             is waited for (Gloo, NCCL: at most one unit's buckets in flight). At the end of backward every armed
//             unit finishes its reduction, in unit order on every rank, and all are freed.
//   step      the optimizer steps the shards (ZeroShards); nothing is gathered until the next forward. What the
//             step freed goes back to the system (malloc_trim).
//
// Threading: the training thread; the hooks run on autograd's backward thread, which the training thread waits for.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include <spur/fully_shard.h>
#include <spur/scope.h>

#include "distributed/communicator.h"
#include "distributed/zero.h"

namespace spur::detail {

class AcceleratorCore;
class ShardedModel;

/// Stage 3: gathers every stage-3 layout of `core` that is not gathered (a collective: every rank) until the scope
/// ends; then, with `writeback`, what the parameters hold goes back into the shards, and those layouts are freed
/// again. Without stage 3, an empty scope.
Scope gather_full_parameters(AcceleratorCore& core, bool writeback);

class ShardedUnit {
 public:
  ShardedUnit(std::string name, std::shared_ptr<ZeroLayout> layout, std::shared_ptr<ZeroGradients> gradients,
              FullyShardOptions options, ShardedModel* model);
  /// "block 'h.3'", or "the root (the model's parameters outside its fully_shard blocks)".
  const std::string& name() const { return name_; }
  ZeroLayout& layout() { return *layout_; }
  ZeroGradients& gradients() { return *gradients_; }

  /// A block's call: refuses a second call in one forward (with gradients), gathers.
  void before_forward();
  /// Hooks the outputs that need gradients (the first of them gathers the block again in backward), then frees
  /// the block (always without gradients; with them when reshard_after_forward).
  void after_forward(const std::vector<torch::Tensor>& outputs);
  /// The block's forward threw: freed, not counted.
  void forward_failed() noexcept;
  /// The gradient of one of the unit's outputs arrived: gathers it for its backward.
  void before_backward();
  /// One of the unit's parameters has its gradient: the unit is freed when all have.
  void gradient_ready();

  int calls = 0;     // with gradients, since the model's forward began
  size_t ready = 0;  // parameters whose gradient came in this backward

 private:
  std::string name_;
  std::shared_ptr<ZeroLayout> layout_;
  std::shared_ptr<ZeroGradients> gradients_;
  FullyShardOptions options_;
  ShardedModel* model_;
};

class ShardedModel : public std::enable_shared_from_this<ShardedModel> {
 public:
  /// Finds `module`'s units, checks that every rank wraps it alike, and shards its trained parameters (their
  /// layouts join core.zero_layouts, in unit order, root first). Throws spur::Error naming a parameter shared by
  /// two units, or the ranks' differing layouts.
  static std::shared_ptr<ShardedModel> create(const std::shared_ptr<AcceleratorCore>& core, torch::nn::Module& module);
  ShardedModel(std::shared_ptr<AcceleratorCore> core, torch::nn::Module& module);

  /// The prepared model's call begins: refuses a model changed since prepare, gathers the root.
  void begin_forward();
  /// Its forward returned. `grad`: with gradients (the outputs that need one are hooked: the first gradient
  /// reaching them gathers the root again, had anything freed it); `sync`: the coming backward synchronises (arms
  /// every unit's reduction). Refuses a block not called in a forward with gradients.
  void end_forward(bool grad, bool sync, const std::vector<torch::Tensor>& outputs);
  /// Arms every unit's reduction (a backward the program's own forward led to).
  void arm();

  Communicator& comm();
  /// From the hooks: the first of an autograd pass queues its end; `gradients`: a parameter's gradient came (a
  /// backward, not only autograd::grad over the outputs), so that end finishes the reductions and frees every unit.
  void backward_started(bool gradients);
  /// `unit` has all its gradients: its reduction finishes (shared memory), or the previous unit's (in flight).
  void unit_done(ShardedUnit* unit);
  [[noreturn]] void fail(const std::string& operation, const std::exception& cause);

 private:
  void end_backward();

  std::shared_ptr<AcceleratorCore> core_;
  torch::nn::Module* module_;
  size_t parameter_count_ = 0;                       // the module's, at prepare
  std::vector<std::shared_ptr<ShardedUnit>> units_;  // root first, when it has trained parameters
  ShardedUnit* root_ = nullptr;
  ShardedUnit* in_flight_ = nullptr;
  bool end_queued_ = false;
  bool gradients_seen_ = false;  // in the pass end_queued_ belongs to
};

}  // namespace spur::detail
