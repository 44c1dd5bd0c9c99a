# SPDX-License-Identifier: Apache-2.0
# Compiler cache: torch headers cost ~13 s per translation unit, so ccache (with the sloppiness that precompiled
# headers need) pays for itself from the second build on. Skipped when ccache is absent or a launcher is set.
find_program(SPUR_CCACHE ccache)
# Paths below the base directory are hashed relative to it, so clones in other places share the cache.
if(NOT SPUR_CCACHE_BASEDIR)
  set(SPUR_CCACHE_BASEDIR "${CMAKE_SOURCE_DIR}")
endif()
if(SPUR_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      "CCACHE_BASEDIR=${SPUR_CCACHE_BASEDIR}" "CCACHE_NOHASHDIR=1"
      ${SPUR_CCACHE})
  message(STATUS "Spur: compiling through ccache (${SPUR_CCACHE})")
endif()
