// SPDX-License-Identifier: Apache-2.0
// Gradient synchronisation for a prepared model, the way DistributedDataParallel does it: c10d's Reducer hooks
// every parameter's gradient accumulator and all-reduces full buckets while the rest of backward still runs.
#include <algorithm>
#include <functional>
#include <iostream>
#include <unordered_set>
#include <utility>

#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/nn/module.h>

#include <spur/collectives.h>
#include <spur/error.h>
#include <spur/model.h>

#include "accelerator_core.h"
#include "compat/torch_compat.h"
#include "distributed/comm_hooks.h"
#include "distributed/fully_shard.h"
#include <spur/core/progress_file.h>

namespace spur::detail {
namespace {

// DDP's broadcast bucket for parameters and buffers.
constexpr size_t kBroadcastBucketBytes = 250u << 20;

// PyTorch DDP's _DDPSink: the outputs pass through one autograd node, so when the loss uses any of them the
// backward pass also walks the graphs behind the others (with undefined gradients). Their parameters' hooks
// then fire, and the Reducer, which prepare_for_backward told to expect every parameter reachable from any
// output, finishes every bucket instead of waiting for gradients that never come. Outputs are cloned, as DDP
// does, so that a caller's in-place change to one is not a change to a view made inside a custom function.
struct OutputSink : torch::autograd::Function<OutputSink> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, at::TensorList outputs) {
    ctx->set_materialize_grads(false);
    torch::autograd::variable_list passed;
    passed.reserve(outputs.size());
    for (const auto& output : outputs) passed.push_back(output.clone());
    return passed;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*,
                                                 torch::autograd::variable_list grads) {
    return grads;
  }
};

// What the refusals of the program's own loss.backward() / optimizer.step() (ReducerModelSync) tell it to do.
std::string own_steps_fix() {
  return ": keep what accelerator.prepare returns for the optimizer (`auto [net, opt] = accelerator.prepare(model, "
         "optimizer);`), then call accelerator.backward(loss) and opt.step() / opt.zero_grad() (docs/porting.md)";
}

