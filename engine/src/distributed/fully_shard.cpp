// SPDX-License-Identifier: Apache-2.0
// ZeRO stage 3: spur::fully_shard's registry and calls (spur/fully_shard.h), and the units of a prepared model
// (fully_shard.h here).
#include "distributed/fully_shard.h"

#include <algorithm>
#include <functional>
#include <malloc.h>

#include <iostream>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <spur/collectives.h>
#include <spur/error.h>

#include "accelerator_core.h"

namespace spur::detail {

struct ShardSlot {
  FullyShardOptions options;
  std::weak_ptr<ShardedUnit> unit;  // set by prepare under stage 3
};

namespace {

// Modules wrapped by fully_shard, until prepare looks them up. Weak: a module's slot lives as long as its wrappers.
std::mutex registry_mutex;
std::unordered_map<const torch::nn::Module*, std::weak_ptr<ShardSlot>>& registry() {
  static std::unordered_map<const torch::nn::Module*, std::weak_ptr<ShardSlot>> slots;
  return slots;
}

std::shared_ptr<ShardSlot> slot_of(const torch::nn::Module& module) {
  std::lock_guard lock(registry_mutex);
  const auto it = registry().find(&module);
  return it == registry().end() ? nullptr : it->second.lock();
}

std::string joined(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

constexpr const char* kRootName = "the root (the model's parameters outside its fully_shard blocks)";

}  // namespace

std::shared_ptr<ShardSlot> register_fully_sharded(torch::nn::Module& module, const FullyShardOptions& options) {
  std::lock_guard lock(registry_mutex);
  auto& slots = registry();
  for (auto it = slots.begin(); it != slots.end();) it = it->second.expired() ? slots.erase(it) : std::next(it);
  if (auto existing = slots[&module].lock()) {
    existing->options = options;  // wrapped again: one unit, the latest options
    return existing;
  }
  auto slot = std::make_shared<ShardSlot>();
  slot->options = options;
  slots[&module] = slot;
  return slot;
}

ShardedCall::ShardedCall(const std::shared_ptr<ShardSlot>& slot) {
  if (!slot) return;
  auto unit = slot->unit.lock();
  if (!unit) return;  // not under stage 3: a plain call
  unit->before_forward();
  unit_ = std::move(unit);
}

ShardedCall::~ShardedCall() {
  if (unit_ && !finished_) static_cast<ShardedUnit*>(unit_.get())->forward_failed();
}

void ShardedCall::finish(const std::vector<torch::Tensor>& outputs) {
  finished_ = true;
  if (unit_) static_cast<ShardedUnit*>(unit_.get())->after_forward(outputs);
}

// --- a unit ------------------------------------------------------------------------------------------------------

ShardedUnit::ShardedUnit(std::string name, std::shared_ptr<ZeroLayout> layout, std::shared_ptr<ZeroGradients> gradients,
                         FullyShardOptions options, ShardedModel* model)
    : name_(std::move(name)),
      layout_(std::move(layout)),
      gradients_(std::move(gradients)),
      options_(options),
      model_(model) {}

void ShardedUnit::before_forward() {
  if (torch::GradMode::is_enabled() && ++calls > 1) {
    throw Error("ZeRO stage 3: " + name_ +
                " was called twice in one forward. Each fully_shard block is gathered and freed around one call, "
                "and its gradients reduced once (FSDP's rule too): wrap the module that calls it twice instead, or "
                "leave it unwrapped (its parameters then belong to the unit around it)");
  }
  try {
    layout_->unshard(model_->comm());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    model_->fail("forward (stage 3 gather of " + name_ + ")", e);
  }
}

void ShardedUnit::after_forward(const std::vector<torch::Tensor>& outputs) {
  const bool grad = torch::GradMode::is_enabled();
  bool hooked = false;
  if (grad) {
    std::weak_ptr<ShardedModel> model = model_->shared_from_this();
    for (const auto& output : outputs) {
      if (!output.requires_grad()) continue;
      hooked = true;
      // Runs before the node that made this output: the unit's backward is about to read its parameters.
      output.register_hook([this, model](const torch::Tensor&) {
        if (model.lock()) before_backward();
      });
    }
  }
  // A block whose outputs Spur cannot see (a struct of its own: collect_tensors knows tensors, and vectors, pairs
  // and tuples of them) is kept gathered until the end of backward: nothing would gather it again.
  if (!grad || (hooked && options_.reshard_after_forward)) layout_->reshard();
}

void ShardedUnit::forward_failed() noexcept {
  if (calls > 0) --calls;
  layout_->reshard();
}

void ShardedUnit::before_backward() {
  model_->backward_started(/*gradients=*/false);
  if (layout_->gathered()) return;
  try {
    layout_->unshard(model_->comm());
  } catch (const std::exception& e) {
    model_->fail("backward (stage 3 gather of " + name_ + ")", e);
  }
}

void ShardedUnit::gradient_ready() {
  model_->backward_started(/*gradients=*/true);
  if (++ready != layout_->entries().size()) return;
  // Every parameter of the unit has its gradient, so no node of this backward reads them any more.
  model_->unit_done(this);
  layout_->reshard();
}

// --- a model's units ---------------------------------------------------------------------------------------------

ShardedModel::ShardedModel(std::shared_ptr<AcceleratorCore> core, torch::nn::Module& module)
    : core_(std::move(core)), module_(&module) {}

std::shared_ptr<ShardedModel> ShardedModel::create(const std::shared_ptr<AcceleratorCore>& core,
                                                   torch::nn::Module& module) {
  auto self = std::make_shared<ShardedModel>(core, module);
  self->parameter_count_ = module.parameters(/*recurse=*/true).size();

  struct Unit {
    std::string name;
    std::shared_ptr<ShardSlot> slot;
    std::vector<torch::Tensor> params;
  };
  std::vector<Unit> units(1);
  units[0].name = kRootName;
  if (auto slot = slot_of(module)) units[0].slot = slot;  // fully_shard(model) itself: the root's options
  std::unordered_map<const void*, std::pair<size_t, std::string>> owner;  // trained parameter -> unit, name
  std::string mistake;  // told to every rank once they have compared layouts (a throw here could be one rank's)
  std::function<void(torch::nn::Module&, const std::string&, size_t)> visit =
      [&](torch::nn::Module& m, const std::string& prefix, size_t unit) {
        if (&m != &module) {
          if (auto slot = slot_of(m)) {
            // A block registered under two names is one unit.
            const auto it = std::find_if(units.begin(), units.end(), [&](const Unit& u) { return u.slot == slot; });
            if (it != units.end()) {
              unit = static_cast<size_t>(it - units.begin());
            } else {
              units.push_back({"block '" + prefix + "'", slot, {}});
              unit = units.size() - 1;
            }
          }
        }
        for (const auto& item : m.named_parameters(/*recurse=*/false)) {
          const auto& p = item.value();
          if (!p.requires_grad()) continue;  // frozen parameters stay whole on every rank
          const auto name = joined(prefix, item.key());
          const auto [it, inserted] = owner.emplace(p.unsafeGetTensorImpl(), std::pair{unit, name});
          if (inserted) {
            units[unit].params.push_back(p);
          } else if (it->second.first != unit && mistake.empty()) {
            mistake = "ZeRO stage 3: the parameter '" + name + "' (also '" + it->second.second + "') belongs to " +
                      units[unit].name + " and to " + units[it->second.first].name +
                      ": a weight tied across fully_shard units cannot be gathered and freed with each of them. Tie "
                      "weights within one unit (wrap the module that holds both, or leave them in the root)";
          }
        }
        for (const auto& child : m.named_children()) visit(*child.value(), joined(prefix, child.key()), unit);
      };
  visit(module, "", 0);

  // Every rank must cut the model into the same units: they gather and reduce together.
  std::string layout_text;
  for (const auto& unit : units) {
    int64_t numel = 0;
    for (const auto& p : unit.params) numel += p.numel();
    const bool reshard = !unit.slot || unit.slot->options.reshard_after_forward;
    layout_text += unit.name + ": " + std::to_string(unit.params.size()) + " parameter(s), " + std::to_string(numel) +
                   " element(s)" + (reshard ? "" : ", kept from forward to backward") + "\n";
  }
  const auto all = gather_bytes(core->comm.get(), mistake.empty() ? layout_text : "!" + mistake);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty() || all[r][0] != '!') continue;
    const bool mine = static_cast<int>(r) == core->comm->rank();
    throw Error(all[r].substr(1) + (mine ? "" : " (on rank " + std::to_string(r) + ")"));
  }
  if (units.size() > 1 && core->options.find_unused_parameters) {
    throw Error(
        "ZeRO stage 3 with fully_shard blocks does not run with find_unused_parameters yet: a block whose parameter "
        "got no gradient on one rank would reduce at the end of backward there and during it elsewhere, out of step "
        "with the blocks' gathers. Call every block in every forward, on every rank, without "
        "find_unused_parameters (a model without blocks, one unit, runs with it)");
  }
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] != all[0]) {
      throw Error("prepare(model) on " + core->comm->describe() +
                  ": the ranks wrap the model differently with spur::fully_shard (every rank must wrap the same "
                  "blocks). Rank 0's units:\n" +
                  all[0] + "rank " + std::to_string(r) + "'s:\n" + all[r]);
    }
  }
  if (units.size() == 1 && core->state.is_main_process()) {
    std::cerr << "spur: note: ZeRO stage 3: no block of the model is wrapped with spur::fully_shard, so the whole "
                 "model is one unit, gathered for each forward and freed after backward (the memory of stage 2 plus "
                 "that gathered copy at peak). Wrap its blocks to gather one at a time: docs/zero.md"
              << std::endl;
  }

  const auto& options = core->options;
  const std::size_t first_cap =
      options.first_bucket_cap_bytes.value_or(core->device.is_cuda() ? std::size_t{1} << 20 : std::size_t{4} << 20);
  const std::size_t cap = core->comm->shared_memory() ? std::min(options.bucket_cap_bytes, ShmAllreduce::kChunkBytes)
                                                      : options.bucket_cap_bytes;
  auto pool = std::make_shared<StoragePool>();
  for (auto& unit : units) {
    if (unit.params.empty()) continue;  // a block with frozen parameters only, or no root parameters
    auto layout = std::make_shared<ZeroLayout>(unit.params, core->comm->size(), core->comm->rank(), 3, pool);
    try {
      core->comm->broadcast_(layout->flat(), 0);  // rank 0's weights (model_sync.cpp left the trained ones to here)
    } catch (const std::exception& e) {
      core->comm->fail("prepare(model) (broadcast of " + unit.name + " from rank 0)", e);
    }
    layout->write_back();
    auto gradients =
        ZeroGradients::create(layout, core->comm, cap, std::min(first_cap, cap), options.find_unused_parameters);
    gradients->finish_by_owner();  // end_backward finishes every unit, in this order on every rank
    const FullyShardOptions unit_options = unit.slot ? unit.slot->options : FullyShardOptions{};
    auto sharded = std::make_shared<ShardedUnit>(unit.name, layout, gradients, unit_options, self.get());
    std::weak_ptr<ShardedUnit> weak = sharded;
    for (const auto& entry : layout->entries()) {
      // After ZeroGradients' hook on the same accumulator (registered first), which reduces what is ready.
      torch::autograd::impl::grad_accumulator(entry.param)
          ->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
              [weak](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
                if (auto u = weak.lock()) u->gradient_ready();
                return outputs;
              }));
    }
    const bool root = &unit == units.data();
    if (unit.slot && !root) unit.slot->unit = sharded;
    core->zero_layouts.push_back(layout);
    if (root) self->root_ = sharded.get();
    self->units_.push_back(std::move(sharded));
    layout->reshard();
  }
  // The whole model each rank built is freed now (only the shards are left): back to the system, or the heap would
  // keep it as the process's footprint (glibc keeps freed memory at the heap's top, and Spur asks it to).
  malloc_trim(0);
  return self;
}

