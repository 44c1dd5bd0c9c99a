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

// DDP's gradient all-reduce through shared memory (ranks all on this machine) or hierarchically (several machines,
// some with several ranks): the Reducer hands each ready bucket here instead of to Gloo. The sum starts here; its
// end (the hierarchical sum's hand-back within each machine) comes when the Reducer takes the result at the end of
// backward, every bucket in order on every rank, so the leg between machines runs while backward goes on. DDP's
// own hook divides by the world size before summing; this one sums, then divides, on every rank alike.
class SharedMemoryHook final : public c10d::CommHookInterface {
 public:
  explicit SharedMemoryHook(GradientSum* sum) : sum_(sum) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    return sum_->start(bucket.getBufferRef());
  }
  at::Tensor parseHookResult(const c10::IValue& result) override {
    at::Tensor tensor = result.toTensor();
    sum_->finish(tensor);
    return tensor.div_(sum_->world_size());
  }

 private:
  GradientSum* sum_;
};

// torch's fp16_compress_hook and bf16_compress_hook, step for step: the bucket cast to the half type, divided by
// the world size in it, summed in it (through shared memory or hierarchically, or the process group), and copied
// back into the bucket. The same roundings as torch's hook, so the same results as torch's DDP with it (to the bit
// where the sum's order is the same: always at 2 ranks).
class CompressHook final : public c10d::CommHookInterface {
 public:
  CompressHook(at::ScalarType type, GradientSum* sum, c10::intrusive_ptr<c10d::ProcessGroup> group, int size)
      : type_(type), sum_(sum), group_(std::move(group)), size_(size) {}
  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    at::Tensor buffer = bucket.getBufferRef();
    at::Tensor compressed = buffer.to(type_).div_(size_);
    if (sum_) {
      // Finished (and copied back into its bucket) when the Reducer takes the result, see SharedMemoryHook: the
      // future carries both tensors there, [compressed, bucket].
      return sum_->start(compressed)
          ->then(
              [buffer, compressed](c10::ivalue::Future& sum) {
                (void)sum.value();  // a failed sum fails the bucket
                return c10::IValue(std::vector<at::Tensor>{compressed, buffer});
              },
              c10::ListType::ofTensors());
    }
    std::vector<at::Tensor> tensors{compressed};
    auto work = group_->allreduce(tensors);
    // Decompressed in place when the sum arrives (torch's hook does the same, to keep the peak low).
    return work->getFuture()->then(
        [buffer, compressed](c10::ivalue::Future& sum) {
          (void)sum.value();  // a failed all-reduce fails the bucket, never hands back this rank's own part
          buffer.copy_(compressed);
          return c10::IValue(buffer);
        },
        c10::TensorType::get());
  }
  at::Tensor parseHookResult(const c10::IValue& result) override {
    if (result.isTensor()) return result.toTensor();  // the process group's: decompressed already
    auto tensors = result.toTensorVector();           // [compressed, bucket]
    sum_->finish(tensors.at(0));
    tensors.at(1).copy_(tensors.at(0));
    return tensors.at(1);
  }

 private:
  at::ScalarType type_;
  GradientSum* sum_;
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  int size_;
};

}  // namespace

std::unique_ptr<c10d::CommHookInterface> make_comm_hook(CommHook hook, Communicator& comm) {
  auto* sum = comm.gradient_sum();
  if (hook == CommHook::fp16 || hook == CommHook::bf16) {
    const bool bf16 = hook == CommHook::bf16;
    if (bf16 && !comm.shared_memory() && comm.device().is_cpu() &&
        !torch_features::at_least(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, torch_features::kGlooBFloat16)) {
      throw Error("the bf16 communication hook on " + comm.describe() + ": this LibTorch (" + TORCH_VERSION +
                  ")'s Gloo cannot sum bfloat16 (from 2.2 on), and the gradients cross Gloo here (" +
                  comm.shared_memory_note() + "): use the fp16 hook, or none");
    }
    return std::make_unique<CompressHook>(bf16 ? at::kBFloat16 : at::kHalf, sum, comm.group(), comm.size());
  }
  if (sum) return std::make_unique<SharedMemoryHook>(sum);
  return nullptr;
}

}  // namespace spur::detail
