// SPDX-License-Identifier: Apache-2.0
// spur::Accelerator: resolves options against the launcher's environment, picks the device, joins the
// process group, and implements the step-level calls (backward, accumulate, clipping, printing).
#include <spur/accelerator.h>

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include <torch/cuda.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/utils.h>

#include <spur/error.h>
#include <spur/system.h>

#include "accelerator_core.h"
#include "distributed/fully_shard.h"
#include "compat/torch_compat.h"
#include <spur/core/comm_hook.h>
#include <spur/core/progress_file.h>
#include <spur/core/zero_stage.h>

namespace spur {
namespace {

torch::Device pick_device(bool cpu, int64_t local_rank) {
  if (cpu || !torch::cuda::is_available()) return torch::Device(torch::kCPU);
  // (A c10::DeviceIndex, signed char, on LibTorch 2.x; a size_t on 1.13: never negative either way.)
  const auto count = static_cast<int64_t>(static_cast<unsigned char>(torch::cuda::device_count()));
  const auto index = static_cast<c10::DeviceIndex>(local_rank % count);
  compat::set_cuda_device(index);
  return torch::Device(torch::kCUDA, index);
}

void warn_if_slow_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
    const auto blas = blas_info();
    if (blas.slow) {
      std::cerr << "spur: warning: LibTorch runs on the reference BLAS (" << blas.path
                << "), which makes every step 16-20x slower: install libopenblas0-pthread\n";
    }
  });
}

// glibc returns big freed blocks to the OS (mmap above a threshold that starts at 128 KiB, heap trimming), and a
// training step frees and re-allocates the same activations and gradients every step: each one is faulted in
// again. Keeping them is ~10% of a CNN or transformer step here. Once per process; the user's own MALLOC_*
// settings win.
void keep_freed_memory(bool wanted) {
  static std::once_flag once;
  std::call_once(once, [wanted] {
    const char* choice = std::getenv("SPUR_CPU_MEMORY_CACHE");
    if (!wanted || (choice && std::string(choice) == "0")) return;
    for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES"}) {
      if (std::getenv(name)) return;
    }
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: blocks up to 32 MiB come from (and return to) the heap
    mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap keeps up to 1 GiB of free memory at its top
  });
}

}  // namespace

