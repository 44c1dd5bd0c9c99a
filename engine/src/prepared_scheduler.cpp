// SPDX-License-Identifier: Apache-2.0
// PreparedScheduler: Accelerate's stepping rule over a LibTorch LR scheduler.
#include <spur/scheduler.h>

#include "accelerator_core.h"

namespace spur {
namespace {

// Names LRScheduler's protected step_count_ through a derived class: a pointer to member taken this way may be
// applied to any LRScheduler.
struct StepCountAccess : torch::optim::LRScheduler {
  static constexpr auto member = &StepCountAccess::step_count_;
};

}  // namespace

PreparedScheduler::PreparedScheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler,
                                     std::shared_ptr<detail::AcceleratorCore> core)
    : scheduler_(std::move(scheduler)), core_(std::move(core)) {
  core_->schedulers.push_back(scheduler_);
}

void PreparedScheduler::step() {
  if (!core_->gradient.sync_gradients || core_->step_was_skipped) return;
  const int64_t times = core_->options.split_batches ? 1 : core_->state.world_size;
  for (int64_t i = 0; i < times; ++i) scheduler_->step();
}

namespace detail {

unsigned scheduler_step_count(const torch::optim::LRScheduler& scheduler) {
  return scheduler.*StepCountAccess::member;
}

void set_scheduler_step_count(torch::optim::LRScheduler& scheduler, unsigned count) {
  scheduler.*StepCountAccess::member = count;
}

}  // namespace detail
}  // namespace spur