Communicator& ShardedModel::comm() { return *core_->comm; }

void ShardedModel::fail(const std::string& operation, const std::exception& cause) {
  core_->comm->fail(operation, cause);
}

void ShardedModel::begin_forward() {
  if (module_->parameters(/*recurse=*/true).size() != parameter_count_) {
    throw Error("ZeRO stage 3: the model has " + std::to_string(module_->parameters(true).size()) +
                " parameter tensors, " + std::to_string(parameter_count_) +
                " when it was prepared: its parameters were changed after prepare (a module or parameter added or "
                "removed). Build the whole model before accelerator.prepare");
  }
  if (end_queued_) {
    // The last backward stopped part-way (it threw: out of memory, inside find_executable_batch_size) and its end
    // never ran: its units are freed and counted afresh, their reductions forgotten and disarmed.
    end_queued_ = false;
    gradients_seen_ = false;
    in_flight_ = nullptr;
    for (auto& unit : units_) {
      unit->ready = 0;
      unit->gradients().reset();
      unit->layout().reshard();
    }
  }
  for (auto& unit : units_) unit->calls = 0;
  if (root_) {
    try {
      root_->layout().unshard(comm());
    } catch (const std::exception& e) {
      fail("forward (stage 3 gather of the root)", e);
    }
  }
}

