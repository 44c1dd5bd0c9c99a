// SPDX-License-Identifier: Apache-2.0
// DDP's gradient buckets on their way between the ranks (comm_hooks.h).
#include "distributed/comm_hooks.h"

#include <string>
#include <vector>

#include <torch/version.h>

#include <spur/core/torch_features.h>
#include <spur/error.h>

#include "distributed/communicator.h"
#include "distributed/shm_allreduce.h"

namespace spur::detail {
namespace {

c10::intrusive_ptr<c10::ivalue::Future> completed(const at::Tensor& tensor) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::TensorType::get());
  future->markCompleted(c10::IValue(tensor));
  return future;
}

// DDP's gradient all-reduce through shared memory (ranks all on this machine): the Reducer hands each ready bucket
// here instead of to Gloo. DDP's own hook divides by the world size before summing; this one sums, then divides,
// on every rank alike.
class SharedMemoryHook final : public c10d::CommHookInterface {
 public:
  explicit SharedMemoryHook(ShmAllreduce* shm) : shm_(shm) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    auto& tensor = bucket.getBufferRef();
    shm_->allreduce(tensor);
    tensor.div_(shm_->size());
    return completed(tensor);
  }
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  ShmAllreduce* shm_;
};

// torch's fp16_compress_hook and bf16_compress_hook, step for step: the bucket cast to the half type, divided by
// the world size in it, summed in it (through shared memory in rank order, or the process group), and copied back
// into the bucket. The same roundings as torch's hook, so the same results as torch's DDP with it (to the bit where
// the sum's order is the same: always at 2 ranks).
class CompressHook final : public c10d::CommHookInterface {
 public:
  CompressHook(at::ScalarType type, ShmAllreduce* shm, c10::intrusive_ptr<c10d::ProcessGroup> group, int size)
      : type_(type), shm_(shm), group_(std::move(group)), size_(size) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor compressed = buffer.to(type_).div_(size_);
    if (shm_) {
      shm_->allreduce(compressed);
      buffer.copy_(compressed);
      return completed(buffer);
    }
    std::vector<at::Tensor> tensors{compressed};
    auto work = group_->allreduce(tensors);
    // Decompressed in place when the sum arrives (torch's hook does the same, to keep the peak low).
    return work->getFuture()->then(
        [buffer, compressed](c10::ivalue::Future&) {
          buffer.copy_(compressed);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
  at::Tensor parseHookResult(const c10::IValue& result) override { return result.toTensor(); }

 private:
  at::ScalarType type_;
  ShmAllreduce* shm_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int size_;
};

}  // namespace

std::unique_ptr<c10d::CommHookInterface> make_comm_hook(CommHook hook, Communicator& comm) {
  auto* shm = comm.shared_memory();
  if (hook == CommHook::fp16 || hook == CommHook::bf16) {
    const bool bf16 = hook == CommHook::bf16;
    if (bf16 && !shm && comm.device().is_cpu() &&
        !torch_features::at_least(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, torch_features::kGlooBFloat16)) {
      throw Error("the bf16 communication hook on " + comm.describe() + ": this LibTorch (" + TORCH_VERSION +
                  ")'s Gloo cannot sum bfloat16 (from 2.2 on), and the gradients go through Gloo here (" +
                  comm.shared_memory_note() + "): use the fp16 hook, or none");
    }
    return std::make_unique<CompressHook>(bf16 ? at::kBFloat16 : at::kHalf, shm, comm.group(), comm.size());
  }
  if (shm) return std::make_unique<SharedMemoryHook>(shm);
  return nullptr;
}

}  // namespace spur::detail