Accelerator::Accelerator(const AcceleratorOptions& options) : core_(std::make_shared<detail::AcceleratorCore>()) {
  keep_freed_memory(options.cpu_memory_cache);
  auto& core = *core_;
  core.state = ProcessState::from_environment();
  core.options = options;
  core.precision = options.mixed_precision.value_or(core.state.mixed_precision.value_or(Precision::no));
  core.accumulation_steps =
      options.gradient_accumulation_steps.value_or(core.state.gradient_accumulation_steps.value_or(1));
  if (core.accumulation_steps < 1) {
    throw Error("gradient_accumulation_steps must be at least 1, not " + std::to_string(core.accumulation_steps));
  }
  core.project = options.project_config;
  if (core.project.total_limit && *core.project.total_limit < 1) {
    throw Error("ProjectConfiguration::total_limit is " + std::to_string(*core.project.total_limit) +
                "; it must be at least 1 (leave it unset to keep every checkpoint)");
  }
  if (core.project.iteration < 0) {
    throw Error("ProjectConfiguration::iteration is " + std::to_string(core.project.iteration) +
                "; it must be 0 or more");
  }
  core.zero_stage = options.zero_stage.value_or(core.state.zero_stage.value_or(0));
  if (core.zero_stage < 0 || core.zero_stage > 3) {
    throw Error("AcceleratorOptions::zero_stage is " + std::to_string(core.zero_stage) + "; it must be 0, 1, 2 or 3");
  }
  if (options.state_dict_type) {
    const auto type = fsdp_state_dict_type(*options.state_dict_type);
    if (!type || *type == "LOCAL_STATE_DICT") {
      throw Error("AcceleratorOptions::state_dict_type is '" + *options.state_dict_type +
                  "'; it must be FULL_STATE_DICT or SHARDED_STATE_DICT");
    }
    core.sharded_state_dict = *type == "SHARDED_STATE_DICT";
  } else {
    core.sharded_state_dict = core.state.state_dict_type.value_or("FULL_STATE_DICT") == "SHARDED_STATE_DICT";
  }
  {
    std::string why;
    const auto hook = options.comm_hook ? parse_comm_hook(*options.comm_hook, &why)
                                        : parse_comm_hook(core.state.comm_hook.value_or("no"), &why);
    if (!hook) throw Error("AcceleratorOptions::comm_hook " + why);
    core.comm_hook = *hook;
    if (auto conflict = comm_hook_stage_conflict(core.comm_hook, static_cast<int>(core.zero_stage))) {
      throw Error(
          (options.comm_hook ? std::string("AcceleratorOptions::comm_hook") : std::string("SPUR_DDP_COMM_HOOK")) +
          " = " + comm_hook_name(core.comm_hook) + " with ZeRO stage " + std::to_string(core.zero_stage) +
          (core.state.zero_stage_source.empty() || options.zero_stage ? std::string()
                                                                      : " (" + core.state.zero_stage_source + ")") +
          ": " + *conflict);
    }
  }
  if (core.state.is_main_process() && !core.state.ignored_sharding_settings.empty()) {
    for (const auto& note : core.state.ignored_sharding_settings) std::cerr << "spur: warning: " << note << "\n";
  }
  core.device = pick_device(options.cpu.value_or(core.state.use_cpu.value_or(false)), core.state.local_rank);
  check_precision_supported(core.precision, core.device);
  if (core.precision == Precision::fp16) core.scaler.emplace(options.scaler);

  if (core.state.distributed()) {
    detail::Communicator::Config config;
    config.state = core.state;
    config.device = core.device;
    config.rendezvous_timeout =
        options.rendezvous_timeout.value_or(core.state.rendezvous_timeout.value_or(std::chrono::seconds(300)));
    config.collective_timeout =
        options.collective_timeout.value_or(core.state.collective_timeout.value_or(std::chrono::seconds(1800)));
    for (const auto& [name, value] : {std::pair{"rendezvous_timeout", config.rendezvous_timeout},
                                      std::pair{"collective_timeout", config.collective_timeout}}) {
      if (value.count() < 1 || value.count() > kMaxTimeoutSeconds) {
        throw Error(std::string("AcceleratorOptions::") + name + " is " + std::to_string(value.count()) +
                    " s; it must be between 1 and " + std::to_string(kMaxTimeoutSeconds) + " s");
      }
    }
    config.gloo_channels = options.gloo_channels;
    config.shared_memory_allreduce = options.shared_memory_allreduce;
    config.hierarchical_allreduce = options.hierarchical_allreduce;
    core.comm = detail::Communicator::join(config);
    if (core.zero_stage > 0 && core.scaler) {
      // One inf/nan verdict for all shards: every rank skips the step, or none does.
      core.scaler->set_found_inf_reduction([comm = core.comm](torch::Tensor& found_inf) {
        // On the process group's device (NCCL takes CUDA tensors only).
        auto flag = found_inf.to(comm->device(), torch::kFloat).reshape({1}).contiguous();
        comm->allreduce_(flag);
        found_inf.copy_(flag.clamp_max(1).to(found_inf.device()).reshape(found_inf.sizes()));
      });
      // Gradients are unscaled where they are: the shard slices, attached first (also when the user calls the
      // scaler's unscale_ by hand before step()).
      core.scaler->set_before_unscale([core = &core](torch::optim::Optimizer& optimizer) {
        if (auto* shards = core->shards_of(optimizer)) shards->attach_gradients();
      });
    }
  }
  if (core.state.is_main_process()) warn_if_slow_blas();
}

Accelerator::~Accelerator() {
  const bool failed = std::uncaught_exceptions() > 0;
  // Leaving by an exception: the run failed. Records already logged are still written out.
  if (core_->tracking) core_->tracking->finish(failed ? "failed" : "finished");
  // A rank that leaves while others still run collectives: theirs then say that it left, not that it died.
  if (core_->comm && !failed) core_->comm->mark_left();
  // The gradient syncs hold the core: the models prepared in place stop being synchronised with this Accelerator.
  core_->syncs.clear();
}

