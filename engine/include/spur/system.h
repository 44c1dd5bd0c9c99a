// SPDX-License-Identifier: Apache-2.0
// What a bug report needs about this process: Spur's and LibTorch's versions and the BLAS library that
// LibTorch's matrix products actually run on (the reference BLAS makes every step 16-20x slower).
#pragma once

#include <string>

#include <spur/blas.h>

namespace spur {

std::string version();
/// LibTorch's version, as its headers give it.
std::string torch_version();

/// One line: "spur 0.1.0 | LibTorch 1.13.0 | BLAS OpenBLAS (/usr/lib/...)".
std::string environment_summary();

}  // namespace spur
