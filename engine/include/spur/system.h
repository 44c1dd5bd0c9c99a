// SPDX-License-Identifier: Apache-2.0
// What a bug report needs about this process: Spur's and LibTorch's versions and the BLAS library that
// LibTorch's matrix products actually run on (the reference BLAS makes every step 16-20x slower).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <spur/blas.h>

namespace spur {

std::string version();
/// LibTorch's version, as its headers give it.
std::string torch_version();

/// One line: "spur 0.1.0 | LibTorch 2.15.0 (CUDA 13.2, NCCL 2.30.7) | BLAS MKL (...)".
std::string environment_summary();

/// What this process runs on, as "key: value" rows for `spur env` (which asks spur-check for them): LibTorch's
/// version and build (CPU, or CUDA and NCCL compiled against), the CUDA devices seen, the CUDA runtime and NCCL
/// versions actually loaded and the files they were loaded from, and the BLAS.
std::vector<std::pair<std::string, std::string>> runtime_report();

}  // namespace spur