const ProcessState& Accelerator::state() const { return core_->state; }
int64_t Accelerator::process_index() const { return core_->state.rank; }
int64_t Accelerator::local_process_index() const { return core_->state.local_rank; }
int64_t Accelerator::num_processes() const { return core_->state.world_size; }
bool Accelerator::is_main_process() const { return core_->state.is_main_process(); }
bool Accelerator::is_local_main_process() const { return core_->state.is_local_main_process(); }
bool Accelerator::distributed() const { return core_->comm != nullptr; }
std::string Accelerator::gradient_transport() const {
  if (!core_->comm) return "none";
  if (core_->comm->shared_memory()) return "shared memory";
  if (core_->comm->hierarchical()) return "shared memory + gloo";
  return core_->device.is_cuda() ? "nccl" : "gloo";
}
torch::Device Accelerator::device() const { return core_->device; }
Precision Accelerator::mixed_precision() const { return core_->precision; }
int64_t Accelerator::gradient_accumulation_steps() const { return core_->accumulation_steps; }
detail::Communicator* Accelerator::comm() const { return core_->comm.get(); }

void Accelerator::wait_for_everyone() {
  progress::Scope waiting("wait_for_everyone");
  if (core_->comm) core_->comm->barrier();
}

void Accelerator::print_line(const std::string& line) const {
  std::cout << line << std::endl;  // flushed: launchers and consoles show lines as they come
}

Scope Accelerator::summon_full_params(bool writeback) { return detail::gather_full_parameters(*core_, writeback); }

Scope Accelerator::main_process_first() {
  if (!is_main_process()) wait_for_everyone();
  return Scope([this] {
    if (is_main_process()) wait_for_everyone();
  });
}

Scope Accelerator::local_main_process_first() {
  if (!is_local_main_process()) wait_for_everyone();
  return Scope([this] {
    if (is_local_main_process()) wait_for_everyone();
  });
}

void Accelerator::set_seed(uint64_t seed, bool device_specific) {
  // torch::manual_seed seeds the CPU generator and every CUDA device's.
  torch::manual_seed(seed + (device_specific ? static_cast<uint64_t>(process_index()) : 0));
}

std::shared_ptr<detail::ModelSync> Accelerator::make_model_sync(std::shared_ptr<torch::nn::Module> module) {
  return detail::make_model_sync(core_, std::move(module));
}

detail::ModelSync& Accelerator::sync_of_module(const torch::nn::Module& module) const {
  if (const auto known = core_->find_model(module); known >= 0) return *core_->syncs[known];
  throw Error("no_sync/accumulate: this module (" + module.name() +
              ") was not prepared by this Accelerator: pass it to accelerator.prepare first");
}

PreparedOptimizer Accelerator::prepare_optimizer(std::shared_ptr<torch::optim::Optimizer> optimizer) {
  std::shared_ptr<detail::ZeroShards> shards;
  if (!core_->zero_layouts.empty()) {
    shards = std::make_shared<detail::ZeroShards>(*optimizer, core_->zero_layouts, core_->comm);
  } else if (core_->zero_stage > 0 && core_->comm) {
    throw Error("ZeRO stage " + std::to_string(core_->zero_stage) +
                ": prepare the model first (before the optimizer, or listed before it in the same prepare call)");
  }
  PreparedOptimizer prepared(std::move(optimizer), core_);
  core_->zero_shards.resize(core_->optimizers.size());
  core_->zero_shards.back() = std::move(shards);
  return prepared;
}

void Accelerator::backward(const torch::Tensor& loss, bool retain_graph) {
  progress::Scope backward("backward");  // DDP's gradient all-reduce runs inside
  // The loss scale moves once per step, after every prepared optimizer stepped with the same scale.
  if (core_->scaler && core_->scaler_update_pending) {
    core_->scaler->update();
    core_->scaler_update_pending = false;
  }
  core_->backwards_since_step += 1;
  core_->backward_this_micro_step = true;
  struct InBackward {
    bool& flag;
    explicit InBackward(bool& f) : flag(f) { flag = true; }
    ~InBackward() { flag = false; }
  } in_backward(core_->in_backward);
  auto scaled = loss;
  if (core_->accumulation_steps > 1) scaled = scaled / static_cast<double>(core_->accumulation_steps);
  if (core_->scaler) scaled = core_->scaler->scale(scaled);
  if (!core_->comm) {
    scaled.backward({}, retain_graph);
    return;
  }
  try {
    scaled.backward({}, retain_graph);
  } catch (const std::exception& e) {
    // The reducer's all-reduce runs inside backward: a peer that died surfaces here as a socket error.
    if (detail::Communicator::is_communication_error(e)) core_->comm->fail("backward (gradient all-reduce)", e);
    throw;
  }
}

