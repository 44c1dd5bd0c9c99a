// SPDX-License-Identifier: Apache-2.0
// spur::fully_shard: ZeRO stage 3 (FSDP's FULL_SHARD) block by block, as PyTorch FSDP2's `fully_shard(block)`.
// Under stage 3 each rank keeps 1/N of a wrapped block's parameters between its uses. Calling the block gathers
// them (one all-gather), runs its forward and frees them again; its backward gathers them once more, and its
// gradients are reduced into each rank's shard, which the optimizer steps. Parameters no block holds (embeddings,
// the head) are the model's root unit: gathered for each forward of the prepared model, freed after its backward.
// Without stage 3 (one process, DDP, stages 1 and 2) the wrapper only calls the block.
//
//   struct GPTImpl : torch::nn::Module {
//     std::vector<spur::FullyShard<Block>> blocks;
//     GPTImpl() {
//       for (int i = 0; i < layers; ++i) blocks.push_back(spur::fully_shard(register_module("h" + ..., Block())));
//     }
//     torch::Tensor forward(torch::Tensor x) {
//       for (auto& block : blocks) x = block(x);  // was block->forward(x)
//       ...
//
// The block stays registered under its own name, so parameter names, state dicts and checkpoints are the same as
// without the wrapper. LibTorch modules have no forward hooks, hence the call through the wrapper: calling the
// block's forward directly under stage 3 fails on its first parameter ("data is not allocated"), as a use of a
// parameter outside its block's call does. Mistakes are refused by name at prepare or at the first step: a
// parameter shared by two blocks, a block called twice in one forward, a block not called in a forward, ranks that
// wrap differently, find_unused_parameters with blocks (a block's parameters must all get gradients, on every rank).
//
// Threading: the training thread (the backward hooks run on autograd's thread, which it waits for).
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include <spur/model.h>

namespace spur {

struct FullyShardOptions {
  /// Free the gathered parameters after the block's forward and gather them again for its backward (FSDP's
  /// FULL_SHARD, FSDP2's reshard_after_forward=True). False keeps them from forward to backward: one all-gather
  /// fewer per step, the block's whole parameters held meanwhile (SHARD_GRAD_OP for this block). Default: true.
  bool reshard_after_forward = true;
};

namespace detail {

struct ShardSlot;

/// Records `module` as a unit for the next prepare() under stage 3; what the wrapper calls through.
std::shared_ptr<ShardSlot> register_fully_sharded(torch::nn::Module& module, const FullyShardOptions& options);

/// One call of a wrapped block: gathers its parameters when they are sharded (constructor); finish() gives its
/// outputs the backward hook that gathers them again, then frees them (reshard_after_forward). A call that throws
/// frees them too.
class ShardedCall {
 public:
  explicit ShardedCall(const std::shared_ptr<ShardSlot>& slot);
  ~ShardedCall();
  ShardedCall(const ShardedCall&) = delete;
  ShardedCall& operator=(const ShardedCall&) = delete;
  void finish(const std::vector<torch::Tensor>& outputs);

 private:
  std::shared_ptr<void> unit_;  // the block's sharding state, while stage 3 runs (else null: a plain call)
  bool finished_ = false;
};

}  // namespace detail

namespace detail {
// The module class behind a holder (torch::nn::Linear, a TORCH_MODULE type), a std::shared_ptr, or itself.
template <typename T, typename = void>
struct module_impl {
  using type = T;
};
template <typename T>
struct module_impl<std::shared_ptr<T>> {
  using type = T;
};
template <typename T>
struct module_impl<T, std::void_t<typename T::ContainedType>> {
  using type = typename T::ContainedType;
};
template <typename T>
std::shared_ptr<T> module_ptr(std::shared_ptr<T> module) {
  return module;
}
template <typename Holder>
auto module_ptr(const Holder& holder) -> decltype(holder.ptr()) {
  return holder.ptr();
}
}  // namespace detail

/// A block wrapped by fully_shard(): call it as the block (`block(x)`); `->` and `*` reach the block itself.
/// `FullyShard<Block>` holds whatever fully_shard returned for a Block or its std::shared_ptr<BlockImpl>.
template <typename M>
class FullyShard {
 public:
  using Impl = typename detail::module_impl<M>::type;

  /// A block and its unit (nullptr: never sharded, a plain call).
  FullyShard(std::shared_ptr<Impl> module, std::shared_ptr<detail::ShardSlot> slot)
      : module_(std::move(module)), slot_(std::move(slot)) {}
  template <typename Other, typename = std::enable_if_t<std::is_same_v<typename FullyShard<Other>::Impl, Impl> &&
                                                        !std::is_same_v<Other, M>>>
  FullyShard(const FullyShard<Other>& other) : module_(other.ptr()), slot_(other.slot()) {}

  /// The block's forward, with its parameters gathered around it under stage 3.
  template <typename... Args>
  auto operator()(Args&&... args) const {
    detail::ShardedCall call(slot_);
    auto out = module_->forward(std::forward<Args>(args)...);
    std::vector<torch::Tensor> outputs;
    detail::collect_tensors(out, outputs);
    call.finish(outputs);
    return out;
  }

  Impl* operator->() const { return module_.get(); }
  Impl& operator*() const { return *module_; }
  const std::shared_ptr<Impl>& ptr() const { return module_; }
  const std::shared_ptr<detail::ShardSlot>& slot() const { return slot_; }

 private:
  std::shared_ptr<Impl> module_;
  std::shared_ptr<detail::ShardSlot> slot_;
};

/// Makes `module` (a LibTorch module holder such as `torch::nn::Linear` or a TORCH_MODULE type, or the
/// std::shared_ptr that register_module returns) a unit of ZeRO stage 3, with its own gather and free. Wrap the
/// blocks of a model (transformer layers) before it is prepared, and call them through the returned wrapper.
template <typename M>
FullyShard<M> fully_shard(const M& module, FullyShardOptions options = {}) {
  auto ptr = detail::module_ptr(module);
  auto slot = detail::register_fully_sharded(*ptr, options);
  return FullyShard<M>(std::move(ptr), std::move(slot));
}

}  // namespace spur
