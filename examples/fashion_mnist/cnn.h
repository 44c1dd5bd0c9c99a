// SPDX-License-Identifier: Apache-2.0
// The Fashion-MNIST example's CNN, shared with its benchmark (tests/bench/workload_bench.cpp); the Accelerate
// peer (tests/bench/workload_peer.py) builds the same layers.
#pragma once

#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/pooling.h>

// Three blocks of two 3x3 convolutions (batch norm, ReLU), max-pooled after the first two, then global average
// pooling and a linear classifier: 28x28 -> 14x14 -> 7x7, 24-48-96 channels, ~170,000 parameters.
inline torch::nn::Sequential make_cnn() {
  torch::nn::Sequential net;
  int64_t in = 1;
  const int64_t widths[] = {24, 48, 96};
  for (int block = 0; block < 3; ++block) {
    for (int layer = 0; layer < 2; ++layer) {
      net->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, widths[block], 3).padding(1).bias(false)));
      net->push_back(torch::nn::BatchNorm2d(widths[block]));
      net->push_back(torch::nn::ReLU());
      in = widths[block];
    }
    if (block < 2) net->push_back(torch::nn::MaxPool2d(2));
  }
  net->push_back(torch::nn::AdaptiveAvgPool2d(1));
  net->push_back(torch::nn::Flatten());
  net->push_back(torch::nn::Dropout(0.1));
  net->push_back(torch::nn::Linear(in, 10));
  return net;
}
