// SPDX-License-Identifier: Apache-2.0
// The gradient sum within machines through shared memory, across them among one leader per machine
// (hierarchical_allreduce.h).
#include "distributed/hierarchical_allreduce.h"

#include <spur/core/progress_file.h>

namespace spur::detail {

HierarchicalAllreduce::HierarchicalAllreduce(std::unique_ptr<ShmAllreduce> local,
                                             c10::intrusive_ptr<c10d::ProcessGroup> leaders, int world)
    : local_(std::move(local)), leaders_(std::move(leaders)), world_(world) {}

void HierarchicalAllreduce::allreduce(at::Tensor& tensor) {
  auto future = start(tensor);
  {
    progress::Scope across("all-reduce among the machines' leaders");
    future->wait();
    (void)future->value();  // rethrows the leaders' failure (the leg's, passed on by start()'s callback)
  }
  finish(tensor);
}

c10::intrusive_ptr<c10::ivalue::Future> HierarchicalAllreduce::start(at::Tensor& tensor) {
  // 1. This machine's sum, on every rank of it (the leader needs it; the others wait in finish() anyway).
  if (local_) local_->allreduce(tensor);
  // 2. The machines' sums, among the leaders, while the caller goes on.
  if (leaders_) {
    std::vector<at::Tensor> tensors{tensor};
    ShmAllreduce* local = local_.get();
    return leaders_->allreduce(tensors)->getFuture()->then(
        [tensor, local](c10::ivalue::Future& leg) {
          // A failed leg fails the sum (never the machine's own sum handed on as the run's), and tells this
          // machine's other ranks, which wait for the hand-back, at once.
          if (leg.hasError() && local) local->fail_members();
          (void)leg.value();  // rethrows the leg's error into this future
          return c10::IValue(tensor);
        },
        c10::TensorType::get());
  }
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(c10::IValue(tensor));
  return future;
}

void HierarchicalAllreduce::finish(at::Tensor& tensor) {
  // 3. The leader's (index 0: the machine's lowest rank) result, to its machine.
  if (local_) local_->broadcast(tensor, 0);
}

void HierarchicalAllreduce::mark_left() {
  if (local_) local_->mark_left();
}

void HierarchicalAllreduce::mark_present() {
  if (local_) local_->mark_present();
}

}  // namespace spur::detail
