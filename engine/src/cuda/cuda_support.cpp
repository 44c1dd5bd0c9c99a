// SPDX-License-Identifier: Apache-2.0
// libspur_cuda: the code that needs LibTorch's CUDA libraries (see cuda_support.h). Loaded by libspur with
// dlopen; its one entry point returns the table of functions.
#include "cuda/cuda_support.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "compat/torch_compat.h"

// ProcessGroupNCCL's options embed NCCL structures: the nccl.h compiled here must be the one of the libnccl the
// wheel loads (cmake/SpurTorch.cmake puts the wheel's headers first). SPUR_NCCL_VERSION_CODE comes from torch.
#if defined(SPUR_NCCL_VERSION_CODE) && defined(NCCL_VERSION_CODE)
static_assert(NCCL_VERSION_CODE == SPUR_NCCL_VERSION_CODE,
              "nccl.h is not the version of the NCCL library this LibTorch loads: check the include order");
#endif

namespace spur::detail {
namespace {

c10::intrusive_ptr<c10d::ProcessGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                       std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  auto nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
  return compat::as_process_group(store, rank, size, nccl, c10::DeviceType::CUDA, true, timeout);
}

std::string device_name(int index) { return at::cuda::getDeviceProperties(index)->name; }

void empty_cache() { c10::cuda::CUDACachingAllocator::emptyCache(); }

}  // namespace
}  // namespace spur::detail

extern "C" __attribute__((visibility("default"))) const spur::detail::CudaSupport* spur_cuda_support() {
  static const spur::detail::CudaSupport table{spur::detail::kCudaSupportAbi, &spur::detail::make_nccl_group,
                                               &spur::detail::device_name, &spur::detail::empty_cache};
  return &table;
}
