// SPDX-License-Identifier: Apache-2.0
// What the examples do with their automatic checkpoints (ProjectConfiguration) besides resuming. Header-only: the
// examples stay single programs.
#pragma once

#include <string>

#include <spur/accelerator.h>

/// A fresh run in an output folder that holds another run's checkpoints numbers its own after them (the oldest go
/// by the total limit) instead of stopping at "checkpoint_0 already exists".
inline void number_after_old_checkpoints(spur::Accelerator& accelerator) {
  const std::string latest = accelerator.latest_checkpoint();
  if (latest.empty()) return;
  accelerator.set_save_iteration(std::stoll(latest.substr(latest.rfind('_') + 1)) + 1);
}
