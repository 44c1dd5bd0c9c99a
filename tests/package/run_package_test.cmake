# SPDX-License-Identifier: Apache-2.0
# Installs this build into a fresh prefix, then configures, builds and runs tests/package/consumer against it
# with find_package(Spur): the path a user who links the engine takes. Run by CTest with -D variables:
# BUILD_DIR, CONSUMER_DIR, WORK_DIR.
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
