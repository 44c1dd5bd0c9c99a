// SPDX-License-Identifier: Apache-2.0
// Versions and the BLAS actually loaded. Debian's LibTorch links the generic libblas.so.3, which the
// alternatives system points at OpenBLAS or at the 16-20x slower reference BLAS; only the loaded file tells.
#include <spur/system.h>

#include <link.h>

#include <filesystem>
#include <vector>

#include <torch/version.h>

#include <spur/version.h>

namespace spur {

std::string version() { return SPUR_VERSION; }

std::string torch_version() { return TORCH_VERSION; }

BlasInfo blas_info() {
  std::vector<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
        return 0;
      },
      &loaded);

  BlasInfo result{"unknown", "", false};
  for (const auto& name : loaded) {
    std::error_code error;
    auto real = std::filesystem::canonical(name, error);
    const std::string path = error ? name : real.string();
    const std::string file = std::filesystem::path(path).filename().string();
    auto has = [&](const char* word) { return path.find(word) != std::string::npos; };
    if (has("mkl_rt") || has("libmkl")) return {"MKL", path, false};
    if (has("openblas")) return {"OpenBLAS", path, false};
    if (has("blis")) return {"BLIS", path, false};
    if (has("atlas")) return {"ATLAS", path, false};
    if (file.rfind("libblas.so", 0) == 0) result = {"reference BLAS", path, has("/blas/") || has("netlib")};
  }
  return result;
}

std::string environment_summary() {
  const auto blas = blas_info();
  std::string line = "spur " + version() + " | LibTorch " + torch_version() + " | BLAS " + blas.name;
  if (!blas.path.empty()) line += " (" + blas.path + ")";
  return line;
}

}  // namespace spur