void ShardedModel::end_forward(bool grad, bool sync, const std::vector<torch::Tensor>& outputs) {
  if (!grad) {
    if (root_) root_->layout().reshard();
    return;
  }
  for (const auto& unit : units_) {
    if (unit.get() == root_ || unit->calls > 0) continue;
    throw Error("ZeRO stage 3: " + unit->name() +
                " was not called in this forward (its parameters would get no gradient, and the ranks would reduce "
                "out of step). Call every fully_shard block through its wrapper (`block(x)`, not "
                "`block->forward(x)`), in every forward, on every rank");
  }
  if (root_) {
    // The root stays gathered until its backward (as FSDP2 keeps its root); should anything free it meanwhile (a
    // forward without gradients, the end of another backward), the first gradient reaching the outputs gathers it.
    std::weak_ptr<ShardedModel> weak = shared_from_this();
    auto* root = root_;
    for (const auto& output : outputs) {
      if (!output.requires_grad()) continue;
      output.register_hook([weak, root](const torch::Tensor&) {
        if (weak.lock()) root->before_backward();
      });
    }
  }
  if (sync) arm();
}

void ShardedModel::arm() {
  for (auto& unit : units_) unit->gradients().prepare_for_backward();
}

void ShardedModel::backward_started(bool gradients) {
  gradients_seen_ = gradients_seen_ || gradients;
  if (end_queued_) return;
  end_queued_ = true;
  std::weak_ptr<ShardedModel> weak = shared_from_this();
  torch::autograd::Engine::get_default_engine().queue_callback([weak] {
    if (auto model = weak.lock()) model->end_backward();
  });
}

