// SPDX-License-Identifier: Apache-2.0
// Accelerator::save_state / load_state / save_model. Layout of a state directory:
//   model.safetensors, model_1.safetensors...   weights (tied tensors once; the others named in metadata)
//   model_rank<r>.safetensors...                instead, under ZeRO stage 3 with SHARDED_STATE_DICT: each rank's own
//                                               range of the weights (core/include/spur/core/checkpoint_merge.h)
//   optimizer.pt, scheduler.pt, scaler.pt, custom_checkpoint_<i>.pt   LibTorch archives (main process)
//   optimizer_rank<r>.pt...                     instead of optimizer.pt under ZeRO: each rank's shard of its state
//   random_states_<rank>.pt                     each rank's RNG states
//   gradients_<rank>.safetensors                saved mid-accumulation: each rank's gradients so far
//   spur_state.json                             world size, loader positions, counters, every file's size and hash
// Accelerate's names, where the content is what Accelerate writes (safetensors); LibTorch archives are .pt where
// Accelerate writes Python pickles (.bin, .pkl): Spur's state directories are for Spur runs.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <unordered_map>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <torch/nn/module.h>

#include <spur/accelerator.h>
#include <spur/checkpoint.h>
#include <spur/error.h>
#include <spur/json.h>
#include <spur/version.h>

#include "accelerator_core.h"
#include "checkpoint/project.h"
#include "distributed/fully_shard.h"
#include <spur/core/checkpoint_merge.h>
#include <spur/core/checkpoint_state.h>
#include "compat/torch_compat.h"
#include <spur/core/progress_file.h>
#include <spur/core/safetensors_index.h>

