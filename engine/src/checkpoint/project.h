// SPDX-License-Identifier: Apache-2.0
// Automatic checkpoint naming (ProjectConfiguration): project_dir/checkpoints/checkpoint_<N>, the latest one, and
// rotation beyond total_limit. Internal; called by save_state / load_state on the training thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <spur/checkpoint.h>
#include <spur/options.h>

namespace spur::detail {

class AcceleratorCore;

/// project_dir/checkpoints ("checkpoints" when project_dir is empty).
std::string checkpoints_folder(const ProjectConfiguration& project);
/// N for a folder named "checkpoint_<N>" (digits only), else nullopt.
std::optional<int64_t> checkpoint_number(const std::string& name);
/// The complete automatic checkpoints in `folder`, oldest (lowest N) first; a checkpoint left under its
/// ".spur-new" name by an interrupted save counts under its own name (load_state puts it back).
std::vector<std::pair<int64_t, std::string>> automatic_checkpoints(const std::string& folder);
/// Every parameter and buffer of `module` by name (tied tensors once, under each name), detached, on the CPU:
/// views of CPU tensors unless `copy` (what save_state's pre-hooks get: copies, made once, also from the GPU).
NamedTensors cpu_state_dict(const torch::nn::Module& module, bool copy);
/// Main process, after a save: moves the oldest checkpoints beyond total_limit aside (one rename each, so the
/// folder at once holds the newest total_limit) and removes them on core.removal, a background thread.
void rotate_checkpoints(AcceleratorCore& core);

}  // namespace spur::detail
