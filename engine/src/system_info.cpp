// SPDX-License-Identifier: Apache-2.0
// Versions, and the one-line summary training programs print first.
#include <spur/system.h>

#include <torch/version.h>

#include <spur/version.h>

namespace spur {

std::string version() { return SPUR_VERSION; }

std::string torch_version() { return TORCH_VERSION; }

std::string environment_summary() {
  const auto blas = blas_info();
  std::string line = "spur " + version() + " | LibTorch " + torch_version();
#ifdef SPUR_WITH_CUDA
  line += " (CUDA " SPUR_TORCH_CUDA_VERSION ", NCCL " SPUR_TORCH_NCCL_VERSION ")";
#endif
  line += " | BLAS " + blas.name;
  if (!blas.path.empty()) line += " (" + blas.path + ")";
  return line;
}

}  // namespace spur
