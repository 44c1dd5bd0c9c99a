// SPDX-License-Identifier: Apache-2.0
// PreparedScheduler: the user's LR scheduler after Accelerator::prepare. As Accelerate's, it steps only when the
// prepared optimizers did (not on accumulation micro-steps, not after a skipped fp16 step), num_processes times
// per optimizer step unless split_batches (the schedule was written for one process's batches).
#pragma once

#include <memory>

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
};

namespace detail {
/// LibTorch keeps the step count protected and has no save/load for schedulers: checkpoints go through these.
unsigned scheduler_step_count(const torch::optim::LRScheduler& scheduler);
void set_scheduler_step_count(torch::optim::LRScheduler& scheduler, unsigned count);
}  // namespace detail

}  // namespace spur
