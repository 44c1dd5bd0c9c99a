// SPDX-License-Identifier: Apache-2.0
// Loading libspur_cuda when libspur starts (see cuda_support.h): before main, so that a program asking LibTorch
// whether CUDA is available (torch::cuda::is_available()) gets the same answer as with LibTorch alone, on a
// machine with an NVIDIA GPU.
#include "cuda/cuda_support.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace spur::detail {
namespace {

struct State {
  const CudaSupport* support = nullptr;
  std::string status = "not loaded: this build of Spur has no CUDA (LibTorch without CUDA)";
};

// An NVIDIA driver with at least one GPU, as the kernel module shows it (also inside containers given GPUs).
bool nvidia_gpu_present() {
  std::error_code error;
  const std::filesystem::path gpus = "/proc/driver/nvidia/gpus";
  if (std::filesystem::is_directory(gpus, error) && !std::filesystem::is_empty(gpus, error)) return true;
  return std::filesystem::exists("/dev/nvidia0", error);
}

State load() {
  State state;
#ifdef SPUR_WITH_CUDA
  const char* forced = std::getenv("SPUR_LOAD_CUDA");
  const std::string choice = forced ? forced : "";
  if (choice == "0") {
    state.status = "not loaded: SPUR_LOAD_CUDA=0";
    return state;
  }
  if (choice != "1" && !nvidia_gpu_present()) {
    state.status = "not loaded: no NVIDIA GPU on this machine (SPUR_LOAD_CUDA=1 loads it anyway)";
    return state;
  }
  // libspur_cuda sits beside libspur (build tree and installed alike).
  Dl_info self{};
  std::string path = "libspur_cuda.so";
  if (dladdr(reinterpret_cast<void*>(&nvidia_gpu_present), &self) && self.dli_fname) {
    path = (std::filesystem::path(self.dli_fname).parent_path() / ("libspur_cuda.so." SPUR_SOVERSION)).string();
  }
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!library) {
    const char* why = dlerror();
    state.status = std::string("failed to load ") + path + ": " + (why ? why : "unknown error");
    return state;
  }
  using Entry = const CudaSupport* (*)();
  auto entry = reinterpret_cast<Entry>(dlsym(library, "spur_cuda_support"));
  const CudaSupport* support = entry ? entry() : nullptr;
  if (!support || support->abi != kCudaSupportAbi) {
    state.status = path + " is not the libspur_cuda of this libspur (another version)";
    return state;
  }
  state.support = support;
  state.status = "loaded from " + path;
#endif
  return state;
}

const State& state() {
  static const State loaded = load();
  return loaded;
}

// At start-up, not at first use.
[[maybe_unused]] const bool kLoadedAtStart = (state(), true);

}  // namespace

const CudaSupport* cuda_support() { return state().support; }
std::string cuda_support_status() { return state().status; }

}  // namespace spur::detail
