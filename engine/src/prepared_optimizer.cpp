// SPDX-License-Identifier: Apache-2.0
// PreparedOptimizer: steps and zeroes on sync steps only; fp16 steps go through the loss scaler.
#include <spur/optimizer.h>

#include <sstream>

#include <torch/serialize/archive.h>

#include <spur/error.h>

#include "accelerator_core.h"
#include "compat/torch_compat.h"
#include <spur/core/progress_file.h>

namespace spur {
namespace {

bool has_state(const torch::optim::Optimizer& optimizer) { return !optimizer.state().empty(); }

// Optimizer state (Adam's moments...) belongs on the parameters' device. A save/load round trip through an
// archive moves every state tensor of LibTorch's optimizers (a custom one must implement save and load).
void move_state(torch::optim::Optimizer& optimizer, torch::Device device) {
  torch::serialize::OutputArchive out;
  optimizer.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  std::istringstream read(bytes.str());
  in.load_from(read, device);
  optimizer.load(in);
}

}  // namespace

namespace detail {

void clear_gradient(torch::Tensor& param, bool set_to_none) {
  auto& grad = param.mutable_grad();
  if (!grad.defined()) return;
  if (set_to_none) {
    grad = torch::Tensor();
  } else {
    grad = grad.detach();
    grad.zero_();
  }
}

}  // namespace detail

PreparedOptimizer::PreparedOptimizer(std::shared_ptr<torch::optim::Optimizer> optimizer,
                                     std::shared_ptr<detail::AcceleratorCore> core)
    : optimizer_(std::move(optimizer)), core_(std::move(core)) {
  if (!core_->device.is_cpu() && has_state(*optimizer_)) move_state(*optimizer_, core_->device);
  core_->optimizers.push_back(optimizer_);
}

void PreparedOptimizer::zero_grad(std::optional<bool> set_to_none_option) {
  if (!core_->gradient.sync_gradients) return;
  if (core_->accumulation_steps > 1 && !core_->backward_this_micro_step && core_->backwards_since_step > 0) {
    // The loop zeroes before backward: on this synchronising micro-step it would wipe what the previous ones
    // accumulated, and every optimizer step would see only the last micro-batch (silently).
    throw Error("optimizer.zero_grad() on the micro-step that synchronises would discard the gradients of the " +
                std::to_string(core_->backwards_since_step) +
                " micro-step(s) accumulated since the last optimizer step: with gradient accumulation, call it "
                "after optimizer.step() (backward, step, zero_grad), as Accelerate documents");
  }
  core_->backwards_since_step = 0;
  const bool set_to_none = set_to_none_option.value_or(core_->device.is_cuda() || compat::kZeroGradSetsToNone);
  if (auto* shards = core_->shards_of(*optimizer_)) {
    shards->zero_grad(set_to_none);
    return;
  }
  for (auto& group : optimizer_->param_groups()) {
    for (auto& param : group.params()) detail::clear_gradient(param, set_to_none);
  }
}

void PreparedOptimizer::step() {
  if (!core_->gradient.sync_gradients) return;
  progress::Scope stepping("optimizer step");
  core_->backwards_since_step = 0;
  core_->unwrapped_backwards_since_step = 0;
  auto* shards = core_->shards_of(*optimizer_);
  if (shards) shards->attach_gradients();
  if (core_->scaler) {
    step_was_skipped_ = !core_->scaler->step(*optimizer_);
    core_->scaler_update_pending = true;  // applied by the next backward, once for all optimizers
  } else {
    optimizer_->step();
    step_was_skipped_ = false;
  }
  // ZeRO: each rank stepped its shard; every rank's shard goes to every rank (a skipped step changed nothing,
  // and every rank skipped it: the scaler's verdict is reduced over the shards).
  if (shards) {
    if (!step_was_skipped_) shards->all_gather();
    shards->detach_gradients();
  }
  core_->step_was_skipped = step_was_skipped_;
  core_->set_step_skipped(*optimizer_, step_was_skipped_);
  progress::Writer::instance().step();
}

}  // namespace spur
