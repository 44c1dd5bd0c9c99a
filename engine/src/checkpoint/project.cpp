// SPDX-License-Identifier: Apache-2.0
// Project layout and the checkpoint extras of the Accelerator: automatic naming and rotation (see project.h),
// save/load pre-hooks, get_state_dict and save().
#include "checkpoint/project.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <unordered_map>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <spur/accelerator.h>
#include <spur/checkpoint.h>
#include <spur/error.h>

#include "accelerator_core.h"
#include "distributed/fully_shard.h"

namespace spur {
namespace detail {

namespace fs = std::filesystem;
namespace {
constexpr const char* kRemovedSuffix = ".spur-removed";
}

std::string checkpoints_folder(const ProjectConfiguration& project) {
  return project.project_dir.empty() ? std::string("checkpoints") : project.project_dir + "/checkpoints";
}

std::optional<int64_t> checkpoint_number(const std::string& name) {
  static const std::string prefix = "checkpoint_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name.size() > prefix.size() + 18)
    return std::nullopt;
  int64_t n = 0;
  for (std::size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

std::vector<std::pair<int64_t, std::string>> automatic_checkpoints(const std::string& folder) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    const std::string interrupted = ".spur-new";
    if (name.size() > interrupted.size() &&
        name.compare(name.size() - interrupted.size(), interrupted.size(), interrupted) == 0) {
      name.resize(name.size() - interrupted.size());
    }
    const auto n = checkpoint_number(name);
    if (!n || !it->is_directory(error)) continue;
    const std::string path = folder + "/" + name;
    if (std::none_of(found.begin(), found.end(), [&](const auto& entry) { return entry.first == *n; })) {
      found.emplace_back(*n, path);
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

NamedTensors cpu_state_dict(const torch::nn::Module& module, bool copy) {
  NamedTensors out;
  // Tied tensors stay one tensor under each name (moved or copied to the CPU once).
  std::unordered_map<const void*, torch::Tensor> once;
  auto add = [&](const std::string& name, const torch::Tensor& t) {
    if (!t.defined()) return;
    auto [it, fresh] = once.emplace(t.unsafeGetTensorImpl(), torch::Tensor());
    if (fresh) it->second = t.detach().to(torch::kCPU, /*non_blocking=*/false, copy);
    out.emplace_back(name, it->second);
  };
  for (const auto& item : module.named_parameters(true)) add(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) add(item.key(), item.value());
  return out;
}

void rotate_checkpoints(AcceleratorCore& core) {
  const auto& project = core.project;
  const std::string folder = checkpoints_folder(project);
  std::vector<fs::path> doomed;
  // Left by a run that stopped while removing: finish the job.
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() > std::char_traits<char>::length(kRemovedSuffix) && name[0] == '.' &&
        name.find(kRemovedSuffix) != std::string::npos) {
      doomed.push_back(it->path());
    }
  }
  if (project.total_limit) {
    const auto checkpoints = automatic_checkpoints(folder);
    const auto limit = static_cast<std::size_t>(*project.total_limit);
    for (std::size_t i = 0; i + limit < checkpoints.size(); ++i) {
      const fs::path from = checkpoints[i].second;
      const fs::path aside = fs::path(folder) / ("." + from.filename().string() + kRemovedSuffix);
      fs::rename(from, aside, error);
      if (error) {
        std::cerr << "spur: cannot remove old checkpoint " << from.string() << " (total_limit " << *project.total_limit
                  << "): " << error.message() << std::endl;
        continue;
      }
      doomed.push_back(aside);
    }
  }
  if (doomed.empty()) return;
  if (core.removal.joinable()) core.removal.join();
  core.removal = std::thread([doomed = std::move(doomed)] {
    for (const auto& path : doomed) {
      std::error_code ignored;
      fs::remove_all(path, ignored);
    }
  });
}

}  // namespace detail

namespace fs = std::filesystem;
namespace {

// What Python's torch.save writes for a dict of tensors: a zip holding the pickled dict (data.pkl) and each
// storage (data/<n>). Without the TorchScript type tags torch::pickle_save adds, which torch.load refuses in
// its default weights_only mode since PyTorch 2.6. torch.load and torch::pickle_load read it.
std::string torch_save_bytes(const NamedTensors& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, tensor] : tensors) dict.insert_or_assign(name, tensor.detach().to(torch::kCPU));
  std::vector<char> pickle;
  torch::jit::Pickler pickler([&](const char* bytes, size_t n) { pickle.insert(pickle.end(), bytes, bytes + n); },
                              nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* bytes, size_t n) -> size_t {
    out.append(static_cast<const char*>(bytes), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  writer.writeRecord("byteorder", "little", 6);
  const auto& storages = pickler.tensorData();
  for (size_t i = 0; i < storages.size(); ++i) {
    const auto data = torch::jit::getWriteableTensorData(storages[i]);
    writer.writeRecord("data/" + std::to_string(i), data.data(), data.sizeInBytes());
  }
  writer.writeEndOfFile();
  return out;
}

}  // namespace

const ProjectConfiguration& Accelerator::project_configuration() const { return core_->project; }

std::string Accelerator::project_dir() const { return core_->project.project_dir; }

std::string Accelerator::logging_dir() const {
  const auto& project = core_->project;
  if (!project.logging_dir.empty()) return project.logging_dir;
  if (!project.project_dir.empty()) return project.project_dir;
  return "runs";
}

int64_t Accelerator::save_iteration() const { return core_->project.iteration; }

void Accelerator::set_save_iteration(int64_t iteration) {
  if (iteration < 0) throw Error("set_save_iteration(" + std::to_string(iteration) + "): it must be 0 or more");
  core_->project.iteration = iteration;
}

std::string Accelerator::latest_checkpoint() const {
  const auto checkpoints = detail::automatic_checkpoints(detail::checkpoints_folder(core_->project));
  return checkpoints.empty() ? std::string() : checkpoints.back().second;
}

HookHandle Accelerator::register_save_state_pre_hook(SaveStatePreHook hook) {
  const int64_t id = core_->next_hook_id++;
  core_->save_hooks.emplace(id, std::move(hook));
  return HookHandle([weak = std::weak_ptr<detail::AcceleratorCore>(core_), id] {
    if (auto core = weak.lock()) core->save_hooks.erase(id);
  });
}

HookHandle Accelerator::register_load_state_pre_hook(LoadStatePreHook hook) {
  const int64_t id = core_->next_hook_id++;
  core_->load_hooks.emplace(id, std::move(hook));
  return HookHandle([weak = std::weak_ptr<detail::AcceleratorCore>(core_), id] {
    if (auto core = weak.lock()) core->load_hooks.erase(id);
  });
}

NamedTensors Accelerator::get_state_dict(const torch::nn::Module& module) const {
  // Stage 3: gathered (every rank calls it then) and copied, since the gathered memory is freed again after.
  const bool sharded = core_->zero_stage >= 3 && !core_->zero_layouts.empty();
  auto full = detail::gather_full_parameters(*core_, /*writeback=*/false);
  return detail::cpu_state_dict(module, /*copy=*/sharded);
}

void Accelerator::save(const NamedTensors& tensors, const std::string& path, SaveOptions options) const {
  if (!is_main_process()) return;
  const std::string tmp = path + ".spur-tmp";
  std::error_code error;
  const auto parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, error);
  if (error) throw Error("cannot create " + parent.string() + " for " + path + ": " + error.message());
  if (options.safe_serialization) {
    save_safetensors(tmp, tensors);
  } else {
    detail::write_file(tmp, torch_save_bytes(tensors));
  }
  fs::rename(tmp, path, error);
  if (error) throw Error("cannot replace " + path + ": " + error.message());
}

void Accelerator::save(const std::map<std::string, torch::Tensor>& tensors, const std::string& path,
                       SaveOptions options) const {
  save(NamedTensors(tensors.begin(), tensors.end()), path, options);
}

}  // namespace spur
