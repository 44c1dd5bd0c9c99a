# SPDX-License-Identifier: Apache-2.0
# Finds the LibTorch that Spur builds against and makes sure the whole process uses one copy of every library.
# Included by the top-level CMakeLists.txt and, installed, by SpurConfig.cmake (so a program built against an
# installed Spur gets the same LibTorch and the same fix-ups).
#
#   SPUR_TORCH=wheel   (default) the `torch` wheel in the Python environment SPUR_PYTHON (installer/setup.sh makes
#                      it: $XDG_CACHE_HOME/spur/python, pinned by installer/python-requirements.txt). A CUDA build.
#   SPUR_TORCH=system  Debian's libtorch-dev (LibTorch 1.13, CPU), which the Debian packages are built against.
#
# The wheel ships LibTorch's C++ headers and libraries, and its CUDA libraries come in nvidia-* wheels beside it
# (nvidia/cu13/lib: cudart, cublas...; nvidia/nccl/lib: NCCL). torch's own CMake files link the CUDA runtime of
# the machine's toolkit (/usr/local/cuda) and link-resolve NCCL there too: a second, different libcudart.so.13 or
# libnccl.so.2 could then serve the process. So, for the wheel: the CUDA runtime and NCCL headers and libraries
# Spur compiles and links against are the wheel's own files, the link resolves the wheel's libraries only, and
# Spur's binaries carry an RPATH (not a RUNPATH, which LD_LIBRARY_PATH would override) naming the wheel's
# directories. The machine's toolkit serves torch's CMake check for a CUDA compiler, whose major version must be
# the wheel's. The wheel lacks Gloo's headers, which c10d's ProcessGroupGloo.hpp includes: they come from
# Debian's libgloo-dev, for type names only. Spur never links a Gloo library with the wheel (the wheel's Gloo is
# inside libtorch_cpu.so) and touches no Gloo object: ProcessGroupGloo's own members are pointers and standard
# containers, so its layout does not depend on Gloo's headers, and the engine checks it at run time anyway.

set(SPUR_TORCH "wheel" CACHE STRING "LibTorch to build against: wheel (the torch wheel in SPUR_PYTHON), system (Debian's libtorch-dev) or none (the torch-free parts only: the tsan preset)")
set_property(CACHE SPUR_TORCH PROPERTY STRINGS wheel system none)
set(SPUR_TORCH_MINIMUM 1.13)

