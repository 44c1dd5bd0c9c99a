// SPDX-License-Identifier: Apache-2.0
// Mixed precision: AutocastScope (run code under autocast) and GradScaler (fp16 loss scaling with the exact
// algorithm and defaults of torch.cuda.amp.GradScaler). Both are used by the Accelerator and usable alone.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/optim/optimizer.h>

#include <spur/options.h>

namespace spur {

/// The dtype autocast computes in for a precision (fp16 -> Half, bf16 -> BFloat16); Float for Precision::no.
c10::ScalarType autocast_dtype(Precision precision);

/// Throws spur::Error when this LibTorch build cannot run `precision` on `device`
/// (LibTorch 1.13's CPU autocast supports bf16 only).
void check_precision_supported(Precision precision, c10::Device device);

/// While alive, eligible ops on `device` run in the precision's dtype (torch.autocast). Precision::no: no effect.
/// Scopes nest; the autocast cache is cleared when the outermost one ends. One thread only.
class AutocastScope {
 public:
  AutocastScope(c10::Device device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;
  AutocastScope(AutocastScope&& other) noexcept;
  AutocastScope& operator=(AutocastScope&&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_type_ = c10::DeviceType::CPU;
  bool previous_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Undefined;
};

/// Dynamic loss scaling. Per step: `scale(loss).backward()`, then `step(optimizer)` (unscales the gradients,
/// skips the step when any is inf/nan), then `update()`:
/// found inf/nan -> scale *= backoff_factor, growth tracker = 0; else tracker += 1 and, on reaching
/// growth_interval, scale *= growth_factor (unless that is no longer a finite float) and tracker = 0. The scale is
/// a float32 value, as torch's (its arithmetic rounded as torch's kernel rounds it). The logic does not depend on
/// the device.
class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  /// loss * scale.
  torch::Tensor scale(const torch::Tensor& loss) const;
  /// Divides `optimizer`'s gradients by the scale once per step and records whether any is inf/nan.
  /// Sharded gradients (ZeRO): `reduce` combines this rank's inf/nan finding (a 1-element float tensor, 0 or
  /// non-zero) with every other rank's, in place, so that all ranks skip a step or none does. Set by the
  /// Accelerator; every rank calls unscale_ for the same optimizers in the same order.
  void set_found_inf_reduction(std::function<void(torch::Tensor&)> reduce) { reduce_found_inf_ = std::move(reduce); }
  /// Runs at the start of unscale_(optimizer): ZeRO attaches the shards' gradients there. Set by the Accelerator.
  void set_before_unscale(std::function<void(torch::optim::Optimizer&)> hook) { before_unscale_ = std::move(hook); }
  void unscale_(torch::optim::Optimizer& optimizer);
  /// Unscales if not yet done, then steps `optimizer` unless its gradients held inf/nan. True if it stepped.
  bool step(torch::optim::Optimizer& optimizer);
  /// True once unscale_ (or step) has run for `optimizer` since the last update().
  bool unscaled(const torch::optim::Optimizer& optimizer) const {
    auto it = per_optimizer_.find(&optimizer);
    return it != per_optimizer_.end() && it->second.unscaled;
  }
  /// Adjusts the scale from what the optimizers of this step found, and starts a new step.
  void update();

  double get_scale() const { return scale_; }
  int64_t growth_tracker() const { return growth_tracker_; }
  const GradScalerOptions& options() const { return options_; }
  /// What update() would apply now: std::nullopt when nothing was unscaled since the last update(), else
  /// whether an inf/nan was found. A checkpoint taken between step() and update() must keep it.
  std::optional<bool> pending_found_inf() const;
  /// For checkpoints: restores scale, growth tracker and, when given, the pending step's finding, so that the
  /// next update() backs off or grows exactly as it would have without the save.
  void load(double scale, int64_t growth_tracker, std::optional<bool> pending_found_inf = std::nullopt);

 private:
  struct OptimizerState {
    bool unscaled = false;
    bool stepped = false;
    torch::Tensor found_inf;             // one element, on the gradients' device
    std::optional<bool> found_inf_host;  // found_inf read back by step(), so update() need not read it again
  };

  GradScalerOptions options_;
  double scale_;  // always a float32 value
  int64_t growth_tracker_ = 0;
  std::map<const torch::optim::Optimizer*, OptimizerState> per_optimizer_;
  std::function<void(torch::Tensor&)> reduce_found_inf_;
  std::function<void(torch::optim::Optimizer&)> before_unscale_;
};

}  // namespace spur