void ShardedModel::unit_done(ShardedUnit* unit) {
  // Through shared memory the unit's reduction already ran (synchronously): its buffers go now. Over Gloo or NCCL
  // it may still be in flight, overlapping the next unit's backward: the previous unit's is waited for instead.
  auto* done = core_->comm->shared_memory() ? unit : std::exchange(in_flight_, unit);
  if (!done || (done == unit && !core_->comm->shared_memory())) return;
  try {
    done->gradients().drain();
  } catch (const std::exception& e) {
    fail("backward (stage 3 reduction of " + done->name() + ")", e);
  }
}

void ShardedModel::end_backward() {
  in_flight_ = nullptr;
  if (!gradients_seen_) {
    // A pass over the outputs alone (autograd::grad, for a gradient penalty): it gathered blocks, which stay
    // gathered (a graph it made with create_graph may read them) and armed, for the backward still to come.
    end_queued_ = false;
    return;
  }
  try {
    for (auto& unit : units_) unit->gradients().finish_if_armed();  // the same order on every rank
  } catch (const Error&) {
    throw;  // end_queued_ stays set: the next forward starts clean
  } catch (const std::exception& e) {
    fail("backward (stage 3 reduction)", e);
  }
  for (auto& unit : units_) {
    unit->layout().reshard();
    unit->ready = 0;
    unit->calls = 0;
  }
  gradients_seen_ = false;
  end_queued_ = false;
}

Scope gather_full_parameters(AcceleratorCore& core, bool writeback) {
  std::vector<ZeroLayout*> all, gathered;
  for (const auto& layout : core.zero_layouts) {
    if (layout->stage() < 3) continue;
    if (!layout->gathered()) {
      try {
        layout->unshard(*core.comm);
      } catch (const std::exception& e) {
        for (auto* done : gathered) done->reshard();
        core.comm->fail("stage 3 gather of the whole model", e);
      }
      gathered.push_back(layout.get());
    }
    all.push_back(layout.get());
  }
  if (all.empty()) return Scope();
  // Pinned: a block called inside the scope (sampling on the main process alone) must not free its unit, which
  // would then have to be gathered again, a collective the other ranks are not in.
  for (auto* layout : all) layout->pin();
  return Scope::restoring([all = std::move(all), gathered = std::move(gathered), writeback] {
    for (auto* layout : all) {
      if (writeback) layout->write_back();
      layout->unpin();
    }
    for (auto* layout : gathered) layout->reshard();
  });
}

}  // namespace spur::detail
