// SPDX-License-Identifier: Apache-2.0
// PreparedScheduler: Accelerate's stepping rule over a LibTorch LR scheduler.
#include <spur/scheduler.h>

#include <algorithm>
#include <cmath>

#include <spur/error.h>

#include "accelerator_core.h"

namespace spur {
namespace {

// Names LRScheduler's protected step_count_ through a derived class: a pointer to member taken this way may be
// applied to any LRScheduler.
struct StepCountAccess : torch::optim::LRScheduler {
  static constexpr auto member = &StepCountAccess::step_count_;
};
struct CurrentLrsAccess : torch::optim::LRScheduler {
  static constexpr auto member = &CurrentLrsAccess::get_current_lrs;
};

// The prepared optimizers whose learning rates `scheduler` sets. LibTorch keeps a scheduler's optimizer private, so
// each prepared optimizer's first rate is set to a value no other has, for a moment, and the scheduler asked which
// rates it sees. Empty when it drives none of them (then every prepared optimizer counts, as in Accelerate).
std::vector<size_t> optimizers_of(torch::optim::LRScheduler& scheduler,
                                  const std::vector<std::shared_ptr<torch::optim::Optimizer>>& optimizers) {
  std::vector<size_t> found;
  for (size_t i = 0; i < optimizers.size(); ++i) {
    auto& groups = optimizers[i]->param_groups();
    if (groups.empty()) continue;
    auto& options = groups.front().options();
    const double rate = options.get_lr();
    const double probe = -1.0e300 - static_cast<double>(i);  // a rate no optimizer has
    options.set_lr(probe);
    const auto seen = (scheduler.*CurrentLrsAccess::member)();
    options.set_lr(rate);
    if (!seen.empty() && seen.front() == probe) found.push_back(i);
  }
  return found;
}

}  // namespace

PreparedScheduler::PreparedScheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler,
                                     std::shared_ptr<detail::AcceleratorCore> core)
    : scheduler_(std::move(scheduler)), core_(std::move(core)) {
  core_->schedulers.push_back(scheduler_);
}

void PreparedScheduler::step() {
  if (!core_->options.step_scheduler_with_optimizer) {
    scheduler_->step();
    return;
  }
  if (!core_->gradient.sync_gradients) return;
  // Not after its own optimizer skipped its step (another optimizer's skip is not this schedule's business).
  if (!resolved_) {
    owners_ = optimizers_of(*scheduler_, core_->optimizers);
    resolved_ = true;
  }
  const auto& skipped = core_->steps_skipped;
  auto skipped_at = [&](size_t i) { return i < skipped.size() && skipped[i] != 0; };
  if (owners_.empty()) {
    for (size_t i = 0; i < core_->optimizers.size(); ++i) {
      if (skipped_at(i)) return;
    }
  } else {
    for (const size_t i : owners_) {
      if (skipped_at(i)) return;
    }
  }
  const int64_t times = core_->options.split_batches ? 1 : core_->state.world_size;
  for (int64_t i = 0; i < times; ++i) scheduler_->step();
}

CosineWithWarmup::CosineWithWarmup(torch::optim::Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                                   double min_ratio)
    : LRScheduler(optimizer),
      optimizer_(optimizer),
      warmup_steps_(warmup_steps),
      total_steps_(total_steps),
      min_ratio_(min_ratio) {
  if (warmup_steps < 0 || total_steps < 1 || warmup_steps > total_steps || min_ratio < 0 || min_ratio > 1) {
    throw Error(
        "CosineWithWarmup needs 0 <= warmup_steps <= total_steps, total_steps >= 1 and 0 <= min_ratio <= 1 "
        "(got " +
        std::to_string(warmup_steps) + ", " + std::to_string(total_steps) + ", " + std::to_string(min_ratio) + ")");
  }
  for (auto& group : optimizer_.param_groups()) {
    base_lrs_.push_back(group.options().get_lr());
    group.options().set_lr(base_lrs_.back() * factor(0));
  }
}

double CosineWithWarmup::factor(int64_t step) const {
  if (step < warmup_steps_) return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup_steps_));
  const double progress = std::min(1.0, static_cast<double>(step - warmup_steps_) /
                                            static_cast<double>(std::max<int64_t>(1, total_steps_ - warmup_steps_)));
  return min_ratio_ + (1.0 - min_ratio_) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

std::vector<double> CosineWithWarmup::get_lrs() {
  // LRScheduler::step() asks before counting the step it is taking.
  std::vector<double> lrs;
  for (const double base : base_lrs_) lrs.push_back(base * factor(static_cast<int64_t>(step_count_) + 1));
  return lrs;
}

namespace detail {

unsigned scheduler_step_count(const torch::optim::LRScheduler& scheduler) { return scheduler.*StepCountAccess::member; }

void set_scheduler_step_count(torch::optim::LRScheduler& scheduler, unsigned count) {
  scheduler.*StepCountAccess::member = count;
}

}  // namespace detail
}  // namespace spur
