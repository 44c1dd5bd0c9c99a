// SPDX-License-Identifier: Apache-2.0
// AcceleratorCore: the state an Accelerator shares with the models and optimizers it prepared (resolved
// options, device, process group, loss scaler, gradient-accumulation step). Internal; training thread only.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <torch/optim/optimizer.h>
#include <torch/optim/schedulers/lr_scheduler.h>
#include <torch/serialize/archive.h>
#include <torch/types.h>

#include <spur/accelerator.h>
#include <spur/options.h>
#include <spur/data.h>
#include <spur/model.h>
#include <spur/precision.h>
#include <spur/state.h>

#include <spur/core/comm_hook.h>

#include "distributed/communicator.h"
#include "distributed/zero.h"
#include "tracking/tracking_hub.h"

namespace spur::detail {

struct GradientState {
  bool sync_gradients = true;
  int64_t step = 0;
  bool end_of_dataloader = false;  // set by hand (set_end_of_dataloader); loaders signal through active_loaders
};

class AcceleratorCore {
 public:
  ProcessState state;
  AcceleratorOptions options;
  Precision precision = Precision::no;
  int64_t accumulation_steps = 1;
  torch::Device device{torch::kCPU};
  std::shared_ptr<Communicator> comm;  // null when the run has one process
  std::optional<GradScaler> scaler;    // fp16 only
  GradientState gradient;
  std::unique_ptr<TrackingHub> tracking;  // null: not recording on this process
  int64_t next_log_step = 0;
  std::vector<std::shared_ptr<torch::optim::Optimizer>> optimizers;
  // ZeRO (stage > 0 and more than one process): each prepared model's flat layout, and each prepared optimizer's
  // shard of them (indexed as `optimizers`; null for none).
  int64_t zero_stage = 0;
  // Stage 3's save_state writes each rank's shard of the weights (SHARDED_STATE_DICT) instead of gathering them.
  bool sharded_state_dict = false;
  // DDP's gradient communication hook (comm_hooks.h): compresses each bucket on its way (stages 0 and 1).
  CommHook comm_hook = CommHook::no;
  std::vector<std::shared_ptr<ZeroLayout>> zero_layouts;
  std::vector<std::shared_ptr<ZeroShards>> zero_shards;
  ZeroShards* shards_of(const torch::optim::Optimizer& optimizer) const {
    for (size_t i = 0; i < optimizers.size() && i < zero_shards.size(); ++i) {
      if (optimizers[i].get() == &optimizer) return zero_shards[i].get();
    }
    return nullptr;
  }
  bool step_was_skipped = false;  // the last optimizer step of any prepared optimizer
  // Per prepared optimizer (indexed as `optimizers`): its last step was skipped (fp16 inf/nan). A scheduler follows
  // its own optimizer's, as Accelerate's AcceleratedScheduler does.
  std::vector<char> steps_skipped;
  void set_step_skipped(const torch::optim::Optimizer& optimizer, bool skipped) {
    steps_skipped.resize(optimizers.size(), 0);
    for (size_t i = 0; i < optimizers.size(); ++i) {
      if (optimizers[i].get() == &optimizer) steps_skipped[i] = skipped ? 1 : 0;
    }
  }
  bool scaler_update_pending = false;  // an fp16 optimizer step happened; the scale moves at the next backward
  // backward() calls since gradients were last stepped or zeroed, and whether this micro-step had one: a
  // zero_grad() on a synchronising micro-step before its backward would discard accumulated gradients.
  int64_t backwards_since_step = 0;
  bool backward_this_micro_step = false;
  // Inside Accelerator::backward (the loss scaled and divided there), and how many synchronised backwards of the
  // program's own module ran since a prepared optimizer last stepped (model_sync.cpp refuses the program's own
  // optimizer where it trains wrong: fp16, accumulation, ZeRO).
  bool in_backward = false;
  int64_t unwrapped_backwards_since_step = 0;
  // Loaders being iterated, innermost last (an evaluation loop inside a training epoch): the end-of-data
  // signal and gather_for_metrics' cut come from the innermost one, as Accelerate's GradientState does.
  std::vector<LoaderState*> active_loaders;
  bool end_of_dataloader() const {
    return gradient.end_of_dataloader || (!active_loaders.empty() && active_loaders.back()->at_end);
  }
  // What save_state/load_state cover, in the order they were prepared or registered.
  std::vector<std::weak_ptr<LoaderState>> loaders;
  std::vector<std::shared_ptr<torch::nn::Module>> models;
  // The gradient sync of each prepared module (indexed as `models`): kept here, so that a module prepared in place
  // stays synchronised when the program keeps no PreparedModel. ~Accelerator clears it (each holds the core).
  std::vector<std::shared_ptr<ModelSync>> syncs;
  // The first parameter of each prepared module (indexed as `models`; undefined for none), held: a module made
  // again at a freed one's address (`Net net;` in a loop) is told apart from it by its own parameters.
  std::vector<torch::Tensor> first_parameters;
  /// The index of `module` in `models` (this very module: the same address and the same first parameter), or -1.
  int64_t find_model(const torch::nn::Module& module) const {
    const auto parameters = module.parameters(/*recurse=*/true);
    for (size_t i = 0; i < models.size() && i < syncs.size() && i < first_parameters.size(); ++i) {
      if (models[i].get() != &module) continue;
      const auto& known = first_parameters[i];
      if (parameters.empty() ? !known.defined() : known.defined() && known.is_same(parameters.front())) {
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  }
  std::vector<std::shared_ptr<torch::optim::LRScheduler>> schedulers;
  struct Custom {
    std::function<void(torch::serialize::OutputArchive&)> save;
    std::function<void(torch::serialize::InputArchive&)> load;
  };
  std::vector<Custom> custom;

  // Project layout; iteration counts up with each automatic checkpoint.
  ProjectConfiguration project;
  // Old automatic checkpoints being removed after a save (main process): joined before the next save and at the
  // end, so removal never blocks the training step that saved.
  std::thread removal;
  int64_t next_hook_id = 0;
  std::map<int64_t, SaveStatePreHook> save_hooks;
  std::map<int64_t, LoadStatePreHook> load_hooks;
  bool trigger = false;  // set_trigger / check_trigger

  ~AcceleratorCore() {
    if (removal.joinable()) removal.join();
  }
};

/// How many autocast scopes with a reduced precision were opened in this process so far (spur/precision.h).
uint64_t autocast_scopes_opened();

/// Clears `param`'s gradient as zero_grad does: drops it (set_to_none) or zeroes it in place, detached first.
void clear_gradient(torch::Tensor& param, bool set_to_none);

/// The gradient-sync half of PreparedModel (see spur/model.h), built by Accelerator::prepare.
std::shared_ptr<ModelSync> make_model_sync(const std::shared_ptr<AcceleratorCore>& core,
                                           std::shared_ptr<torch::nn::Module> module);

}  // namespace spur::detail
