# SPDX-License-Identifier: Apache-2.0
# CMAKE_PROJECT_INCLUDE for the feedforward port's configure: seed.h forced into its sources, added after
# project() so that CMake's compiler check does not compile it.
add_compile_options(-include ${CMAKE_CURRENT_LIST_DIR}/seed.h)