AutocastScope Accelerator::autocast() const { return AutocastScope(core_->device, core_->precision); }

void Accelerator::begin_accumulation_step() {
  core_->backward_this_micro_step = false;
  auto& gradient = core_->gradient;
  if (core_->end_of_dataloader()) {
    gradient.step = 0;
    gradient.sync_gradients = true;
  } else {
    gradient.step += 1;
    gradient.sync_gradients = gradient.step % core_->accumulation_steps == 0;
  }
}

bool Accelerator::sync_gradients() const { return core_->gradient.sync_gradients; }

bool Accelerator::sync_each_batch() const { return core_->options.sync_each_batch; }

void Accelerator::set_end_of_dataloader(bool end) { core_->gradient.end_of_dataloader = end; }

Scope Accelerator::no_sync_models(std::vector<detail::ModelSync*> models) {
  std::vector<bool> previous;
  previous.reserve(models.size());
  for (auto* model : models) {
    previous.push_back(model->require_backward_grad_sync());
    model->set_require_backward_grad_sync(false);
  }
  // Restoring: an exception inside the block (out of memory on a micro-step) must not leave sync off.
  return Scope::restoring([models = std::move(models), previous = std::move(previous)] {
    for (size_t i = 0; i < models.size(); ++i) models[i]->set_require_backward_grad_sync(previous[i]);
  });
}

void Accelerator::unscale_gradients() {
  if (!core_->gradient.sync_gradients) return;
  for (const auto& shards : core_->zero_shards) {
    if (shards) shards->attach_gradients();
  }
  if (!core_->scaler) return;
  for (const auto& optimizer : core_->optimizers) {
    if (!core_->scaler->unscaled(*optimizer)) core_->scaler->unscale_(*optimizer);
  }
}

torch::Tensor Accelerator::clip_grad_norm_(const std::vector<torch::Tensor>& parameters, double max_norm,
                                           double norm_type) {
  if (!core_->gradient.sync_gradients) {
    // A micro-step holds a partial sum: report its norm (unscaled) but clip only the full gradient.
    std::vector<torch::Tensor> norms;
    for (const auto& p : parameters) {
      if (p.grad().defined()) norms.push_back(p.grad().detach().norm(norm_type));
    }
    if (norms.empty()) return torch::zeros({});
    auto total = torch::stack(norms).norm(norm_type);
    return core_->scaler ? total / core_->scaler->get_scale() : total;
  }
  unscale_gradients();
  if (core_->zero_stage > 0 && core_->comm && !core_->zero_layouts.empty()) {
    return clip_sharded_grad_norm(parameters, max_norm, norm_type);
  }
  // Zero-element gradients add nothing to any norm, and LibTorch's infinity norm fails on them (max() of nothing):
  // left out, the result is the same to the bit.
  std::vector<torch::Tensor> counted;
  counted.reserve(parameters.size());
  for (const auto& p : parameters) {
    if (!p.grad().defined() || p.grad().numel() > 0) counted.push_back(p);
  }
  return torch::tensor(torch::nn::utils::clip_grad_norm_(counted, max_norm, norm_type));
}

