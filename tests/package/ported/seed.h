// SPDX-License-Identifier: Apache-2.0
// Forced into each translation unit of pytorch-cpp's feedforward, original and port alike (-include): that program
// never seeds torch, and LibTorch 2.x seeds its default generator from the OS, so two runs of the original differ
// from each other. Seeding both the same way before main makes "the port prints the original's output" testable.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace spur_ported_test {
inline const bool seeded = [] {
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_current_seed(20261205);
  return true;
}();
}  // namespace spur_ported_test
