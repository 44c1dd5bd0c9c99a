# SPDX-License-Identifier: Apache-2.0
# Debian packages with CPack (`cmake --build build --target package`, or `cpack` in the build directory):
#   spur         the engine (shared library, headers, CMake package Spur), the `spur` command, spur-check,
#                the example, man page and bash completion
#   spur-studio  Spur Studio, its .desktop entry, AppStream metainfo, icons and man page
# Versions come from project(VERSION); library dependencies from dpkg-shlibdeps, plus what building against
# the headers needs.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spur)
set(CPACK_PACKAGE_VENDOR "The Spur developers")
set(CPACK_PACKAGE_CONTACT "The Spur developers <spur@spur.dev>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# CPackDeb prepends any summary but its own default to every package's description; each package's summary is
# the first line of its CPACK_DEBIAN_<COMPONENT>_DESCRIPTION instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_HOMEPAGE_URL "${PROJECT_HOMEPAGE_URL}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL engine)
if(TARGET spur_studio_app)
  list(APPEND CPACK_COMPONENTS_ALL studio)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# spur and spur-check link libspur.so from the same package.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/engine)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(CPACK_DEBIAN_ENGINE_PACKAGE_NAME spur)
set(CPACK_DEBIAN_ENGINE_PACKAGE_SECTION science)
# Programs built against Spur include LibTorch's and Gloo's headers, which must be those libspur was built with
# (the same minor version); OpenBLAS keeps LibTorch's steps fast.
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)" _torch_minor "${SPUR_TORCH_VERSION}")
math(EXPR _torch_next "${CMAKE_MATCH_2} + 1")
set(CPACK_DEBIAN_ENGINE_PACKAGE_DEPENDS
    "libtorch-dev (>= ${_torch_minor}), libtorch-dev (<< ${CMAKE_MATCH_1}.${_torch_next}), libgloo-dev, libopenblas0-pthread | libopenblas0")
set(CPACK_DEBIAN_ENGINE_PACKAGE_RECOMMENDS "openssh-client, cmake, g++")
set(CPACK_DEBIAN_ENGINE_PACKAGE_SUGGESTS "awscli, spur-studio")
# The first line is the summary; CPack indents the rest for the control file.
set(CPACK_DEBIAN_ENGINE_DESCRIPTION "Accelerate-style distributed training for LibTorch programs
Spur runs one LibTorch (PyTorch C++) training program on one CPU, many processes, several
machines over SSH or Amazon SageMaker, with mixed precision and gradient accumulation, by
adding a few lines to its loop. This package holds the engine (libspur, headers and the
CMake package Spur), the spur command (config, launch, test, runs, env) and the examples
(an MLP, a Fashion-MNIST CNN, a byte-level GPT).")

set(CPACK_DEBIAN_STUDIO_PACKAGE_NAME spur-studio)
set(CPACK_DEBIAN_STUDIO_PACKAGE_SECTION science)
set(CPACK_DEBIAN_STUDIO_PACKAGE_DEPENDS "spur (= ${PROJECT_VERSION})")
# The demo workspace trains the Fashion-MNIST example on Debian's copy of the data set.
set(CPACK_DEBIAN_STUDIO_PACKAGE_RECOMMENDS "dataset-fashion-mnist")
set(CPACK_DEBIAN_STUDIO_DESCRIPTION "desktop app to set up, launch and watch Spur training runs
Spur Studio writes run configurations in Hugging Face Accelerate's format, launches, stops
and relaunches runs, and shows every logged metric live with the runs overlaid, each
rank's console, and a searchable history of runs.")

include(CPack)