# The environment installer/setup.sh makes: the torch wheel, Accelerate, safetensors, TensorBoard.
if(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
  set(SPUR_DEFAULT_PYTHON "$ENV{XDG_CACHE_HOME}/spur/python/bin/python")
else()
  set(SPUR_DEFAULT_PYTHON "$ENV{HOME}/.cache/spur/python/bin/python")
endif()

macro(spur_find_torch)
  set(SPUR_TORCH_PREFIX "")
  set(SPUR_TORCH_CUDA_VERSION "")
  set(SPUR_TORCH_NCCL_VERSION "")
  set(SPUR_TORCH_LIBRARY_DIRS "")
  set(_spur_wheel_includes "")
  if(SPUR_TORCH STREQUAL "wheel")
    if(NOT SPUR_PYTHON)
      set(SPUR_PYTHON "${SPUR_DEFAULT_PYTHON}" CACHE FILEPATH "Python environment holding the torch wheel")
    endif()
    if(NOT EXISTS "${SPUR_PYTHON}")
      message(FATAL_ERROR "Spur: no Python environment with the torch wheel at ${SPUR_PYTHON}.\n"
                          "  Run installer/setup.sh deps (it makes one, pinned by installer/python-requirements.txt),\n"
                          "  or pass -DSPUR_PYTHON=/path/to/python with torch installed,\n"
                          "  or build against Debian's LibTorch: cmake --preset debian (-DSPUR_TORCH=system).")
    endif()
    execute_process(
      COMMAND "${SPUR_PYTHON}" -c [=[
import glob, os, sys
import torch, torch.utils
print("version=" + torch.__version__.split("+")[0])
print("prefix=" + os.path.dirname(torch.__file__))
print("cmake=" + torch.utils.cmake_prefix_path)
print("cuda=" + (torch.version.cuda or ""))
nccl = ""
try:
    import torch.distributed as dist
    if torch.version.cuda and dist.is_available() and dist.is_nccl_available():
        nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
except Exception:
    pass
print("nccl=" + nccl)
site = os.path.dirname(os.path.dirname(torch.__file__))
print("libdirs=" + "|".join(sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))))
print("includes=" + "|".join(sorted(glob.glob(os.path.join(site, "nvidia", "*", "include")))))
]=]
      OUTPUT_VARIABLE _spur_torch_facts ERROR_VARIABLE _spur_torch_error RESULT_VARIABLE _spur_torch_result)
    if(NOT _spur_torch_result EQUAL 0)
      message(FATAL_ERROR "Spur: ${SPUR_PYTHON} cannot import torch:\n${_spur_torch_error}\n"
                          "  Run installer/setup.sh deps to (re)make the environment.")
    endif()
    string(REPLACE "\n" ";" _spur_torch_facts "${_spur_torch_facts}")
    foreach(_spur_fact IN LISTS _spur_torch_facts)
      if(_spur_fact MATCHES "^([a-z]+)=(.*)$")
        set(_spur_torch_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
      endif()
    endforeach()
    set(SPUR_TORCH_PREFIX "${_spur_torch_prefix}")
    set(SPUR_TORCH_CUDA_VERSION "${_spur_torch_cuda}")
    set(SPUR_TORCH_NCCL_VERSION "${_spur_torch_nccl}")
    # The wheel's prefix first: torch's find_library(c10 ...) would otherwise find Debian's libc10.so in /usr/lib.
    list(PREPEND CMAKE_PREFIX_PATH "${_spur_torch_prefix}" "${_spur_torch_cmake}")
    if(_spur_torch_cuda)
      string(REPLACE "|" ";" SPUR_TORCH_LIBRARY_DIRS "${_spur_torch_libdirs}")
      string(REPLACE "|" ";" _spur_wheel_includes "${_spur_torch_includes}")
      # The CUDA compiler torch's CMake files insist on: the machine's, of the wheel's major version.
      if(NOT CMAKE_CUDA_COMPILER)
        find_program(_spur_nvcc nvcc HINTS "$ENV{CUDA_HOME}/bin" /usr/local/cuda/bin)
        if(_spur_nvcc)
          set(CMAKE_CUDA_COMPILER "${_spur_nvcc}")
        endif()
      endif()
      if(NOT CMAKE_CUDA_COMPILER)
        message(FATAL_ERROR "Spur: the torch wheel ${_spur_torch_version} is a CUDA ${_spur_torch_cuda} build, and "
                            "its CMake files need a CUDA compiler: none found (nvcc on PATH, $CUDA_HOME or "
                            "/usr/local/cuda).\n  Install the CUDA ${_spur_torch_cuda} toolkit, or the wheel's own: "
                            "${SPUR_PYTHON} -m pip install nvidia-cuda-nvcc (then -DCMAKE_CUDA_COMPILER=.../nvcc).")
      endif()
      execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _spur_nvcc_out)
      string(REGEX MATCH "release ([0-9]+)\\.([0-9]+)" _spur_nvcc_release "${_spur_nvcc_out}")
      set(_spur_nvcc_version "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
      set(_spur_nvcc_major "${CMAKE_MATCH_1}")
      string(REGEX MATCH "^[0-9]+" _spur_wheel_major "${_spur_torch_cuda}")
      if(NOT _spur_nvcc_major STREQUAL _spur_wheel_major)
        message(FATAL_ERROR "Spur: the torch wheel ${_spur_torch_version} is built for CUDA ${_spur_torch_cuda}, but "
                            "${CMAKE_CUDA_COMPILER} is CUDA ${_spur_nvcc_version}: the major versions must match.\n"
                            "  Install the wheel's own compiler beside it: ${SPUR_PYTHON} -m pip install "
                            "\"nvidia-cuda-nvcc==${_spur_torch_cuda}.*\", then configure with "
                            "-DCMAKE_CUDA_COMPILER=<its bin/nvcc> -DCUDAToolkit_ROOT=<its directory>;\n"
                            "  or pin a torch built for CUDA ${_spur_nvcc_major} in installer/python-requirements.txt.")
      endif()
      set(SPUR_CUDA_COMPILER_VERSION "${_spur_nvcc_version}")
      # Spur compiles no device code: a fixed list spares torch's CMake files probing for GPUs.
      if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
        set(TORCH_CUDA_ARCH_LIST "9.0")
      endif()
      if(NOT _spur_torch_nccl)
        message(FATAL_ERROR "Spur: the torch wheel ${_spur_torch_version} (CUDA ${_spur_torch_cuda}) reports no NCCL "
                            "(torch.distributed.is_nccl_available() is False): multi-GPU runs could not synchronise.\n"
                            "  Reinstall it with its nvidia-nccl wheel: installer/setup.sh deps.")
      endif()
    endif()
  elseif(SPUR_TORCH STREQUAL "system")
    # Debian's libtorch-dev: /usr. Nothing of a wheel may leak in.
    list(FILTER CMAKE_PREFIX_PATH EXCLUDE REGEX "site-packages/torch")
  else()
    message(FATAL_ERROR "Spur: SPUR_TORCH is '${SPUR_TORCH}': use wheel or system")
  endif()

  find_package(Torch REQUIRED GLOBAL)
  if(Torch_VERSION VERSION_LESS SPUR_TORCH_MINIMUM)
    message(FATAL_ERROR "Spur: LibTorch ${Torch_VERSION} (${Torch_DIR}) is older than the oldest Spur supports "
                        "(${SPUR_TORCH_MINIMUM}).\n  Use the pinned wheel (installer/setup.sh deps, then cmake --preset "
                        "default) or Debian 12's libtorch-dev (cmake --preset debian).")
  endif()
  set(SPUR_TORCH_VERSION "${Torch_VERSION}")
  # The C++ standard this LibTorch's headers need (the wheel's 2.x: C++20, stated in torch/all.h; 1.13: C++17).
  # Spur::spur carries it, so a program linking Spur::spur needs no standard of its own.
  set(SPUR_TORCH_CXX_STANDARD 17)
  foreach(_spur_dir IN LISTS TORCH_INCLUDE_DIRS)
    if(EXISTS "${_spur_dir}/torch/all.h")
      file(STRINGS "${_spur_dir}/torch/all.h" _spur_cxx20 REGEX "C\\+\\+20 or later")
      if(_spur_cxx20)
        set(SPUR_TORCH_CXX_STANDARD 20)
      endif()
    endif()
  endforeach()
  set(SPUR_WITH_CUDA OFF)
  if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
    set(SPUR_WITH_CUDA ON)
  endif()

  # torch's MKL target names ${MKL_ROOT}/lib/intel64 and friends even when MKL_ROOT is empty: "/lib/intel64"
  # would land in every binary's RPATH. Keep only directories that exist.
  if(TARGET caffe2::mkl)
    get_target_property(_spur_mkl_dirs caffe2::mkl INTERFACE_LINK_DIRECTORIES)
    set(_spur_kept "")
    foreach(_spur_dir IN LISTS _spur_mkl_dirs)
      if(_spur_dir AND IS_DIRECTORY "${_spur_dir}" AND NOT _spur_dir MATCHES "^/lib")
        list(APPEND _spur_kept "${_spur_dir}")
      endif()
    endforeach()
    set_target_properties(caffe2::mkl PROPERTIES INTERFACE_LINK_DIRECTORIES "${_spur_kept}")
  endif()

  if(SPUR_TORCH STREQUAL "wheel")
    # Every LibTorch library is the wheel's.
    foreach(_spur_target c10 torch_cpu torch_cuda c10_cuda torch)
      if(TARGET ${_spur_target})
        get_target_property(_spur_location ${_spur_target} IMPORTED_LOCATION_RELEASE)
        if(NOT _spur_location)
          get_target_property(_spur_location ${_spur_target} IMPORTED_LOCATION)
        endif()
        if(_spur_location AND NOT _spur_location MATCHES "^${SPUR_TORCH_PREFIX}/")
          message(FATAL_ERROR "Spur: LibTorch's ${_spur_target} resolved to ${_spur_location}, outside the wheel "
                              "(${SPUR_TORCH_PREFIX}): another LibTorch on this machine is in the way.")
        endif()
      endif()
    endforeach()
    if(SPUR_WITH_CUDA)
      # The wheel's CUDA runtime instead of the toolkit's, and the wheel's CUDA and NCCL headers first.
      set(_spur_cudart "")
      foreach(_spur_dir IN LISTS SPUR_TORCH_LIBRARY_DIRS)
        file(GLOB _spur_found "${_spur_dir}/libcudart.so.[0-9]*")
        if(_spur_found)
          list(GET _spur_found 0 _spur_cudart)
        endif()
      endforeach()
      if(NOT _spur_cudart)
        message(FATAL_ERROR "Spur: the torch wheel's CUDA runtime (libcudart.so.N under site-packages/nvidia/*/lib) "
                            "is missing: reinstall it (installer/setup.sh deps).")
      endif()
      set(SPUR_CUDA_RUNTIME "${_spur_cudart}")
      if(TARGET CUDA::cudart)
        set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION "${_spur_cudart}")
        get_target_property(_spur_configs CUDA::cudart IMPORTED_CONFIGURATIONS)
        foreach(_spur_config IN LISTS _spur_configs)
          if(_spur_config)
            set_target_properties(CUDA::cudart PROPERTIES IMPORTED_LOCATION_${_spur_config} "${_spur_cudart}")
          endif()
        endforeach()
      endif()
      # Headers: where a target names the toolkit's include directory, the wheel's come first (its cuda_runtime
      # and nccl.h are the versions of the libraries loaded; ProcessGroupNCCL's options embed ncclConfig_t).
      foreach(_spur_target CUDA::cudart CUDA::cudart_static CUDA::toolkit CUDA::nvrtc CUDA::cuda_driver torch::cudart
                           torch_cuda torch_cuda_library c10_cuda torch_cpu_library torch)
        if(NOT TARGET ${_spur_target})
          continue()
        endif()
        get_target_property(_spur_incs ${_spur_target} INTERFACE_INCLUDE_DIRECTORIES)
        if(NOT _spur_incs)
          continue()
        endif()
        set(_spur_new "")
        foreach(_spur_inc IN LISTS _spur_incs)
          if(_spur_inc IN_LIST CUDAToolkit_INCLUDE_DIRS OR _spur_inc MATCHES "^/usr/local/cuda")
            list(APPEND _spur_new ${_spur_wheel_includes})
          endif()
          list(APPEND _spur_new "${_spur_inc}")
        endforeach()
        list(REMOVE_DUPLICATES _spur_new)
        set_target_properties(${_spur_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_spur_new}")
      endforeach()
      if(NOT TARGET spur_torch_wheel)
        add_library(spur_torch_wheel INTERFACE IMPORTED GLOBAL)
        set_target_properties(spur_torch_wheel PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_spur_wheel_includes}")
        set(_spur_link_options "")
        foreach(_spur_dir IN LISTS SPUR_TORCH_LIBRARY_DIRS)
          list(APPEND _spur_link_options "LINKER:-rpath-link,${_spur_dir}")
        endforeach()
        # RPATH, not RUNPATH: LD_LIBRARY_PATH (say /usr/local/cuda/lib64) must not swap the wheel's libraries.
        list(APPEND _spur_link_options "LINKER:--disable-new-dtags")
        set_target_properties(spur_torch_wheel PROPERTIES INTERFACE_LINK_OPTIONS "${_spur_link_options}")
        set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_LIBRARIES spur_torch_wheel)
      endif()
    endif()
  endif()
  # spur_torch_cpu: LibTorch without its CUDA libraries, what libspur and programs built against it link. The
  # engine's CUDA half (libspur_cuda) links `torch` and is loaded at start-up only where there is a GPU.
  if(NOT TARGET spur_torch_cpu)
    add_library(spur_torch_cpu INTERFACE IMPORTED GLOBAL)
    set_target_properties(spur_torch_cpu PROPERTIES INTERFACE_COMPILE_FEATURES cxx_std_${SPUR_TORCH_CXX_STANDARD})
    if(SPUR_WITH_CUDA AND TARGET torch_cpu_library)
      get_target_property(_spur_torch_options torch INTERFACE_COMPILE_OPTIONS)
      set(_spur_cpu_links torch_cpu_library)
      if(TARGET spur_torch_wheel)
        list(APPEND _spur_cpu_links spur_torch_wheel)
      endif()
      set_target_properties(spur_torch_cpu PROPERTIES
        INTERFACE_LINK_LIBRARIES "${_spur_cpu_links}"
        INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS}")
      if(_spur_torch_options)
        set_target_properties(spur_torch_cpu PROPERTIES INTERFACE_COMPILE_OPTIONS "${_spur_torch_options}")
      endif()
    else()
      set_target_properties(spur_torch_cpu PROPERTIES INTERFACE_LINK_LIBRARIES torch)
    endif()
  endif()

  if(SPUR_WITH_CUDA)
    message(STATUS "Spur: LibTorch ${SPUR_TORCH_VERSION} (${SPUR_TORCH}: ${Torch_DIR}), CUDA ${SPUR_TORCH_CUDA_VERSION} "
                   "(runtime ${SPUR_CUDA_RUNTIME}), NCCL ${SPUR_TORCH_NCCL_VERSION}")
  else()
    message(STATUS "Spur: LibTorch ${SPUR_TORCH_VERSION} (${SPUR_TORCH}: ${Torch_DIR}), CPU only")
  endif()
endmacro()
