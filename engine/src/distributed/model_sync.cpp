// SPDX-License-Identifier: Apache-2.0
// Gradient synchronisation for a prepared model, the way DistributedDataParallel does it: c10d's Reducer hooks
// every parameter's gradient accumulator and all-reduces full buckets while the rest of backward still runs.
#include <unordered_set>

#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/nn/module.h>

#include <spur/error.h>
#include <spur/model.h>

#include "accelerator_core.h"
#include "compat/torch_compat.h"

namespace spur::detail {
namespace {

// DDP's broadcast bucket for parameters and buffers.
constexpr size_t kBroadcastBucketBytes = 250u << 20;

class ReducerModelSync final : public ModelSync {
 public:
  ReducerModelSync(std::shared_ptr<AcceleratorCore> core, std::shared_ptr<torch::nn::Module> module)
      : core_(std::move(core)), module_(std::move(module)) {
    module_->to(core_->device);
    if (!core_->comm) return;

    // A tensor tied between modules (shared embedding and head...) is listed once per name: hook it once.
    std::unordered_set<const void*> seen;
    std::vector<torch::Tensor> all_params;
    std::vector<torch::Tensor> trained;
    std::unordered_map<size_t, std::string> names;
    for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      all_params.push_back(item.value());
      if (!item.value().requires_grad()) continue;
      names.emplace(trained.size(), item.key());
      trained.push_back(item.value());
    }
    for (const auto& buffer : module_->buffers(/*recurse=*/true)) {
      if (seen.insert(buffer.unsafeGetTensorImpl()).second) buffers_.push_back(buffer);
    }

    const auto& group = core_->comm->group();
    try {
      // Same number, shapes and dtypes of parameters on every rank, or a clear error now (not a hang later).
      c10d::verify_params_across_processes(group, all_params, c10::nullopt);
    } catch (const std::exception& e) {
      throw Error("prepare(model) on " + core_->comm->describe() +
                  ": the model differs between ranks (every rank must build the same model): " + e.what());
    }
    try {
      // Every rank starts from rank 0's weights, frozen ones included.
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> state = all_params;
      state.insert(state.end(), buffers_.begin(), buffers_.end());
      if (!state.empty()) c10d::broadcast_coalesced(group, state, kBroadcastBucketBytes, 0);
    } catch (const std::exception& e) {
      core_->comm->fail("prepare(model) (broadcast from rank 0)", e);
    }
    if (trained.empty()) return;

    const auto& options = core_->options;
    const std::size_t first_cap =
        options.first_bucket_cap_bytes.value_or(core_->device.is_cuda() ? std::size_t{1} << 20 : std::size_t{4} << 20);
    std::vector<bool> expect_sparse(trained.size(), false);
    auto [buckets, limits] =
        c10d::compute_bucket_assignment_by_size(trained, {first_cap, options.bucket_cap_bytes}, expect_sparse);
    reducer_ = compat::make_reducer(trained, std::move(buckets), std::move(limits), group, expect_sparse,
                                    static_cast<int64_t>(options.bucket_cap_bytes), options.find_unused_parameters,
                                    options.gradient_as_bucket_view, std::move(names),
                                    static_cast<int64_t>(first_cap));
  }

  std::optional<AutocastScope> begin_forward() override {
    if (core_->comm) {
      try {
        // After the first backward, buckets are re-cut in the order gradients actually became ready.
        if (reducer_ && torch::GradMode::is_enabled()) reducer_->rebuild_buckets();
        // DDP's rule: buffers follow rank 0 on the first forward after a synchronised training forward.
        if (core_->options.broadcast_buffers && !buffers_.empty() && require_forward_param_sync_) {
          torch::NoGradGuard no_grad;
          c10d::broadcast_coalesced(core_->comm->group(), buffers_, kBroadcastBucketBytes, 0);
        }
      } catch (const std::exception& e) {
        core_->comm->fail("forward (bucket and buffer sync)", e);
      }
    }
    if (core_->precision == Precision::no) return std::nullopt;
    return std::optional<AutocastScope>(std::in_place, core_->device, core_->precision);
  }

  void end_forward(const std::vector<torch::Tensor>& outputs) override {
    const bool sync = torch::GradMode::is_enabled() && require_sync_;
    require_forward_param_sync_ = sync;
    if (!reducer_ || !sync) return;
    if (core_->options.find_unused_parameters && outputs.empty()) {
      throw Error("find_unused_parameters needs the model's outputs, but forward returned no tensor Spur can "
                  "see (a Tensor, or vectors, pairs and tuples of them)");
    }
    reducer_->prepare_for_backward(core_->options.find_unused_parameters ? outputs : std::vector<torch::Tensor>{});
  }

  bool converts_outputs() const override { return core_->precision != Precision::no; }
  void set_require_backward_grad_sync(bool sync) override { require_sync_ = sync; }
  bool require_backward_grad_sync() const override { return require_sync_; }

 private:
  std::shared_ptr<AcceleratorCore> core_;
  std::shared_ptr<torch::nn::Module> module_;
  std::vector<torch::Tensor> buffers_;
  std::unique_ptr<c10d::Reducer> reducer_;
  bool require_sync_ = true;
  bool require_forward_param_sync_ = true;
};

}  // namespace

std::shared_ptr<ModelSync> make_model_sync(const std::shared_ptr<AcceleratorCore>& core,
                                           std::shared_ptr<torch::nn::Module> module) {
  core->models.push_back(module);
  return std::make_shared<ReducerModelSync>(core, std::move(module));
}

}  // namespace spur::detail
