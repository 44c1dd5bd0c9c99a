// SPDX-License-Identifier: Apache-2.0
// Versions, and the one-line summary training programs print first.
#include <spur/system.h>

#include <dlfcn.h>
#include <link.h>

#include <torch/cuda.h>
#include <torch/version.h>

#include "cuda/cuda_support.h"

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

namespace {

// The files of the loaded libraries whose name starts with `stem` (libcudart, libnccl...), one per line.
std::string loaded_files(const std::string& stem) {
  std::vector<std::string> found;
  std::pair<const std::string*, std::vector<std::string>*> search{&stem, &found};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* pair = static_cast<std::pair<const std::string*, std::vector<std::string>*>*>(data);
        const std::string name = info->dlpi_name ? info->dlpi_name : "";
        const auto slash = name.rfind('/');
        if (name.compare(slash == std::string::npos ? 0 : slash + 1, pair->first->size(), *pair->first) == 0) {
          pair->second->push_back(name);
        }
        return 0;
      },
      &search);
  std::string text;
  for (const auto& file : found) text += (text.empty() ? "" : ", ") + file;
  return text.empty() ? "not loaded" : text;
}

std::string version_code(int code, int major_scale, int minor_scale) {
  return std::to_string(code / major_scale) + "." + std::to_string(code % major_scale / minor_scale) +
         (minor_scale > 1 ? "." + std::to_string(code % minor_scale) : "");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> runtime_report() {
  std::vector<std::pair<std::string, std::string>> rows;
#ifdef SPUR_WITH_CUDA
  rows.emplace_back("LibTorch", torch_version() + ", CUDA build (compiled against CUDA " SPUR_TORCH_CUDA_VERSION
                                                  ", NCCL " SPUR_TORCH_NCCL_VERSION ")");
  rows.emplace_back("CUDA support", detail::cuda_support_status());
  rows.emplace_back("LibTorch CUDA library", loaded_files("libtorch_cuda.so"));
  const auto* cuda = detail::cuda_support();
  const auto devices = torch::cuda::device_count();
  std::string seen = std::to_string(devices);
  for (size_t i = 0; cuda && i < devices; ++i) seen += (i == 0 ? ": " : "; ") + cuda->device_name(static_cast<int>(i));
  if (devices == 0) seen += " (runs use the CPU)";
  rows.emplace_back("CUDA devices", seen);
  // The runtime and NCCL loaded into this process, through the symbols LibTorch's libraries brought in.
  using GetVersion = int (*)(int*);
  int code = 0;
  if (auto* get = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion")); get && get(&code) == 0) {
    rows.emplace_back("CUDA runtime (loaded)", version_code(code, 1000, 10) + " from " + loaded_files("libcudart.so"));
  }
  if (auto* get = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion")); get && get(&code) == 0) {
    rows.emplace_back("NCCL (loaded)", version_code(code, 10000, 100) + " from " + loaded_files("libnccl.so"));
  }
#else
  rows.emplace_back("LibTorch", torch_version() + ", CPU build");
  rows.emplace_back("CUDA support", detail::cuda_support_status());
  rows.emplace_back("LibTorch CUDA library", loaded_files("libtorch_cuda.so"));
  rows.emplace_back("CUDA devices", "none (this LibTorch has no CUDA)");
#endif
  const auto blas = blas_info();
  rows.emplace_back("BLAS", blas.name + (blas.path.empty() ? "" : " (" + blas.path + ")"));
  return rows;
}

}  // namespace spur
