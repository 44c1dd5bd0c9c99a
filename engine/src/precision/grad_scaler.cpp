// SPDX-License-Identifier: Apache-2.0
// fp16 loss scaling with torch.cuda.amp.GradScaler's rule. The scale is kept on the host: the one device->host
// read per step (is there an inf?) is the same synchronisation torch's own step() makes.
#include <spur/precision.h>

#include <cmath>

#include <ATen/ops/_amp_foreach_non_finite_check_and_unscale.h>
#include <torch/types.h>

#include <spur/error.h>

namespace spur {

GradScaler::GradScaler(GradScalerOptions options) : options_(options), scale_(static_cast<float>(options.init_scale)) {
  if (!(options.init_scale > 0) || !std::isfinite(static_cast<float>(options.init_scale)) ||
      !(options.growth_factor > 1.0) || !(options.backoff_factor > 0.0) || !(options.backoff_factor < 1.0) ||
      options.growth_interval < 1) {
    throw Error(
        "GradScaler options need 0 < init_scale < 3.4e38 (a float32), growth_factor > 1, 0 < backoff_factor < 1 and "
        "growth_interval >= 1");
  }
}

torch::Tensor GradScaler::scale(const torch::Tensor& loss) const {
  // In fp32, as torch does: a half loss times 65536 overflows once |loss| > 1.
  return (loss.is_floating_point() && loss.element_size() < 4 ? loss.to(torch::kFloat) : loss) * scale_;
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  auto& state = per_optimizer_[&optimizer];
  if (state.unscaled) {
    throw Error("GradScaler::unscale_ was already called for this optimizer since the last update()");
  }
  if (state.stepped) throw Error("GradScaler::unscale_ is called after step(): call update() first");
  if (before_unscale_) before_unscale_(optimizer);

  const double inverse = 1.0 / scale_;
  std::vector<torch::Tensor> cuda_grads;
  for (const auto& group : optimizer.param_groups()) {
    for (const auto& param : group.params()) {
      const auto& grad = param.grad();
      if (!grad.defined()) continue;
      if (!state.found_inf.defined()) state.found_inf = torch::zeros({1}, grad.options().dtype(torch::kFloat));
      if (grad.is_cuda()) {
        cuda_grads.push_back(grad);
        continue;
      }
      // Tested on the scaled value, as torch's kernel does.
      state.found_inf.logical_or_(grad.isfinite().all().logical_not());
      grad.mul_(inverse);
    }
  }
  if (!cuda_grads.empty()) {
    // One fused kernel on CUDA, as torch's GradScaler.
    auto inv = torch::full({1}, inverse, cuda_grads.front().options().dtype(torch::kFloat));
    at::_amp_foreach_non_finite_check_and_unscale_(cuda_grads, state.found_inf, inv);
  }
  if (reduce_found_inf_) {
    // Every rank takes part, also one whose shard held no gradient.
    if (!state.found_inf.defined()) state.found_inf = torch::zeros({1}, torch::kFloat);
    reduce_found_inf_(state.found_inf);
  }
  state.unscaled = true;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  auto& state = per_optimizer_[&optimizer];
  if (state.stepped) throw Error("GradScaler::step was already called for this optimizer since update()");
  if (!state.unscaled) unscale_(optimizer);
  auto& updated = per_optimizer_[&optimizer];
  updated.stepped = true;
  updated.found_inf_host = updated.found_inf.defined() && updated.found_inf.item<float>() != 0.0f;
  if (*updated.found_inf_host) return false;
  optimizer.step();
  return true;
}

void GradScaler::update() {
  bool found_inf = false;
  bool any = false;
  for (auto& [optimizer, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    any = true;
    found_inf = found_inf || (state.found_inf_host ? *state.found_inf_host : state.found_inf.item<float>() != 0.0f);
  }
  per_optimizer_.clear();
  if (!any) return;  // nothing was unscaled this step: torch asserts here; a no-op is kinder
  // torch keeps the scale in a float32 tensor: each product is taken in double and rounded to float, and the
  // scale grows only when the grown value is finite (from 2^127 it stays there instead of becoming inf).
  if (found_inf) {
    scale_ = static_cast<float>(scale_ * options_.backoff_factor);
    growth_tracker_ = 0;
  } else if (++growth_tracker_ == options_.growth_interval) {
    const float grown = static_cast<float>(scale_ * options_.growth_factor);
    if (std::isfinite(grown)) scale_ = grown;
    growth_tracker_ = 0;
  }
}

std::optional<bool> GradScaler::pending_found_inf() const {
  std::optional<bool> found;
  for (const auto& [optimizer, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    const bool inf = state.found_inf_host ? *state.found_inf_host : state.found_inf.item<float>() != 0.0f;
    found = found.value_or(false) || inf;
  }
  return found;
}

void GradScaler::load(double scale, int64_t growth_tracker, std::optional<bool> pending_found_inf) {
  if (!(scale > 0) || !std::isfinite(static_cast<float>(scale))) {
    throw Error("GradScaler::load: scale must be a positive float32, not " + std::to_string(scale));
  }
  if (growth_tracker < 0 || growth_tracker >= options_.growth_interval) {
    throw Error("GradScaler::load: growth tracker " + std::to_string(growth_tracker) + " is outside [0, " +
                std::to_string(options_.growth_interval) + ")");
  }
  scale_ = static_cast<float>(scale);
  growth_tracker_ = growth_tracker;
  per_optimizer_.clear();
  if (pending_found_inf) {
    // The saved step's finding, under a key no optimizer has: update() applies it with the next real ones.
    auto& pending = per_optimizer_[nullptr];
    pending.unscaled = true;
    pending.stepped = true;
    pending.found_inf = torch::full({1}, *pending_found_inf ? 1.0f : 0.0f);
    pending.found_inf_host = *pending_found_inf;
  }
}

}  // namespace spur
