# SPDX-License-Identifier: Apache-2.0
# Installs this build into a fresh prefix, then configures, builds and runs tests/package/consumer against it
# with find_package(Spur): the path a user who links the engine takes. Then the program's own find_package(Torch)
# before Spur's: the LibTorch Spur was built against configures; another one (Debian's beside the wheel's, or the
# other way round) stops configuring with both named. Run by CTest with -D variables: BUILD_DIR, CONSUMER_DIR,
# WORK_DIR.
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${prefix}"
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
foreach(required include/spur/spur.h include/spur/version.h lib/cmake/Spur/SpurConfig.cmake)
  if(NOT EXISTS "${prefix}/${required}")
    message(FATAL_ERROR "the installed package lacks ${required}")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G Ninja
                        "-DCMAKE_PREFIX_PATH=${prefix}" -DCMAKE_BUILD_TYPE=Release
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK_DIR}/build/train" OUTPUT_VARIABLE out COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "${out}")
if(NOT out MATCHES "consumer built against spur")
  message(FATAL_ERROR "unexpected output: ${out}")
endif()

# find_package(Torch) first. Spur's own LibTorch, and the other one on this machine when there is one.
file(STRINGS "${BUILD_DIR}/CMakeCache.txt" ours REGEX "^Torch_DIR:")
string(REGEX REPLACE "^[^=]*=" "" ours "${ours}")
file(STRINGS "${BUILD_DIR}/CMakeCache.txt" python REGEX "^SPUR_(PEER_)?PYTHON:")  # (Debian's tree: the peers')
if(python)
  list(GET python 0 python)
endif()
string(REGEX REPLACE "^[^=]*=" "" python "${python}")
set(others /usr/lib/x86_64-linux-gnu/cmake/Torch)
if(python)
  execute_process(COMMAND "${python}" -c "import torch, os; print(os.path.dirname(torch.__file__))"
                  OUTPUT_VARIABLE wheel OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE no_wheel ERROR_QUIET)
  if(NOT no_wheel)
    list(APPEND others "${wheel}/share/cmake/Torch")
  endif()
endif()
set(other "")
get_filename_component(ours_real "${ours}" REALPATH)
foreach(candidate IN LISTS others)
  get_filename_component(real "${candidate}" REALPATH)
  if(EXISTS "${candidate}/TorchConfig.cmake" AND NOT real STREQUAL ours_real)
    set(other "${candidate}")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/torch-first" -G Ninja
                        "-DCMAKE_PREFIX_PATH=${prefix}" -DCONSUMER_TORCH_FIRST=ON "-DTorch_DIR=${ours}"
                RESULT_VARIABLE failed OUTPUT_VARIABLE log ERROR_VARIABLE log)
if(failed)
  message(FATAL_ERROR "find_package(Torch) of Spur's own LibTorch (${ours}) before find_package(Spur) failed:\n${log}")
endif()
if(other)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${WORK_DIR}/torch-first-other" -G Ninja
                          "-DCMAKE_PREFIX_PATH=${prefix}" -DCONSUMER_TORCH_FIRST=ON "-DTorch_DIR=${other}"
                  RESULT_VARIABLE failed OUTPUT_VARIABLE log ERROR_VARIABLE log)
  get_filename_component(other_real "${other}" REALPATH)
  string(REPLACE "\n" " " flat "${log}")
  string(REGEX REPLACE " +" " " flat "${flat}")
  string(FIND "${flat}" "one program cannot use both" said)
  string(FIND "${flat}" "${ours_real}" named)
  if(NOT failed OR said EQUAL -1 OR named EQUAL -1)
    message(FATAL_ERROR "find_package(Torch) of another LibTorch (${other}) before find_package(Spur) did not stop "
                        "configuring naming both:\n${log}")
  endif()
  message(STATUS "another LibTorch first: refused, naming both")
else()
  message(STATUS "no other LibTorch on this machine: the refusal of another one is not tried")
endif()
