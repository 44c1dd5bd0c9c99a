// SPDX-License-Identifier: Apache-2.0
// PreparedOptimizer: the user's optimizer after Accelerator::prepare. It steps and zeroes only on gradient
// sync steps (accumulation), and with fp16 unscales first and skips a step whose gradients hold inf/nan.
#pragma once

#include <memory>
#include <optional>

#include <torch/optim/optimizer.h>

namespace spur {

namespace detail {
class AcceleratorCore;
}

class PreparedOptimizer {
 public:
  PreparedOptimizer(std::shared_ptr<torch::optim::Optimizer> optimizer, std::shared_ptr<detail::AcceleratorCore> core);

  /// Clears gradients; does nothing on micro-steps where gradients are being accumulated. Default: set to none
  /// (PyTorch 2's default), except on the CPU with LibTorch 1.13, where they are zeroed in place: there freed
  /// gradient buffers went back to the OS and the next backward faulted them in again (steps 1.3-1.4x slower).
  void zero_grad(std::optional<bool> set_to_none = std::nullopt);
  /// Steps on sync steps only; with fp16, through the loss scaler (see step_was_skipped).
  void step();
  /// True when the last step was skipped because fp16 gradients overflowed.
  bool step_was_skipped() const { return step_was_skipped_; }

  torch::optim::Optimizer& optimizer() const { return *optimizer_; }
  torch::optim::Optimizer* operator->() const { return optimizer_.get(); }

 private:
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  std::shared_ptr<detail::AcceleratorCore> core_;
  bool step_was_skipped_ = false;
};

}  // namespace spur
