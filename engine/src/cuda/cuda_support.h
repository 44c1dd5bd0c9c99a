// SPDX-License-Identifier: Apache-2.0
// The CUDA half of the engine. In a CUDA build it is a library of its own, libspur_cuda, which links LibTorch's
// CUDA libraries; libspur links only LibTorch's CPU libraries and loads libspur_cuda when it starts, if the
// machine has an NVIDIA GPU (or SPUR_LOAD_CUDA=1). A process on a machine without one never maps libtorch_cuda,
// cuBLAS, cuDNN or NCCL: ~130 MiB less private memory per rank and a faster start. Everything else CUDA in the
// engine (device placement, CUDA generators, autocast, pinned memory) goes through LibTorch's device-generic API,
// which works once libtorch_cuda is loaded and reports no CUDA otherwise.
#pragma once

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace spur::detail {

/// What libspur_cuda provides (its entry point `spur_cuda_support` returns it).
struct CudaSupport {
  /// Version of this table; libspur refuses a libspur_cuda of another.
  int abi = 2;
  /// The NCCL process group for a CUDA run.
  c10::intrusive_ptr<c10d::ProcessGroup> (*make_nccl_group)(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                            int size, std::chrono::milliseconds timeout) = nullptr;
  /// The name of CUDA device `index` ("NVIDIA H200").
  std::string (*device_name)(int index) = nullptr;
  /// Returns the CUDA caching allocator's unused blocks to the driver (torch.cuda.empty_cache()).
  void (*empty_cache)() = nullptr;
};

inline constexpr int kCudaSupportAbi = 2;

/// The loaded CUDA half, or nullptr (a CPU build, no GPU here, or it failed to load: cuda_support_status says).
const CudaSupport* cuda_support();
/// "loaded from PATH", "not loaded: no NVIDIA GPU on this machine (SPUR_LOAD_CUDA=1 loads it anyway)", or why
/// loading failed.
std::string cuda_support_status();

}  // namespace spur::detail