namespace {

// A listed parameter's gradient under ZeRO, as clipping sees it: `counted` is what this rank adds to the total
// norm (its owned range of the reduced gradient, so that the ranks' parts add up to the whole once), `scaled` what
// it scales or clamps. Every trained parameter of a prepared model counts, whether or not an optimizer holds it,
// as under DDP.
struct ShardedGrad {
  torch::Tensor counted;  // undefined: nothing to add on this rank
  torch::Tensor scaled;
  int times = 1;  // a tensor listed twice (a tied weight under two names) counts and is scaled twice, as torch does
};

std::vector<ShardedGrad> sharded_grads(detail::AcceleratorCore& core, const std::vector<torch::Tensor>& parameters) {
  std::vector<std::pair<torch::Tensor, int>> listed;
  std::unordered_map<const void*, size_t> index;
  for (const auto& p : parameters) {
    const auto [it, fresh] = index.emplace(p.unsafeGetTensorImpl(), listed.size());
    if (fresh) {
      listed.emplace_back(p, 1);
    } else {
      ++listed[it->second].second;
    }
  }
  std::vector<ShardedGrad> grads;
  for (const auto& [param, times] : listed) {
    detail::ZeroLayout* layout = nullptr;
    const detail::ZeroLayout::Entry* entry = nullptr;
    for (const auto& candidate : core.zero_layouts) {
      if ((entry = candidate->find(param))) {
        layout = candidate.get();
        break;
      }
    }
    if (!layout) {
      // Not a trained parameter of a prepared model: its gradient is this rank's own, taken as the same on every
      // rank (counted once, on rank 0; scaled everywhere).
      const auto& grad = param.grad();
      if (!grad.defined() || detail::ZeroLayout::is_marker(param, grad)) continue;
      grads.push_back({core.comm->rank() == 0 ? grad : torch::Tensor(), grad, times});
      continue;
    }
    const auto k = static_cast<size_t>(entry - layout->entries().data());
    const int64_t lo = std::max(entry->offset, layout->owned_begin());
    const int64_t hi = std::min(entry->offset + entry->numel, layout->owned_end());
    if (layout->stage() >= 2) {
      layout->refresh(k);
      if (!layout->entry_has_grad[k] || lo >= hi) continue;
      auto part = layout->grad_shard().narrow(0, lo - layout->owned_begin(), hi - lo);
      grads.push_back({part, part, times});
    } else {
      // Stage 1: every rank holds the whole reduced gradient; it counts its owned range and scales all of it.
      auto& full = param.mutable_grad();
      if (!full.defined()) continue;
      if (!full.is_contiguous()) full = full.contiguous();
      auto counted = lo < hi ? full.view({-1}).narrow(0, lo - entry->offset, hi - lo) : torch::Tensor();
      grads.push_back({counted, full, times});
    }
  }
  return grads;
}

}  // namespace

// ZeRO: each rank holds the reduced gradient of its shard only; the norm is combined over the ranks (sum of p-th
// powers, or the maximum), then each rank scales its shard, as clip_grad_norm_ scales the whole.
torch::Tensor Accelerator::clip_sharded_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm,
                                                  double norm_type) {
  auto grads = sharded_grads(*core_, parameters);
  // As torch's clip_grad_norm_: p-norms, the infinity norm (a maximum), and the 0 "norm" (non-zero elements).
  const bool infinity = std::isinf(norm_type);
  double local = 0;
  for (const auto& grad : grads) {
    if (!grad.counted.defined() || grad.counted.numel() == 0) continue;
    const auto part = grad.counted.detach().to(torch::kDouble).abs();
    if (infinity) {
      local = std::max(local, part.max().item<double>());
    } else if (norm_type == 0) {
      local += grad.times * part.ne(0).sum().item<double>();
    } else {
      local += grad.times * part.pow(norm_type).sum().item<double>();
    }
  }
  // The collectives run on the process group's device (NCCL takes CUDA tensors only).
  const auto device = core_->comm->device();
  double total = 0;
  if (infinity) {
    for (const auto& value : core_->comm->allgather(torch::tensor({local}, torch::kDouble).to(device))) {
      total = std::max(total, value.item<double>());
    }
  } else {
    auto sum = torch::tensor({local}, torch::kDouble).to(device);
    core_->comm->allreduce_(sum);
    total = norm_type == 0 ? sum.item<double>() : std::pow(sum.item<double>(), 1.0 / norm_type);
  }
  const double coefficient = max_norm / (total + 1e-6);
  if (coefficient < 1 || std::isnan(coefficient)) {  // a NaN norm makes the gradients NaN, as torch's does
    torch::NoGradGuard no_grad;
    for (auto& grad : grads) grad.scaled.mul_(std::pow(coefficient, grad.times));
  }
  return torch::tensor(total, torch::kFloat);
}