// Sees every backward that reaches a prepared model's trained parameters: a post hook on each one's gradient
// accumulator, registered before the Reducer's (so it runs first on each parameter). When the program called its
// own module (`net.forward(x)`, `*model`, a function that takes `Net&`, a submodule) instead of the prepared
// model, nothing armed the gradient reduction in forward (PyTorch's DDP then silently trains each rank on its own
// gradients): the first gradient of such a backward arms it here instead, and the end of that backward tidies up
// (`end`), so the program's own calls are synchronised as the prepared call is.
class BackwardWatch : public std::enable_shared_from_this<BackwardWatch> {
 public:
  static std::shared_ptr<BackwardWatch> install(const std::vector<torch::Tensor>& trained, std::function<bool()> arm,
                                                std::function<void(bool)> end) {
    auto watch = std::make_shared<BackwardWatch>();
    watch->arm_ = std::move(arm);
    watch->end_ = std::move(end);
    std::weak_ptr<BackwardWatch> weak = watch;
    for (const auto& param : trained) {
      auto accumulator = torch::autograd::impl::grad_accumulator(param);
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [weak](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
            if (auto self = weak.lock()) self->gradient_arrived();
            return outputs;
          }));
      watch->accumulators_.push_back(std::make_shared<decltype(accumulator)>(std::move(accumulator)));
    }
    return watch;
  }
  /// A forward of the prepared model with gradients on: it armed the coming backward itself.
  void forward_ran() {
    forward_seen_ = true;
    in_backward_ = false;
  }

 private:
  void gradient_arrived() {
    if (in_backward_) return;
    in_backward_ = true;
    const bool armed_by_forward = std::exchange(forward_seen_, false);
    std::weak_ptr<BackwardWatch> weak = weak_from_this();
    // The flags go back when this backward ends, also when it fails (arm_ may refuse, a peer may die): autograd
    // destroys its final callbacks either way, and this guard with them. Queued before arm_, which may throw.
    std::shared_ptr<void> reset(nullptr, [weak](void*) {
      if (auto self = weak.lock()) self->backward_ended();
    });
    auto& engine = torch::autograd::Engine::get_default_engine();
    auto armed = std::make_shared<bool>(armed_by_forward);
    engine.queue_callback([weak, armed, armed_by_forward, reset] {
      auto self = weak.lock();
      if (!self) return;
      self->backward_ended();
      // Queued again, so it runs after the callbacks queued later in this backward (the Reducer's finish).
      // Whoever armed it (the prepared forward or the first gradient here), the backward ends the same way.
      if (*armed) {
        torch::autograd::Engine::get_default_engine().queue_callback([weak, unwrapped = !armed_by_forward] {
          if (auto again = weak.lock()) again->end_(unwrapped);
        });
      }
    });
    if (!armed_by_forward) *armed = arm_();
  }

  void backward_ended() {
    in_backward_ = false;
    forward_seen_ = false;
  }

  std::vector<std::shared_ptr<void>> accumulators_;  // autograd holds gradient accumulators only weakly
  std::function<bool()> arm_;
  std::function<void(bool)> end_;  // (whether the program's own forward ran: the buffers go to every rank then)
  bool forward_seen_ = false;
  bool in_backward_ = false;
};

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
    // The parameter and buffer counts first (one small gather): c10d's check below reads the first parameter
    // unguarded, and ranks that disagree on whether there is one would not even meet in the same collective. The
    // communication hook rides along: ranks that compress differently would sum unrelated bytes.
    const auto counts = detail::gather_tensor(core_->comm.get(), torch::tensor({static_cast<int64_t>(all_params.size()),
                                                                                static_cast<int64_t>(buffers_.size()),
                                                                                static_cast<int64_t>(core_->comm_hook)},
                                                                               torch::kLong)
                                                                     .unsqueeze(0));
    for (int64_t r = 1; r < counts.size(0); ++r) {
      if (counts[r][2].item<int64_t>() != counts[0][2].item<int64_t>()) {
        auto name = [&](int64_t row) {
          return std::string(comm_hook_name(static_cast<CommHook>(counts[row][2].item<int64_t>())));
        };
        std::string message = "prepare(model) on " + core_->comm->describe();
        message += ": rank 0 uses the " + name(0) + " communication hook and rank " + std::to_string(r);
        message += " the " + name(r) + " one (AcceleratorOptions::comm_hook, SPUR_DDP_COMM_HOOK): every rank must ";
        message += "use the same";
        throw Error(message);
      }
    }
    for (int64_t r = 1; r < counts.size(0); ++r) {
      if (!counts[r].equal(counts[0])) {
        throw Error("prepare(model) on " + core_->comm->describe() +
                    ": the model differs between ranks (every rank must build the same model): rank 0 has " +
                    std::to_string(counts[0][0].item<int64_t>()) + " parameter(s) and " +
                    std::to_string(counts[0][1].item<int64_t>()) + " buffer(s), rank " + std::to_string(r) + " " +
                    std::to_string(counts[r][0].item<int64_t>()) + " and " +
                    std::to_string(counts[r][1].item<int64_t>()));
      }
    }
    if (!all_params.empty()) {
      try {
        // Same shapes and dtypes of parameters on every rank, or a clear error now (not a hang later).
        c10d::verify_params_across_processes(group, all_params, c10::nullopt);
      } catch (const std::exception& e) {
        throw Error("prepare(model) on " + core_->comm->describe() +
                    ": the model differs between ranks (every rank must build the same model): " + e.what());
      }
    }
    try {
      // Every rank starts from rank 0's weights, frozen ones included.
      torch::NoGradGuard no_grad;
      // (Tensors without elements have nothing to send, and LibTorch 1.13's unflattening gives them back as shape
      // [0], which cannot be copied into a [0, 6] parameter: they stay out.)
      std::vector<torch::Tensor> state;
      for (const auto& tensor : all_params) {
        // Stage 3 sends each unit's trained parameters once they lie in its flat buffer, in place (fully_shard.cpp):
        // a bucket here would hold a copy of them while the model is still whole on every rank, the run's peak.
        if (core_->zero_stage >= 3 && tensor.requires_grad()) continue;
        if (tensor.numel() > 0) state.push_back(tensor);
      }
      for (const auto& tensor : buffers_) {
        if (tensor.numel() > 0) state.push_back(tensor);
      }
      if (!state.empty()) c10d::broadcast_coalesced(group, state, kBroadcastBucketBytes, 0);
    } catch (const std::exception& e) {
      core_->comm->fail("prepare(model) (broadcast from rank 0)", e);
    }
    if (trained.empty()) return;
    trained_ = trained;
    // (Before the Reducer's or ZeRO's hooks: on each parameter the watch's runs first.)
    watch_ = BackwardWatch::install(
        trained, [this] { return arm_unwrapped(); }, [this](bool unwrapped) { end_backward(unwrapped); });

    const auto& options = core_->options;
    const std::size_t first_cap =
        options.first_bucket_cap_bytes.value_or(core_->device.is_cuda() ? std::size_t{1} << 20 : std::size_t{4} << 20);
    if (core_->zero_stage > 0) {
      // ZeRO: the trained parameters move into one flat buffer that the optimizer's shards and the all-gather
      // address (zero.h). Stage 2 reduces gradients itself; stage 1 keeps DDP's Reducer.
      for (const auto& other : core_->zero_layouts) {
        for (const auto& p : trained) {
          if (other->find(p)) {
            throw Error("ZeRO stage " + std::to_string(core_->zero_stage) +
                        ": a parameter of this model belongs to a model prepared before (a shared submodule); "
                        "prepare the models as one module, or without ZeRO");
          }
        }
      }
      if (core_->zero_stage >= 3) {
        // Stage 3: one layout per fully_shard unit, gathered only around its uses (fully_shard.h).
        sharded_ = ShardedModel::create(core_, *module_);
        return;
      }
      auto layout = std::make_shared<ZeroLayout>(trained, core_->comm->size(), core_->comm->rank(),
                                                 static_cast<int>(core_->zero_stage));
      core_->zero_layouts.push_back(layout);
      if (core_->zero_stage >= 2) {
        // Each bucket's gradients exist twice while it is packed and reduced (the parameters' and the bucket's):
        // through shared memory, which moves 4 MiB chunks anyway, buckets of 4 MiB cost no extra collectives and
        // keep that overhead small; Gloo and NCCL keep DDP's sizes (each collective has a fixed cost there).
        const std::size_t cap = core_->comm->shared_memory()
                                    ? std::min(options.bucket_cap_bytes, ShmAllreduce::kChunkBytes)
                                    : options.bucket_cap_bytes;
        zero_gradients_ =
            ZeroGradients::create(layout, core_->comm, cap, std::min(first_cap, cap), options.find_unused_parameters);
        return;
      }
    }
    std::vector<bool> expect_sparse(trained.size(), false);
    auto [buckets, limits] =
        c10d::compute_bucket_assignment_by_size(trained, {first_cap, options.bucket_cap_bytes}, expect_sparse);
    reducer_ = compat::make_reducer(trained, std::move(buckets), std::move(limits), group, expect_sparse,
                                    static_cast<int64_t>(options.bucket_cap_bytes), options.find_unused_parameters,
                                    options.gradient_as_bucket_view, std::move(names), static_cast<int64_t>(first_cap));
    if (auto hook = make_comm_hook(core_->comm_hook, *core_->comm)) reducer_->register_comm_hook(std::move(hook));
  }

  std::optional<AutocastScope> begin_forward() override {
    if (core_->comm) {
      progress::Scope forward("forward (bucket and buffer sync)");  // a forward is activity, as every operation
      try {
        // After the first backward, buckets are re-cut in the order gradients actually became ready.
        if (reducer_ && torch::GradMode::is_enabled()) reducer_->rebuild_buckets();
        broadcast_buffers();
      } catch (const std::exception& e) {
        core_->comm->fail("forward (bucket and buffer sync)", e);
      }
      if (sharded_) sharded_->begin_forward();
    }
    autocast_seen_ = detail::autocast_scopes_opened() + 1;  // the prepared call opens one (when it has a precision)
    if (core_->precision == Precision::no) return std::nullopt;
    return std::optional<AutocastScope>(std::in_place, core_->device, core_->precision);
  }

  bool end_forward(std::vector<torch::Tensor>& outputs) override {
    const bool sync = torch::GradMode::is_enabled() && require_sync_;
    require_forward_param_sync_ = sync;
    if (watch_ && torch::GradMode::is_enabled()) watch_->forward_ran();
    if (sharded_) {
      sharded_->end_forward(torch::GradMode::is_enabled(), sync, outputs);
      return false;
    }
    if (zero_gradients_ && sync) {
      // Parameters that take no part are reduced as zeros at the end of backward: no sink needed.
      zero_gradients_->prepare_for_backward();
      return false;
    }
    if (!reducer_ || !sync) return false;
    const bool find_unused = core_->options.find_unused_parameters;
    if (find_unused && outputs.empty()) {
      throw Error(
          "find_unused_parameters needs the model's outputs, but forward returned no tensor Spur can "
          "see (a Tensor, or vectors, pairs and tuples of them)");
    }
    reducer_->prepare_for_backward(find_unused ? outputs : std::vector<torch::Tensor>{});
    if (!find_unused) return false;
    // Only outputs that autograd produced go through the sink (DDP leaves the others alone: pytorch#60733).
    std::vector<size_t> routed;
    std::vector<torch::Tensor> inputs;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (outputs[i].grad_fn()) {
        routed.push_back(i);
        inputs.push_back(outputs[i]);
      }
    }
    if (inputs.empty()) return false;
    auto passed = OutputSink::apply(at::TensorList(inputs));
    for (size_t i = 0; i < routed.size(); ++i) outputs[routed[i]] = std::move(passed[i]);
    return true;
  }

  bool converts_outputs() const override { return core_->precision != Precision::no; }
  void set_require_backward_grad_sync(bool sync) override { require_sync_ = sync; }
  bool require_backward_grad_sync() const override { return require_sync_; }

 private:
  // DDP's rule: buffers follow rank 0 on the first forward after a synchronised training forward.
  void broadcast_buffers() {
    if (!core_->options.broadcast_buffers || buffers_.empty() || !require_forward_param_sync_) return;
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> filled;  // (as in prepare: tensors without elements stay out)
    for (const auto& buffer : buffers_) {
      if (buffer.numel() > 0) filled.push_back(buffer);
    }
    if (!filled.empty()) c10d::broadcast_coalesced(core_->comm->group(), filled, kBroadcastBucketBytes, 0);
  }

  // The first gradient of a backward after the program ran its own module's forward (see BackwardWatch): arms
  // the reduction as end_forward would have. Returns whether it armed.
  bool arm_unwrapped() {
    if (core_->precision != Precision::no && detail::autocast_scopes_opened() == autocast_seen_ && !warned_autocast_) {
      warned_autocast_ = true;
      if (core_->state.is_main_process()) {
        std::cerr << "spur: warning: mixed_precision " << to_string(core_->precision)
                  << ": the model's forward ran without autocast (the program called its own module, not the "
                     "prepared model): call what accelerator.prepare returned, or open `auto autocast = "
                     "accelerator.autocast();` around forward and loss"
                  << std::endl;
      }
    }
    autocast_seen_ = detail::autocast_scopes_opened();
    refuse_own_training_steps();
    if (!require_sync_) return false;  // no_sync / accumulate's local micro-steps
    refuse_unstepped_zero();
    if (core_->options.find_unused_parameters) {
      throw Error(
          "find_unused_parameters: a backward reached a prepared model whose forward the program called itself "
          "(`net.forward(x)`, `*model`, a function that takes `Net&`): finding the unused parameters needs the "
          "outputs of the prepared model's call, `model(x)` on what accelerator.prepare returned (or a "
          "spur::PreparedModel<NetImpl>& parameter)");
    }
    require_forward_param_sync_ = true;
    if (sharded_) {
      sharded_->arm();
    } else if (zero_gradients_) {
      zero_gradients_->prepare_for_backward();
    } else if (reducer_) {
      reducer_->prepare_for_backward({});
    }
    return true;
  }
  // Where the program's own loss.backward() and optimizer.step() would train wrong without a word, say so: fp16
  // needs the loss scaled (accelerator.backward) and the step unscaled (the prepared optimizer); accumulation
  // needs the loss divided and steps skipped between syncs; under ZeRO the optimizer holds only this rank's shard
  // of the parameters, with gradients attached by the prepared step alone, so its own step() changes nothing.
  void refuse_own_training_steps() {
    if (!core_->in_backward && core_->scaler) {
      throw Error(
          "mixed_precision fp16: this backward is the program's own loss.backward(); fp16 scales the loss "
          "in accelerator.backward(loss) and unscales the gradients in the prepared optimizer's step" +
          own_steps_fix());
    }
    if (!core_->in_backward && core_->accumulation_steps > 1) {
      throw Error("gradient_accumulation_steps " + std::to_string(core_->accumulation_steps) +
                  ": this backward is the program's own loss.backward(); accumulating needs accelerator.backward("
                  "loss) inside `auto step = accelerator.accumulate(model);`, and the prepared optimizer, which "
                  "steps only when the gradients synchronise (the program's own step would step every micro-batch)" +
                  own_steps_fix());
    }
  }
  // ZeRO: a program whose optimizer steps go through Spur steps at least once every few synchronised backwards (a
  // GAN runs two or three, each counted once per prepared model it reaches); this many in a row with no prepared
  // step is a loop stepping its own optimizer.
  void refuse_unstepped_zero() {
    const int64_t most = 16 * static_cast<int64_t>(std::max<size_t>(1, core_->models.size()));
    if (core_->zero_stage > 0 && ++core_->unwrapped_backwards_since_step > most) {
      throw Error("ZeRO stage " + std::to_string(core_->zero_stage) + ": " + std::to_string(most) +
                  " backward passes and no step of a prepared optimizer: under ZeRO each rank's optimizer holds "
                  "its shard of the parameters, and only the prepared optimizer's step() gives it gradients and "
                  "shares the result, so the program's own optimizer.step() trains nothing" +
                  own_steps_fix());
    }
  }
  // The end of a synchronised backward, after the reduction finished, however it was armed: the buckets are
  // re-cut in the order the gradients came (once; the Reducer records that order until then), and gradients
  // become tensors of their own (below). After the program's own forward (`unwrapped`), rank 0's buffers
  // (BatchNorm's running statistics) go to every rank here, for the next forward: not at the backward's first
  // gradient, where they are still saved for it (BatchNorm's backward reads them, and an in-place broadcast then
  // fails it with "modified by an inplace operation").
  void end_backward(bool unwrapped) {
    if (unwrapped && !buffers_.empty()) {
      progress::Scope syncing("backward (buffer sync)");
      try {
        broadcast_buffers();
      } catch (const std::exception& e) {
        core_->comm->fail("backward (buffer sync)", e);
      }
    }
    if (!reducer_) return;
    try {
      reducer_->rebuild_buckets();
    } catch (const std::exception& e) {
      core_->comm->fail("backward (bucket rebuild)", e);
    }
    // The program's own optimizer may zero the gradients itself, and torch's C++ zero_grad detaches them in place
    // first, which a view into a Reducer bucket refuses ("Can't detach views in-place"). So each gradient becomes
    // a plain tensor over the same memory: nothing is copied, zero_(), detach_() and reset() all work, and the
    // Reducer still finds it an alias of its bucket next backward.
    if (!core_->options.gradient_as_bucket_view) return;
    for (auto& param : trained_) {
      auto& grad = param.mutable_grad();
      if (!grad.defined() || !grad.is_view()) continue;
      grad = at::empty({0}, grad.options()).set_(grad.storage(), grad.storage_offset(), grad.sizes(), grad.strides());
    }
  }

  std::shared_ptr<AcceleratorCore> core_;
  std::shared_ptr<torch::nn::Module> module_;
  std::vector<torch::Tensor> buffers_;
  std::unique_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<ZeroGradients> zero_gradients_;  // ZeRO stage 2, instead of the Reducer
  std::shared_ptr<ShardedModel> sharded_;          // ZeRO stage 3, instead of both
  std::vector<torch::Tensor> trained_;             // the trained parameters, as the Reducer holds them
  std::shared_ptr<BackwardWatch> watch_;           // distributed runs with trained parameters
  bool require_sync_ = true;
  bool require_forward_param_sync_ = true;
  uint64_t autocast_seen_ = 0;  // autocast_scopes_opened() at the last forward or backward seen
  bool warned_autocast_ = false;
};

}  // namespace

std::shared_ptr<ModelSync> make_model_sync(const std::shared_ptr<AcceleratorCore>& core,
                                           std::shared_ptr<torch::nn::Module> module) {
  if (const auto known = core->find_model(*module); known >= 0) return core->syncs[known];  // the same preparation
  const auto parameters = module->parameters(/*recurse=*/true);
  const torch::Tensor first = parameters.empty() ? torch::Tensor() : parameters.front();
  auto sync = std::make_shared<ReducerModelSync>(core, module);
  // Another module made where a prepared one was (that one is gone) is prepared as new, in its place.
  for (size_t i = 0; i < core->models.size(); ++i) {
    if (core->models[i].get() != module.get()) continue;
    core->models[i] = std::move(module);
    core->syncs[i] = sync;
    core->first_parameters[i] = first;
    return sync;
  }
  core->models.push_back(std::move(module));
  core->syncs.push_back(sync);
  core->first_parameters.push_back(first);
  return sync;
}

}  // namespace spur::detail
