// SPDX-License-Identifier: Apache-2.0
// Precompiled header for the engine: the LibTorch headers most of its files include (~13 s each to parse).
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/types.h>