void Accelerator::clip_grad_value_(const std::vector<torch::Tensor>& parameters, double clip_value) {
  if (!core_->gradient.sync_gradients) return;  // a micro-step holds a partial (maybe scaled) sum: clip the full one
  unscale_gradients();
  if (core_->zero_stage > 0 && core_->comm && !core_->zero_layouts.empty()) {
    torch::NoGradGuard no_grad;
    for (auto& grad : sharded_grads(*core_, parameters)) grad.scaled.clamp_(-clip_value, clip_value);
    return;
  }
  torch::nn::utils::clip_grad_value_(parameters, clip_value);
}

bool Accelerator::optimizer_step_was_skipped() const { return core_->step_was_skipped; }

GradScaler* Accelerator::scaler() { return core_->scaler ? &*core_->scaler : nullptr; }

sharding::Layout Accelerator::data_layout() const {
  sharding::Layout layout{num_processes(), core_->options.split_batches, core_->options.even_batches};
  return layout;
}

void Accelerator::register_loader(const std::shared_ptr<detail::LoaderState>& loader) {
  sharding::check(loader->options.batch_size, loader->layout);
  auto comm = core_->comm;  // shared: hooks may outlive this Accelerator
  if (comm) {
    // Every rank shuffles (and seeds its per-batch generators) with rank 0's seed, whatever each one seeded
    // torch with.
    auto seed = torch::tensor({static_cast<int64_t>(*loader->options.seed)}, torch::kLong);
    seed = detail::broadcast_tensor(comm.get(), seed, 0);
    loader->reseed(static_cast<uint64_t>(seed.item<int64_t>()));
  }
  if (comm && loader->order_from_rank0) {
    // A torch::data sampler draws from each rank's own default generator: every rank drew (each generator moved
    // as it would without Spur), and rank 0's order is the one sharded, as Accelerate synchronises a sampler's
    // generator from rank 0.
    loader->agree_order = [comm](std::vector<int64_t>& order) {
      auto mine = torch::from_blob(order.data(), {static_cast<int64_t>(order.size())}, torch::kLong).clone();
      auto agreed = detail::broadcast_tensor(comm.get(), mine, 0);
      if (agreed.numel() != static_cast<int64_t>(order.size())) {
        throw Error("data loader: rank 0's sampler gave " + std::to_string(agreed.numel()) + " indices, this rank's " +
                    std::to_string(order.size()) + " (every rank must load the same dataset)");
      }
      std::copy_n(agreed.contiguous().data_ptr<int64_t>(), agreed.numel(), order.begin());
    };
  } else if (comm && loader->user_sampler) {
    // Built-in samplers agree by construction (rank 0's seed); a user's sampler is checked, one 8-byte
    // collective per epoch, so a sampler seeded differently per rank is an error instead of silent overlap.
    loader->check_order = [comm](const std::vector<int64_t>& order) {
      uint64_t hash = 1469598103934665603ull;
      for (const int64_t index : order) hash = (hash ^ static_cast<uint64_t>(index)) * 1099511628211ull;
      auto all = detail::gather_tensor(comm.get(), torch::tensor({static_cast<int64_t>(hash)}, torch::kLong));
      for (int64_t r = 1; r < all.size(0); ++r) {
        if (all[r].item<int64_t>() != all[0].item<int64_t>()) {
          throw Error("data loader: rank " + std::to_string(r) +
                      "'s sampler gives another order than rank 0's "
                      "for this epoch; a sampler must be seeded the same on every rank (seed + epoch)");
        }
      }
    };
  }
  std::weak_ptr<detail::AcceleratorCore> weak = core_;
  loader->on_active = [weak](detail::LoaderState* state, bool active) {
    auto core = weak.lock();
    if (!core) return;
    auto& stack = core->active_loaders;
    stack.erase(std::remove(stack.begin(), stack.end(), state), stack.end());
    if (active) stack.push_back(state);
  };
  loader->device = core_->device;
  auto& loaders = core_->loaders;
  loaders.erase(std::remove_if(loaders.begin(), loaders.end(), [](const auto& w) { return w.expired(); }),
                loaders.end());
  loaders.push_back(loader);
}

int64_t Accelerator::metrics_keep() const {
  const auto& active = core_->active_loaders;
  return !active.empty() && active.back()->at_end ? active.back()->remainder : -1;
}

}  // namespace spur
