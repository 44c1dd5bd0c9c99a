// SPDX-License-Identifier: Apache-2.0
// Which BLAS is loaded. Debian's LibTorch links the generic libblas.so.3, which the alternatives system points
// at OpenBLAS or at the 16-20x slower reference BLAS; only the file actually loaded tells. No torch, no Qt:
// the engine and the `spur` command both use it.
#include <spur/blas.h>

#include <dlfcn.h>
#include <link.h>

#include <filesystem>
#include <utility>
#include <vector>

namespace spur {

BlasInfo blas_info() {
  std::vector<std::string> loaded;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string>*>(data)->push_back(info->dlpi_name);
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
  if (result.name == "unknown") {
    // The torch wheels link MKL statically into libtorch_cpu.so: find the library that defines its entry point.
    for (const auto& [symbol, name] :
         {std::pair{"MKL_Get_Version_String", "MKL"}, {"openblas_get_config", "OpenBLAS"}}) {
      if (void* address = dlsym(RTLD_DEFAULT, symbol)) {
        Dl_info where{};
        if (dladdr(address, &where) && where.dli_fname) return {name, where.dli_fname, false};
        return {name, "", false};
      }
    }
  }
  return result;
}

BlasInfo blas_info_for_libtorch() {
  // Loads what LibTorch would load (a no-op inside a process that has LibTorch already).
  dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL);
  return blas_info();
}

}  // namespace spur
