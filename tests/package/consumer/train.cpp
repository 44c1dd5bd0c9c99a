// SPDX-License-Identifier: Apache-2.0
// The smallest Spur program: prepare, backward, step; prints the version so the test knows which build ran.
#include <iostream>

#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <spur/spur.h>

int main() {
  spur::Accelerator accelerator;
  torch::nn::Linear net(4, 1);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  auto x = torch::randn({8, 4});
  float first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    optimizer.zero_grad();
    auto loss = (model(x) - 1).pow(2).mean();
    accelerator.backward(loss);
    optimizer.step();
    (step == 0 ? first : last) = loss.item<float>();
  }
  std::cout << "consumer built against spur " << SPUR_VERSION << ", loss " << first << " -> " << last << "\n";
  return last < first ? 0 : 1;
}