namespace spur {
namespace {

namespace fs = std::filesystem;
constexpr const char* kStateFile = "spur_state.json";

// A module's tensors once each, under their first name; later names of the same tensor are aliases.
struct StateDict {
  NamedTensors tensors;
  std::vector<std::pair<std::string, std::string>> aliases;  // alias -> name stored
};

StateDict dedupe(const NamedTensors& named) {
  StateDict dict;
  std::unordered_map<const void*, std::string> seen;
  for (const auto& [name, t] : named) {
    if (!t.defined()) continue;
    auto [it, fresh] = seen.emplace(t.unsafeGetTensorImpl(), name);
    if (fresh) {
      dict.tensors.emplace_back(name, t);
    } else {
      dict.aliases.emplace_back(name, it->second);
    }
  }
  return dict;
}

StateDict state_dict(const torch::nn::Module& module) {
  NamedTensors named;
  for (const auto& item : module.named_parameters(true)) named.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) named.emplace_back(item.key(), item.value());
  return dedupe(named);
}

std::string aliases_text(const StateDict& dict) {
  std::string text;
  for (const auto& [alias, name] : dict.aliases) {
    if (!text.empty()) text.push_back(',');
    text.append(alias).append("=").append(name);
  }
  return text;
}

// Copies `loaded` into the module's tensors by name, checking that each exists with the same shape and dtype.
void assign(torch::nn::Module& module, const std::map<std::string, torch::Tensor>& loaded, const std::string& file) {
  const auto dict = state_dict(module);
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (const auto& [name, tensor] : dict.tensors) {
    const auto it = loaded.find(name);
    if (it == loaded.end()) throw Error("checkpoint " + file + " has no tensor '" + name + "' that the model has");
    if (it->second.sizes() != tensor.sizes() || it->second.scalar_type() != tensor.scalar_type()) {
      std::ostringstream why;
      why << "checkpoint " << file << ": tensor '" << name << "' is " << it->second.sizes() << " "
          << it->second.scalar_type() << ", the model's is " << tensor.sizes() << " " << tensor.scalar_type();
      throw Error(why.str());
    }
    tensor.copy_(it->second);
    used.insert(name);
  }
  for (const auto& [name, tensor] : loaded) {
    if (!used.contains(name)) throw Error("checkpoint " + file + " holds tensor '" + name + "', which the model lacks");
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("checkpoint file " + path + " is missing or unreadable");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::pair<int64_t, uint64_t> write_archive(const std::string& path, torch::serialize::OutputArchive& archive) {
  std::ostringstream bytes;
  archive.save_to(bytes);
  return detail::write_file(path, bytes.str());
}

torch::serialize::InputArchive read_archive(const std::string& path, torch::Device device) {
  torch::serialize::InputArchive archive;
  try {
    archive.load_from(path, device);
  } catch (const std::exception& e) {
    throw Error("checkpoint file " + path + " cannot be read: " + e.what());
  }
  return archive;
}

torch::Tensor read_tensor(torch::serialize::InputArchive& archive, const std::string& key, const std::string& path) {
  torch::Tensor t;
  if (!archive.try_read(key, t)) throw Error("checkpoint file " + path + " has no entry '" + key + "'");
  return t;
}

std::string model_file(size_t i) { return detail::checkpoint_model_file(i); }
std::string indexed(const std::string& stem, size_t i) {
  std::string name = stem;
  if (i > 0) name.append("_").append(std::to_string(i));
  return name.append(".pt");
}

// ZeRO: each rank's shard of optimizer i's state (optimizer_rank1.pt, optimizer_2_rank1.pt...).
std::string optimizer_shard_file(size_t i, int64_t rank) {
  std::string name = indexed("optimizer", i);
  return name.insert(name.size() - 3, "_rank" + std::to_string(rank));
}

bool sharded(const detail::AcceleratorCore& core, size_t optimizer) {
  return optimizer < core.zero_shards.size() && core.zero_shards[optimizer] != nullptr;
}

// Stage 2 with sync_each_batch reduces every micro-step into the shard: a save before the optimizer steps would
// lose what the shard holds (parameters' own gradients are what a mid-accumulation checkpoint keeps).
bool mid_accumulation_refused(const detail::AcceleratorCore& core) {
  return core.zero_stage >= 2 && !core.zero_layouts.empty() && core.options.sync_each_batch &&
         core.accumulation_steps > 1 && core.gradient.step % core.accumulation_steps != 0;
}

// 0 unless some optimizer's state is sharded (then the run's ZeRO stage).
int64_t sharded_stage(const detail::AcceleratorCore& core) {
  for (size_t i = 0; i < core.optimizers.size(); ++i) {
    if (sharded(core, i)) return core.zero_stage;
  }
  return 0;
}

// Main process, once a checkpoint or model folder is complete: its files listed with the run (the Studio's run
// overview shows them), when this process records the run. The folder's size is summed from the disk.
void record_file(detail::AcceleratorCore& core, const char* kind, const std::string& dir) {
  if (!core.tracking) return;
  std::error_code error;
  const fs::path absolute = fs::absolute(dir, error);
  int64_t bytes = 0;
  for (auto it = fs::recursive_directory_iterator(absolute, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) bytes += static_cast<int64_t>(it->file_size(size_error));
  }
  FileRecord file;
  file.kind = kind;
  file.path = absolute.lexically_normal().string();
  file.bytes = bytes;
  core.tracking->log_file(std::move(file));
}

}  // namespace

PreparedScheduler Accelerator::prepare_scheduler(std::shared_ptr<torch::optim::LRScheduler> scheduler) {
  return PreparedScheduler(std::move(scheduler), core_);
}

void Accelerator::register_for_checkpointing(std::function<void(torch::serialize::OutputArchive&)> save,
                                             std::function<void(torch::serialize::InputArchive&)> load) {
  core_->custom.push_back({std::move(save), std::move(load)});
}

namespace {

// Every rank learns whether any rank failed; the failing ranks report their own error, the others name it a
// peer's. Keeps the ranks' collectives in step when a caller catches the error and carries on.
void agree(detail::Communicator* comm, const std::string& failure, const std::string& what) {
  bool any = !failure.empty();
  if (comm) {
    auto flag = torch::tensor({static_cast<int64_t>(any)}, torch::kLong);
    any = detail::reduce_tensor(comm, flag, Reduction::sum).item<int64_t>() > 0;
  }
  if (!failure.empty()) throw Error(failure);
  if (any) throw Error(what + " failed on another rank (its output names the cause)");
}

template <typename F>
std::string attempt(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

// The saved view of a loader: at the end of an epoch (its last batch out), the next epoch from its start.
detail::CheckpointLoader loader_record(const detail::LoaderState& loader) {
  const bool done = loader.at_end;
  detail::CheckpointLoader record;
  record.epoch = done ? loader.epoch + 1 : loader.epoch;
  record.position = done ? 0 : loader.position;
  record.stream = loader.stream;
  record.dataset_size = loader.dataset_size;
  // The shuffling (and per-batch generator) seed: a run seeded from a clock resumes with the saved order.
  record.seed = loader.options.seed;
  return record;
}

std::string gradients_file(int64_t rank) { return "gradients_" + std::to_string(rank) + ".safetensors"; }

// Stage 3: the layout holding `tensor` and its entry there; nulls for a buffer or a parameter nothing shards.
std::pair<detail::ZeroLayout*, const detail::ZeroLayout::Entry*> stage3_entry(const detail::AcceleratorCore& core,
                                                                              const torch::Tensor& tensor) {
  for (const auto& layout : core.zero_layouts) {
    if (layout->stage() < 3) continue;
    if (const auto* entry = layout->find(tensor)) return {layout.get(), entry};
  }
  return {nullptr, nullptr};
}

bool has_stage3(const detail::AcceleratorCore& core) {
  return std::any_of(core.zero_layouts.begin(), core.zero_layouts.end(),
                     [](const auto& layout) { return layout->stage() >= 3; });
}

// Stage 3 only (every rank has the same units, agreed at prepare): whether any rank has `hooks` (save or load
// pre-hooks, which see whole weights), and whether save_state writes each rank's own shard of the weights
// (SHARDED_STATE_DICT on every rank; with `type`, a rank whose setting differs is refused by name on every rank).
// One small gather, so that every rank takes the same collectives after it.
struct StateDictPlan {
  bool sharded = false;
  bool hooks = false;
};
StateDictPlan agree_state_dict(detail::AcceleratorCore& core, bool hooks, bool type, const std::string& what) {
  if (!has_stage3(core)) return {};
  const auto all = detail::gather_tensor(
      core.comm.get(),
      torch::tensor(std::vector<int64_t>{core.sharded_state_dict ? 1 : 0, hooks ? 1 : 0}, torch::kLong).unsqueeze(0));
  StateDictPlan plan{true, false};
  for (int64_t r = 0; r < all.size(0); ++r) {
    const bool sharded = all[r][0].item<int64_t>() != 0;
    if (type && sharded != core.sharded_state_dict) {
      throw Error(what + ": the ranks disagree on the state dict type (rank " + std::to_string(core.state.rank) + ": " +
                  (core.sharded_state_dict ? "SHARDED" : "FULL") + "_STATE_DICT, rank " + std::to_string(r) + ": " +
                  (sharded ? "SHARDED" : "FULL") +
                  "_STATE_DICT): set FSDP_STATE_DICT_TYPE (or AcceleratorOptions::state_dict_type) alike on every "
                  "rank");
    }
    plan.sharded = plan.sharded && sharded;
    plan.hooks = plan.hooks || all[r][1].item<int64_t>() != 0;
  }
  return plan;
}

// This rank's file of model `module`'s sharded weights (checkpoint_merge.h): its range of each sharded parameter,
// and on rank 0 the tensors nothing shards, whole.
std::pair<int64_t, uint64_t> save_weight_shard(const detail::AcceleratorCore& core, const torch::nn::Module& module,
                                               const std::string& path) {
  const auto dict = state_dict(module);
  detail::ShardFileInfo info;
  info.rank = core.state.rank;
  info.world = core.state.world_size;
  if (info.rank == 0) info.aliases = aliases_text(dict);
  NamedTensors tensors;
  for (const auto& [name, tensor] : dict.tensors) {
    const auto [layout, entry] = stage3_entry(core, tensor);
    if (!layout) {
      if (info.rank == 0) tensors.emplace_back(name, tensor);
      continue;
    }
    const auto [lo, hi] = layout->owned_range(*entry);
    if (entry->numel == 0 && info.rank == 0) {  // nobody owns an element of it: rank 0 lists it, empty
      info.slices[name] = detail::ShardSlice{0, tensor.sizes().vec()};
      tensors.emplace_back(name, torch::empty({0}, tensor.options()));
      continue;
    }
    if (lo >= hi) continue;
    info.slices[name] = detail::ShardSlice{lo - entry->offset, tensor.sizes().vec()};
    // Gathered (inside summon_full_params, maybe changed there): the gathered values, as FULL_STATE_DICT writes.
    tensors.emplace_back(name,
                         layout->gathered() ? layout->flat().narrow(0, lo, hi - lo) : layout->owned_values(lo, hi));
  }
  return save_safetensors(path, tensors, detail::shard_file_metadata(info));
}

// Checks this rank's shard file (and rank 0's, for the tensors nothing shards) against the model's layout as it is
// now: every range this rank owns present, of its shape and dtype. Throws spur::Error naming the file and tensor.
// Then, with `restore`, copies them in (the shards, and the whole tensors).
void load_weight_shard(const detail::AcceleratorCore& core, torch::nn::Module& module, const SafetensorsFile& own,
                       const std::string& own_path, const SafetensorsFile& first, const std::string& first_path,
                       bool restore) {
  detail::ShardFileInfo info;
  try {
    info = detail::parse_shard_file_metadata(own.metadata);
  } catch (const Error& e) {
    throw Error("checkpoint file " + own_path + ": " + e.what());
  }
  if (info.rank != core.state.rank || info.world != core.state.world_size) {
    throw Error("checkpoint file " + own_path + " is rank " + std::to_string(info.rank) + " of " +
                std::to_string(info.world) + "'s shard, not this rank's (" + std::to_string(core.state.rank) + " of " +
                std::to_string(core.state.world_size) + ")");
  }
  std::map<std::string, torch::Tensor> mine(own.tensors.begin(), own.tensors.end());
  std::map<std::string, torch::Tensor> whole;
  for (const auto& [name, tensor] : first.tensors) {
    if (core.state.rank != 0 || !info.slices.contains(name)) whole.emplace(name, tensor);
  }
  size_t used = 0;
  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : state_dict(module).tensors) {
    const auto [layout, entry] = stage3_entry(core, tensor);
    if (!layout) {
      const auto it = whole.find(name);
      if (it == whole.end() || info.slices.contains(name) || it->second.sizes() != tensor.sizes() ||
          it->second.scalar_type() != tensor.scalar_type()) {
        throw Error("checkpoint file " + first_path + " does not hold '" + name + "' whole (shape " +
                    c10::str(tensor.sizes()) + ", " + c10::toString(tensor.scalar_type()) +
                    "): the model is not the one saved");
      }
      if (restore) tensor.copy_(it->second);
      if (core.state.rank == 0) ++used;
      continue;
    }
    const auto [lo, hi] = layout->owned_range(*entry);
    const auto slice = info.slices.find(name);
    const auto it = mine.find(name);
    if (entry->numel == 0 && core.state.rank == 0) {  // listed, empty, by rank 0
      if (slice == info.slices.end() || it == mine.end() || it->second.numel() != 0 ||
          slice->second.shape != tensor.sizes().vec() || it->second.scalar_type() != tensor.scalar_type()) {
        throw Error("checkpoint file " + own_path + " does not hold '" + name +
                    "' as this model has it (no elements, shape " + c10::str(tensor.sizes()) +
                    "): the model is not the one saved");
      }
      ++used;
      continue;
    }
    if (lo >= hi) continue;
    if (slice == info.slices.end() || it == mine.end() || slice->second.offset != lo - entry->offset ||
        slice->second.shape != tensor.sizes().vec() || it->second.numel() != hi - lo ||
        it->second.scalar_type() != tensor.scalar_type()) {
      throw Error("checkpoint file " + own_path + " does not hold this rank's range of '" + name + "' (elements " +
                  std::to_string(lo - entry->offset) + " to " + std::to_string(hi - entry->offset) + " of shape " +
                  c10::str(tensor.sizes()) +
                  "): the model, or how it is wrapped in fully_shard blocks, is not the one saved");
    }
    if (restore) layout->owned_values(lo, hi).copy_(it->second.view({-1}));
    ++used;
  }
  if (used != mine.size()) {
    const auto dict = state_dict(module);
    std::string extra;
    for (const auto& [name, tensor] : mine) {
      const bool known = std::any_of(dict.tensors.begin(), dict.tensors.end(),
                                     [&name = name](const auto& entry) { return entry.first == name; });
      if (!known) {
        extra = name;
        break;
      }
    }
    throw Error("checkpoint file " + own_path + " holds " + std::to_string(mine.size() - used) +
                " tensor(s) this model does not have" + (extra.empty() ? "" : " ('" + extra + "')") +
                ": the model is not the one saved");
  }
}

// Every model's accumulated gradients, under "<model index>.<parameter name>" (tied tensors once).
NamedTensors gradients(const std::vector<std::shared_ptr<torch::nn::Module>>& models) {
  NamedTensors grads;
  for (size_t i = 0; i < models.size(); ++i) {
    std::set<const void*> seen;
    for (const auto& item : models[i]->named_parameters(true)) {
      if (!seen.insert(item.value().unsafeGetTensorImpl()).second) continue;
      const auto& grad = item.value().grad();
      // ZeRO stage 2's marker is no gradient: the reduced one lives in the shard (zero.h).
      if (grad.defined() && !detail::ZeroLayout::is_marker(item.value(), grad)) {
        grads.emplace_back(std::to_string(i) + "." + item.key(), grad.detach());
      }
    }
  }
  return grads;
}

}  // namespace

std::string Accelerator::save_state(const std::string& output_dir) {
  progress::Scope saving("save_state");
  auto& core = *core_;
  if (mid_accumulation_refused(core)) {  // the same on every rank: refused before any collective
    throw Error("save_state(" + output_dir +
                ") in the middle of a gradient accumulation with ZeRO stage 2 and sync_each_batch: the gradients "
                "accumulated so far live in each rank's shard, which checkpoints do not hold yet; save after "
                "optimizer.step()");
  }
  // Stage 3: the parameters whole while they are written (the main process writes the consolidated model), unless
  // each rank writes its own shard (SHARDED_STATE_DICT).
  const auto plan = agree_state_dict(core, !core.save_hooks.empty(), /*type=*/true, "save_state(" + output_dir + ")");
  const bool shard_files = plan.sharded && !plan.hooks;  // pre-hooks see whole weights: gathered, written whole
  auto full = shard_files ? Scope() : detail::gather_full_parameters(core, /*writeback=*/false);
  const bool automatic = output_dir.empty();
  std::string dir = output_dir;
  if (automatic) {
    if (!core.project.automatic_checkpoint_naming) {
      throw Error("save_state() needs a directory, or ProjectConfiguration::automatic_checkpoint_naming");
    }
    dir = detail::checkpoints_folder(core.project) + "/checkpoint_" + std::to_string(core.project.iteration);
  }
  if (core.removal.joinable()) core.removal.join();  // the last rotation's removals
  const std::string tmp = detail::temporary_directory(dir);
  std::string failure;
  if (is_main_process()) {
    failure = attempt([&] {
      std::error_code error;
      if (automatic) {
        // Refused: overwriting a checkpoint, or one numbered below the newest (latest_checkpoint() would never
        // find it, and rotation would remove it first).
        const auto existing = detail::automatic_checkpoints(detail::checkpoints_folder(core.project));
        if (!existing.empty() && existing.back().first >= core.project.iteration) {
          const bool same = existing.back().first == core.project.iteration ||
                            std::any_of(existing.begin(), existing.end(),
                                        [&](const auto& entry) { return entry.first == core.project.iteration; });
          throw Error("checkpoint " + dir +
                      (same ? " already exists" : " would be older than " + existing.back().second) +
                      ": ProjectConfiguration::iteration " + std::to_string(core.project.iteration) +
                      (same ? " would overwrite it" : " is behind it") +
                      " (load_state() the latest first, or "
                      "set_save_iteration(" +
                      std::to_string(existing.back().first + 1) + "))");
        }
      }
      fs::remove_all(tmp, error);  // left by a save that crashed
      fs::create_directories(tmp, error);
      if (error) throw Error("cannot create " + tmp + ": " + error.message());
    });
  }
  agree(comm(), failure, "save_state(" + dir + ")");

  // Pre-hooks see every model's weights (copies, on the CPU) and may change them or take models out, as
  // Accelerate's. Every rank agrees on the outcome even where only some registered hooks.
  ModelList hooked_models = core.models;
  std::vector<NamedTensors> hooked_weights;
  const bool hooked = !core.save_hooks.empty();
  failure = attempt([&] {
    if (!hooked) return;
    for (const auto& model : core.models) hooked_weights.push_back(detail::cpu_state_dict(*model, /*copy=*/true));
    for (auto& [id, hook] : core.save_hooks) hook(hooked_models, hooked_weights, tmp);
  });
  agree(comm(), failure, "save_state(" + dir + ") pre-hook");
  const std::size_t model_count = hooked ? hooked_weights.size() : core.models.size();

  detail::CheckpointState state;
  auto record = [&](const std::string& name, std::pair<int64_t, uint64_t> written) {
    state.files.emplace_back(name, detail::CheckpointFile{written.first, written.second});
  };
  if (is_main_process()) {
    failure = attempt([&] {
      for (size_t i = 0; i < model_count && !shard_files; ++i) {
        const auto dict = hooked ? dedupe(hooked_weights[i]) : state_dict(*core.models[i]);
        record(model_file(i), save_safetensors(tmp + "/" + model_file(i), dict.tensors,
                                               {{"format", "pt"}, {"spur.aliases", aliases_text(dict)}}));
      }
      for (size_t i = 0; i < core.optimizers.size(); ++i) {
        if (sharded(core, i)) continue;  // every rank writes its shard, below
        torch::serialize::OutputArchive archive;
        core.optimizers[i]->save(archive);
        record(indexed("optimizer", i), write_archive(tmp + "/" + indexed("optimizer", i), archive));
      }
      for (size_t i = 0; i < core.schedulers.size(); ++i) {
        torch::serialize::OutputArchive archive;
        archive.write("step_count",
                      torch::tensor(static_cast<int64_t>(detail::scheduler_step_count(*core.schedulers[i]))));
        record(indexed("scheduler", i), write_archive(tmp + "/" + indexed("scheduler", i), archive));
      }
      if (core.scaler) {
        torch::serialize::OutputArchive archive;
        archive.write("scale", torch::tensor(core.scaler->get_scale(), torch::kDouble));
        archive.write("growth_tracker", torch::tensor(core.scaler->growth_tracker()));
        archive.write("update_pending", torch::tensor(static_cast<int64_t>(core.scaler_update_pending)));
        // The step's finding that the pending update() will apply: -1 none, 0 finite, 1 inf/nan.
        const auto pending = core.scaler->pending_found_inf();
        archive.write("pending_found_inf", torch::tensor(static_cast<int64_t>(pending ? (*pending ? 1 : 0) : -1)));
        record("scaler.pt", write_archive(tmp + "/scaler.pt", archive));
      }
      for (size_t i = 0; i < core.custom.size(); ++i) {
        torch::serialize::OutputArchive archive;
        core.custom[i].save(archive);
        const std::string name = "custom_checkpoint_" + std::to_string(i) + ".pt";
        record(name, write_archive(tmp + "/" + name, archive));
      }
    });
  }

  // Every rank: its RNG states and, when saved in the middle of a gradient accumulation, the gradients it has
  // accumulated so far (they differ per rank until the synchronising micro-step). Main learns each file's size
  // and hash through one gather.
  std::pair<int64_t, uint64_t> written{-1, 0}, grads_written{0, 0};
  std::vector<std::pair<int64_t, uint64_t>> shards_written(core.optimizers.size(), {0, 0});
  std::vector<std::pair<int64_t, uint64_t>> weights_written(shard_files ? core.models.size() : 0, {0, 0});
  const bool mid_accumulation = core.accumulation_steps > 1 && core.gradient.step % core.accumulation_steps != 0;
  const std::string rng_failure = attempt([&] {
    torch::serialize::OutputArchive rng;
    {
      auto generator = at::detail::getDefaultCPUGenerator();  // shares the default generator
      std::lock_guard<std::mutex> lock(generator.mutex());
      rng.write("cpu", generator.get_state());
    }
    compat::save_cuda_rng(rng);
    written = write_archive(tmp + "/random_states_" + std::to_string(process_index()) + ".pt", rng);
    for (size_t i = 0; i < core.optimizers.size(); ++i) {
      if (!sharded(core, i)) continue;
      torch::serialize::OutputArchive archive;
      core.optimizers[i]->save(archive);
      shards_written[i] = write_archive(tmp + "/" + optimizer_shard_file(i, process_index()), archive);
    }
    for (size_t i = 0; i < weights_written.size(); ++i) {
      weights_written[i] =
          save_weight_shard(core, *core.models[i], tmp + "/" + detail::checkpoint_model_shard_file(i, process_index()));
    }
    if (mid_accumulation) {
      const auto grads = gradients(core.models);
      if (!grads.empty()) {
        grads_written = save_safetensors(tmp + "/" + gradients_file(process_index()), grads, {{"format", "pt"}});
      }
    }
  });
  if (failure.empty()) failure = rng_failure;
  if (!rng_failure.empty()) written.first = -1;
  std::vector<int64_t> mine{written.first, static_cast<int64_t>(written.second), grads_written.first,
                            static_cast<int64_t>(grads_written.second)};
  for (const auto& [size, hash] : shards_written) {
    mine.push_back(size);
    mine.push_back(static_cast<int64_t>(hash));
  }
  for (const auto& [size, hash] : weights_written) {
    mine.push_back(size);
    mine.push_back(static_cast<int64_t>(hash));
  }
  const auto all = detail::gather_tensor(comm(), torch::tensor(mine, torch::kLong).unsqueeze(0));

  if (is_main_process() && failure.empty()) {
    failure = attempt([&] {
      for (int64_t r = 0; r < all.size(0); ++r) {
        if (all[r][0].item<int64_t>() < 0) return;  // that rank failed; agree() reports it
        record("random_states_" + std::to_string(r) + ".pt",
               {all[r][0].item<int64_t>(), static_cast<uint64_t>(all[r][1].item<int64_t>())});
        if (all[r][2].item<int64_t>() > 0) {
          record(gradients_file(r), {all[r][2].item<int64_t>(), static_cast<uint64_t>(all[r][3].item<int64_t>())});
        }
        for (size_t i = 0; i < core.optimizers.size(); ++i) {
          const int64_t column = 4 + 2 * static_cast<int64_t>(i);
          if (!sharded(core, i)) continue;
          if (all[r][column].item<int64_t>() <= 0) return;  // that rank failed; agree() reports it
          record(optimizer_shard_file(i, r),
                 {all[r][column].item<int64_t>(), static_cast<uint64_t>(all[r][column + 1].item<int64_t>())});
        }
        for (size_t i = 0; i < weights_written.size(); ++i) {
          const int64_t column = 4 + 2 * static_cast<int64_t>(core.optimizers.size() + i);
          if (all[r][column].item<int64_t>() <= 0) return;  // that rank failed; agree() reports it
          record(detail::checkpoint_model_shard_file(i, r),
                 {all[r][column].item<int64_t>(), static_cast<uint64_t>(all[r][column + 1].item<int64_t>())});
        }
      }
      for (const auto& weak : core.loaders) {
        if (auto loader = weak.lock()) state.loaders.push_back(loader_record(*loader));
      }
      state.spur_version = SPUR_VERSION;
      state.world_size = num_processes();
      state.models = static_cast<int64_t>(model_count);
      state.optimizers = static_cast<int64_t>(core.optimizers.size());
      state.zero_stage = sharded_stage(core);
      state.schedulers = static_cast<int64_t>(core.schedulers.size());
      state.custom_objects = static_cast<int64_t>(core.custom.size());
      state.accumulation_step = core.gradient.step;
      state.step_was_skipped = core.step_was_skipped;
      detail::write_file(tmp + "/" + kStateFile, detail::write_checkpoint_state(state));
    });
  }
  agree(comm(), failure, "save_state(" + dir + ")");
  if (is_main_process()) failure = attempt([&] { detail::commit_directory(dir); });
  agree(comm(), failure, "save_state(" + dir + ")");
  core.project.iteration += 1;  // as Accelerate, after every save
  if (is_main_process()) record_file(core, "checkpoint", dir);
  if (automatic && is_main_process()) detail::rotate_checkpoints(core);
  return dir;
}

std::string Accelerator::load_state(const std::string& input_dir) {
  progress::Scope loading("load_state");
  auto& core = *core_;
  std::string dir = input_dir;
  if (dir.empty()) {
    if (!core.project.automatic_checkpoint_naming) {
      throw Error("load_state() needs a directory, or ProjectConfiguration::automatic_checkpoint_naming");
    }
    dir = latest_checkpoint();
    if (dir.empty()) {
      throw Error("load_state(): there is no checkpoint to load in " + detail::checkpoints_folder(core.project) +
                  " (save_state() writes checkpoint_<N> there)");
    }
  }
  const std::string base = dir + "/";
  const std::string state_path = base + kStateFile;
  std::vector<std::shared_ptr<detail::LoaderState>> loaders;
  for (const auto& weak : core.loaders) {
    if (auto loader = weak.lock()) loaders.push_back(loader);
  }

  // A save that stopped between its two renames (file systems without an atomic exchange) left the checkpoint
  // under another name: the main process puts it back first, and says so.
  std::string failure;
  if (is_main_process()) {
    failure = attempt([&] {
      const std::string from = detail::recover_directory(dir);
      if (!from.empty()) {
        std::cerr << "spur: checkpoint " << dir << " was missing after an interrupted save; restored it from " << from
                  << std::endl;
      }
    });
  }
  agree(comm(), failure, "load_state(" + dir + ")");

  // Phase 1, on every rank: read the state file and check every file this rank will read, before touching
  // anything, so a bad checkpoint leaves the run as it was.
  detail::CheckpointState state;
  auto verified_path = [&](const std::string& name) {
    std::string path = base + name;
    const detail::CheckpointFile* entry = state.file(name);
    if (!entry) throw Error("checkpoint " + state_path + " does not list " + name);
    std::error_code error;
    const auto size = fs::file_size(path, error);
    if (error) throw Error("checkpoint file " + path + " is missing");
    if (static_cast<int64_t>(size) != entry->size || file_digest(path) != entry->hash) {
      throw Error("checkpoint file " + path + " is corrupt: its size or hash differs from " + state_path);
    }
    return path;
  };
  // Pre-hooks may take models out (they load those themselves), as Accelerate's. They run once the checkpoint is
  // verified (phase 1 checks up to as many model files as were prepared), so a bad checkpoint reaches no hook.
  ModelList models = core.models;
  std::vector<std::string> to_read;
  bool restore_gradients = false;
  bool sharded_weights = false;
  std::vector<std::pair<SafetensorsFile, SafetensorsFile>> weight_shards;  // per model: this rank's, rank 0's
  for (size_t i = 0; i < core.optimizers.size(); ++i) {
    to_read.emplace_back(sharded(core, i) ? optimizer_shard_file(i, process_index()) : indexed("optimizer", i));
  }
  for (size_t i = 0; i < core.schedulers.size(); ++i) to_read.push_back(indexed("scheduler", i));
  if (core.scaler) to_read.emplace_back("scaler.pt");
  for (size_t i = 0; i < core.custom.size(); ++i) to_read.push_back("custom_checkpoint_" + std::to_string(i) + ".pt");
  to_read.push_back("random_states_" + std::to_string(process_index()) + ".pt");

  failure = attempt([&] {
    if (!fs::is_directory(dir)) throw Error("checkpoint directory " + dir + " does not exist");
    try {
      state = detail::parse_checkpoint_state(read_text(state_path));
    } catch (const Error& e) {
      throw Error("checkpoint file " + state_path + " is corrupt: " + e.what());
    }
    try {
      const int64_t world = state.world_size;
      const int64_t saved_stage = state.zero_stage;
      sharded_weights = state.models > 0 && state.file(detail::checkpoint_model_shard_file(0, 0)) != nullptr;
      // How to start afresh from the checkpoint's weights at any number of processes.
      const std::string afresh = sharded_weights
                                     ? "start afresh from its weights merged (spur merge-weights " + dir +
                                           " OUTPUT_DIR, then spur::load_model(*model, OUTPUT_DIR))"
                                     : "start afresh from its consolidated weights (spur::load_model(*model, \"" + dir +
                                           "\") loads model.safetensors at any number of processes)";
      if (saved_stage > 0 && world != num_processes()) {
        throw Error("it holds the optimizer state sharded over " + std::to_string(world) + " processes (ZeRO stage " +
                    std::to_string(saved_stage) + ") and this run has " + std::to_string(num_processes()) +
                    ": resume with " + std::to_string(world) + " processes, or " + afresh);
      }
      if (saved_stage > 0 && sharded_stage(core) > 0 && (saved_stage >= 3) != (sharded_stage(core) >= 3)) {
        // Stage 3 shards each unit's parameters on its own; stages 1 and 2 the whole model's at once.
        throw Error("its optimizer state is sharded per ZeRO stage " + std::to_string(saved_stage) +
                    " and this run is stage " + std::to_string(sharded_stage(core)) + ": resume with stage " +
                    std::to_string(saved_stage) + ", or " + afresh);
      }
      if ((saved_stage > 0) != (sharded_stage(core) > 0)) {
        throw Error(saved_stage > 0 ? "its optimizer state is sharded (ZeRO stage " + std::to_string(saved_stage) +
                                          ") and this run's is not: resume with ZeRO stage " +
                                          std::to_string(saved_stage) + ", or " + afresh
                                    : "its optimizer state is whole (saved without ZeRO) and this run shards it (ZeRO "
                                      "stage " +
                                          std::to_string(core.zero_stage) + "): resume without ZeRO, or " + afresh);
      }
      if (world != num_processes()) {
        throw Error("it was saved by " + std::to_string(world) + " processes and this run has " +
                    std::to_string(num_processes()) + " (RNG states and data positions are per rank): resume with " +
                    std::to_string(world) + " processes");
      }
      auto expect_count = [&](int64_t saved, size_t have, const char* what) {
        if (saved != static_cast<int64_t>(have)) {
          throw Error("it holds " + std::to_string(saved) + " " + what + ", this run prepared " + std::to_string(have) +
                      " (prepare the same objects, in the same order, before load_state)");
        }
      };
      const int64_t saved_models = state.models;
      if (saved_models > static_cast<int64_t>(core.models.size())) {
        throw Error("it holds " + std::to_string(saved_models) + " model(s), this run prepared " +
                    std::to_string(core.models.size()) +
                    " (prepare the same objects, in the same order, before "
                    "load_state)");
      }
      // SHARDED_STATE_DICT: each rank's shard of the weights, read by that rank (and rank 0's, for the tensors
      // nothing shards), into a stage-3 run of the same world size whose layout is the one saved.
      if (sharded_weights && !has_stage3(core)) {
        throw Error("it holds the weights sharded over " + std::to_string(world) +
                    " processes (SHARDED_STATE_DICT, ZeRO stage 3) and this run does not shard them: resume with "
                    "ZeRO stage 3, or " +
                    afresh);
      }
      for (int64_t i = 0; i < saved_models; ++i) {
        const auto m = static_cast<size_t>(i);
        if (!sharded_weights) {
          to_read.push_back(model_file(m));
          continue;
        }
        to_read.push_back(detail::checkpoint_model_shard_file(m, process_index()));
        if (process_index() != 0) to_read.push_back(detail::checkpoint_model_shard_file(m, 0));
      }
      expect_count(state.optimizers, core.optimizers.size(), "optimizer(s)");
      expect_count(state.schedulers, core.schedulers.size(), "scheduler(s)");
      expect_count(state.custom_objects, core.custom.size(), "registered object(s)");
      const auto& saved_loaders = state.loaders;
      if (saved_loaders.size() != loaders.size()) {
        throw Error("it holds " + std::to_string(saved_loaders.size()) + " data loader(s), this run prepared " +
                    std::to_string(loaders.size()) + " (prepare the same loaders, in the same order)");
      }
      for (size_t i = 0; i < loaders.size(); ++i) {
        const auto& saved = saved_loaders[i];
        if (saved.stream != loaders[i]->stream || saved.dataset_size != loaders[i]->dataset_size) {
          throw Error("data loader " + std::to_string(i) +
                      " is not the one saved (another dataset size or kind): "
                      "prepare the same loaders, in the same order");
        }
      }
    } catch (const Error& e) {
      throw Error("cannot load checkpoint " + dir + ": " + e.what());
    }
    for (const auto& name : to_read) verified_path(name);
    if (state.file(gradients_file(process_index()))) {
      verified_path(gradients_file(process_index()));
      restore_gradients = true;
    }
    for (int64_t i = 0; sharded_weights && i < state.models; ++i) {
      const auto m = static_cast<size_t>(i);
      const auto own = base + detail::checkpoint_model_shard_file(m, process_index());
      const auto first = base + detail::checkpoint_model_shard_file(m, 0);
      weight_shards.emplace_back(load_safetensors(own),
                                 process_index() == 0 ? SafetensorsFile{} : load_safetensors(first));
      auto& [mine, zero] = weight_shards.back();
      load_weight_shard(core, *core.models[m], mine, own, process_index() == 0 ? mine : zero, first,
                        /*restore=*/false);
    }
  });
  agree(comm(), failure, "load_state(" + dir + ")");
  // Stage 3 with whole weights: the parameters whole while the weights are copied in, then back into each rank's
  // shard. With sharded weights, whole only if some rank's load pre-hooks may read or load them (every rank agrees).
  const bool hooks_anywhere =
      sharded_weights &&
      agree_state_dict(core, !core.load_hooks.empty(), /*type=*/false, "load_state(" + dir + ")").hooks;
  auto full = sharded_weights && !hooks_anywhere ? Scope() : detail::gather_full_parameters(core, /*writeback=*/true);

  failure = attempt([&] {
    for (auto& [id, hook] : core.load_hooks) hook(models, dir);
    const int64_t saved_models = state.models;
    if (saved_models != static_cast<int64_t>(models.size())) {
      throw Error("cannot load checkpoint " + dir + ": it holds " + std::to_string(saved_models) +
                  " model(s), this run prepared " + std::to_string(core.models.size()) +
                  (core.load_hooks.empty() ? std::string()
                                           : " and its load_state pre-hooks left " + std::to_string(models.size())) +
                  " (prepare the same objects, in the same order, before load_state)");
    }
  });
  agree(comm(), failure, "load_state(" + dir + ") pre-hook");

  // The sharded weights checked against (restore: copied into) the models the hooks left.
  auto sharded_restore = [&](bool restore) {
    for (size_t i = 0; sharded_weights && i < models.size(); ++i) {
      const auto& [mine, zero] = weight_shards[i];
      load_weight_shard(core, *models[i], mine, base + detail::checkpoint_model_shard_file(i, process_index()),
                        process_index() == 0 ? mine : zero, base + detail::checkpoint_model_shard_file(i, 0), restore);
    }
  };
  // The models the hooks left checked again against the files (every rank agrees before any rank restores).
  failure = attempt([&] { sharded_restore(/*restore=*/false); });
  agree(comm(), failure, "load_state(" + dir + ")");

  // Phase 2: restore.
  sharded_restore(/*restore=*/true);
  if (sharded_weights) {
    // A unit gathered now (kept for its backward, or pinned) holds the values from before: gathered again.
    for (const auto& layout : core.zero_layouts) {
      if (layout->stage() >= 3 && layout->gathered()) layout->regather(*core.comm);
    }
  }
  for (size_t i = 0; i < models.size() && !sharded_weights; ++i) {
    const auto path = base + model_file(i);
    auto file = load_safetensors(path);
    std::map<std::string, torch::Tensor> loaded(file.tensors.begin(), file.tensors.end());
    assign(*models[i], loaded, path);
  }
  for (size_t i = 0; i < core.optimizers.size(); ++i) {
    const auto path = base + (sharded(core, i) ? optimizer_shard_file(i, process_index()) : indexed("optimizer", i));
    auto archive = read_archive(path, core.device);
    try {
      auto& optimizer = *core.optimizers[i];
      optimizer.load(archive);
      // LibTorch restores the optimizer's state but not its groups' options: a scheduled learning rate would
      // jump back to its initial value. Read them back from the same archive.
      torch::serialize::InputArchive groups;
      archive.read("param_groups", groups);
      for (size_t g = 0; g < optimizer.param_groups().size(); ++g) {
        torch::serialize::InputArchive group, options;
        groups.read("param_groups/" + std::to_string(g), group);
        group.read("options", options);
        optimizer.param_groups()[g].options().serialize(options);
      }
    } catch (const std::exception& e) {
      throw Error("checkpoint file " + path + " does not fit optimizer " + std::to_string(i) + ": " + e.what());
    }
  }
  for (size_t i = 0; i < core.schedulers.size(); ++i) {
    const auto path = base + indexed("scheduler", i);
    auto archive = read_archive(path, torch::kCPU);
    detail::set_scheduler_step_count(*core.schedulers[i],
                                     static_cast<unsigned>(read_tensor(archive, "step_count", path).item<int64_t>()));
  }
  if (core.scaler) {
    const auto path = base + "scaler.pt";
    auto archive = read_archive(path, torch::kCPU);
    core.scaler_update_pending = read_tensor(archive, "update_pending", path).item<int64_t>() != 0;
    std::optional<bool> pending;
    torch::Tensor found;
    if (core.scaler_update_pending && archive.try_read("pending_found_inf", found) && found.item<int64_t>() >= 0) {
      pending = found.item<int64_t>() != 0;
    }
    try {
      core.scaler->load(read_tensor(archive, "scale", path).item<double>(),
                        read_tensor(archive, "growth_tracker", path).item<int64_t>(), pending);
    } catch (const Error& e) {
      throw Error("checkpoint file " + path + ": " + e.what());
    }
  }
  for (size_t i = 0; i < core.custom.size(); ++i) {
    const auto path = base + "custom_checkpoint_" + std::to_string(i) + ".pt";
    auto archive = read_archive(path, core.device);
    try {
      core.custom[i].load(archive);
    } catch (const std::exception& e) {
      throw Error("checkpoint file " + path + " does not fit registered object " + std::to_string(i) + ": " + e.what());
    }
  }
  {
    const auto path = base + "random_states_" + std::to_string(process_index()) + ".pt";
    auto archive = read_archive(path, torch::kCPU);
    try {
      auto generator = at::detail::getDefaultCPUGenerator();  // shares the default generator
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(read_tensor(archive, "cpu", path));
      compat::load_cuda_rng(archive);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error("checkpoint file " + path + " holds an RNG state this process cannot use: " + e.what());
    }
  }
  for (size_t i = 0; i < loaders.size(); ++i) {
    loaders[i]->epoch = state.loaders[i].epoch;
    loaders[i]->skip_next = state.loaders[i].position;
    if (state.loaders[i].seed) loaders[i]->reseed(*state.loaders[i].seed);
  }
  core.gradient.step = state.accumulation_step;
  core.backwards_since_step = 0;
  if (restore_gradients) {
    const auto path = base + gradients_file(process_index());
    std::map<std::string, torch::Tensor> saved;
    for (auto& [name, tensor] : load_safetensors(path).tensors) saved.emplace(name, tensor);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < core.models.size(); ++i) {
      for (const auto& item : core.models[i]->named_parameters(true)) {
        const auto it = saved.find(std::to_string(i) + "." + item.key());
        if (it == saved.end()) continue;
        auto param = item.value();
        if (it->second.sizes() != param.sizes()) {
          throw Error("checkpoint file " + path + ": gradient of '" + item.key() + "' has another shape");
        }
        param.mutable_grad() = it->second.to(param.device(), param.scalar_type()).clone();
      }
    }
    core.backwards_since_step = core.gradient.step % std::max<int64_t>(1, core.accumulation_steps);
  }
  core.step_was_skipped = state.step_was_skipped;
  core.steps_skipped.assign(core.optimizers.size(), state.step_was_skipped ? 1 : 0);
  // Loading checkpoint_<N> of this project: the next automatic save is N + 1, not an overwrite.
  std::error_code error;
  const auto folder = fs::weakly_canonical(detail::checkpoints_folder(core.project), error);
  const auto path = fs::weakly_canonical(dir, error);
  if (const auto n = detail::checkpoint_number(path.filename().string()); n && path.parent_path() == folder) {
    core.project.iteration = std::max(core.project.iteration, *n + 1);
  }
  return dir;
}

void Accelerator::save_module(torch::nn::Module& module, const std::string& dir, const SaveModelOptions& options) {
  auto full = detail::gather_full_parameters(*core_, /*writeback=*/false);  // stage 3: whole while written
  // Only the main process writes; every rank learns whether it failed (a bad shard size, an unwritable
  // directory, a dtype safetensors cannot hold), instead of waiting at a barrier for the collective timeout.
  std::string failure;
  if (is_main_process())
    failure = attempt([&] {
      const int64_t limit = parse_size(options.max_shard_size);
      const auto dict = state_dict(module);
      // Greedy in parameter order, as Accelerate: a new shard when the next tensor would overflow this one.
      std::vector<NamedTensors> shards(1);
      int64_t current = 0, total = 0;
      for (const auto& entry : dict.tensors) {
        const auto bytes = static_cast<int64_t>(entry.second.nbytes());
        if (current + bytes > limit && !shards.back().empty()) {
          shards.emplace_back();
          current = 0;
        }
        shards.back().push_back(entry);
        current += bytes;
        total += bytes;
      }
      detail::replace_directory(dir, [&](const std::string& tmp) {
        const std::map<std::string, std::string> metadata{{"format", "pt"}, {"spur.aliases", aliases_text(dict)}};
        if (shards.size() == 1) {
          save_safetensors(tmp + "/model.safetensors", shards[0], metadata);
          return;
        }
        json::Object weight_map;
        char name[64];
        for (size_t i = 0; i < shards.size(); ++i) {
          std::snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
          save_safetensors(tmp + "/" + name, shards[i], metadata);
          for (const auto& entry : shards[i]) weight_map.emplace_back(entry.first, std::string(name));
        }
        json::Object index{{"metadata", json::Object{{"total_size", total}}}, {"weight_map", std::move(weight_map)}};
        detail::write_file(tmp + "/model.safetensors.index.json", json::write(json::Value(std::move(index))) + "\n");
      });
    });
  agree(comm(), failure, "save_model(" + dir + ")");
  if (is_main_process()) record_file(*core_, "model", dir);
}

void load_model(torch::nn::Module& module, const std::string& dir) {
  const std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, torch::Tensor> loaded;
  if (fs::exists(index_path)) {
    detail::SafetensorsIndex index;
    try {
      index = detail::parse_safetensors_index(read_text(index_path));
    } catch (const Error& e) {
      throw Error("checkpoint file " + index_path + " is corrupt: " + e.what());
    }
    for (const auto& shard : index.shards()) {
      for (auto& [name, t] : load_safetensors(dir + "/" + shard).tensors) {
        const auto listed = index.weight_map.find(name);
        if (listed != index.weight_map.end() && listed->second == shard) loaded[name] = t;
      }
    }
    for (const auto& [name, shard] : index.weight_map) {
      if (!loaded.contains(name)) {
        throw Error("checkpoint file " + index_path + " is corrupt: it puts " + name + " in " + shard +
                    ", which does not hold it");
      }
    }
    assign(module, loaded, index_path);
    return;
  }
  const std::string path = dir + "/model.safetensors";
  if (!fs::exists(path) && fs::exists(dir + "/" + detail::checkpoint_model_shard_file(0, 0))) {
    throw Error("checkpoint " + dir +
                " holds its weights sharded per rank (SHARDED_STATE_DICT under ZeRO stage 3: model_rank<r>.safetensors)"
                ", which load_state reads back in a stage-3 run of the same size; to load them here, merge them "
                "first: spur merge-weights " +
                dir + " OUTPUT_DIR, then load OUTPUT_DIR");
  }
  for (auto& [name, t] : load_safetensors(path).tensors) loaded[name] = t;
  assign(module, loaded, path);
}

}  // namespace spur
