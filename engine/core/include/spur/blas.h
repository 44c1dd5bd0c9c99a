// SPDX-License-Identifier: Apache-2.0
// The BLAS library LibTorch's matrix products run on, found among the shared objects loaded into this process.
// Torch-free (engine/core), so the `spur` command can report it too.
#pragma once

#include <string>

namespace spur {

struct BlasInfo {
  std::string name;   ///< "OpenBLAS", "reference BLAS", "MKL", "BLIS", "ATLAS" or "unknown".
  std::string path;   ///< The shared object in use, symlinks resolved.
  bool slow = false;  ///< True for the reference BLAS (every LibTorch step 16-20x slower).
};

/// The BLAS loaded into this process.
BlasInfo blas_info();
/// The BLAS a LibTorch program would load here (loads libblas.so.3 first if this process has not).
BlasInfo blas_info_for_libtorch();

}  // namespace spur
