// SPDX-License-Identifier: Apache-2.0
// PreparedScheduler: the user's LR scheduler after Accelerator::prepare. As Accelerate's, it steps only when its
// optimizer did (not on accumulation micro-steps, not after its optimizer skipped an fp16 step; when its optimizer
// was not prepared, not after any prepared optimizer skipped), num_processes times per optimizer step unless
// split_batches (the schedule was written for one process's batches).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>

namespace spur {

namespace detail {
class AcceleratorCore;
}

class PreparedScheduler {
 public:
  PreparedScheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler,
                    std::shared_ptr<detail::AcceleratorCore> core);

  void step();
  torch::optim::LRScheduler& scheduler() const { return *scheduler_; }
  torch::optim::LRScheduler* operator->() const { return scheduler_.get(); }

 private:
  std::shared_ptr<torch::optim::LRScheduler> scheduler_;
  std::shared_ptr<detail::AcceleratorCore> core_;
  std::vector<size_t> owners_;  // indices of the prepared optimizers it drives (found at the first step)
  bool resolved_ = false;
};

/// LibTorch has StepLR and ReduceLROnPlateau only. This is the schedule most training scripts use
/// (transformers' get_cosine_schedule_with_warmup): the learning rate rises linearly from 0 to the optimizer's
/// over `warmup_steps`, then follows a cosine down to `min_ratio` times it at `total_steps`, and stays there.
/// Construction sets the step-0 rate, as PyTorch's LambdaLR does. Prepare it (it steps with the optimizer).
class CosineWithWarmup : public torch::optim::LRScheduler {
 public:
  /// Default min_ratio: 0.
  CosineWithWarmup(torch::optim::Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                   double min_ratio = 0.0);
  /// The factor on the base rates after `step` scheduler steps.
  double factor(int64_t step) const;

 private:
  std::vector<double> get_lrs() override;
  torch::optim::Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t warmup_steps_, total_steps_;
  double min_ratio_;
};

namespace detail {
/// LibTorch keeps the step count protected and has no save/load for schedulers: checkpoints go through these.
unsigned scheduler_step_count(const torch::optim::LRScheduler& scheduler);
void set_scheduler_step_count(torch::optim::LRScheduler& scheduler, unsigned count);
}  // namespace detail

}  // namespace spur
