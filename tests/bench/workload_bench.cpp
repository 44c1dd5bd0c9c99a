// SPDX-License-Identifier: Apache-2.0
// Training-step benchmark on the real workloads (shared/reference/benchmarks.md): the examples' own models.
//   workload_bench cnn|gpt [--steps N]   one rank of a Spur run (RANK, WORLD_SIZE... from the driver)
// cnn: the Fashion-MNIST CNN, 64 images of 1x28x28 per process, AdamW; gpt: the byte-level GPT (4 layers, 4 heads,
// width 128, context 128), 32 sequences per process, AdamW. Data made before timing. Timed: forward, loss,
// backward, clipping, optimizer step and zero_grad, median over the steps after 10 warm-up, rank 0. Prints one JSON
// object per rank (median_ms, peak_rss_mib, pss_mib, private_mib); tests/bench/workload_peer.py is the same under
// Accelerate.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/optim/adamw.h>

#include <spur/spur.h>

#include "bench_support.h"

#include "../../examples/fashion_mnist/cnn.h"
#include "../../examples/gpt/gpt_model.h"

namespace {

using spur::bench::now_ms;
using spur::bench::print_rank_record;

template <typename Model, typename Loss>
int run(spur::Accelerator& accelerator, Model net, const std::vector<torch::Tensor>& xs,
        const std::vector<torch::Tensor>& ys, Loss loss_fn, const std::string& name, int steps) {
  torch::optim::AdamW adamw(net->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
  auto [model, optimizer] = accelerator.prepare(net, adamw);
  model->train();
  std::vector<double> times;
  for (int i = 0; i < 10 + steps; ++i) {
    const double t0 = now_ms();
    auto loss = loss_fn(model(xs[i % xs.size()]), ys[i % ys.size()]);
    accelerator.backward(loss);
    accelerator.clip_grad_norm_(model, 1.0);
    optimizer.step();
    optimizer.zero_grad();
    if (i >= 10) times.push_back(now_ms() - t0);
  }
  print_rank_record(name, static_cast<long long>(accelerator.process_index()), times);
  accelerator.wait_for_everyone();
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) throw spur::Error("usage: workload_bench cnn|gpt [--steps N]");
  const std::string workload = argv[1];
  int steps = 100;
  if (argc >= 4 && std::string(argv[2]) == "--steps") steps = std::max(5, std::stoi(argv[3]));
  spur::Accelerator accelerator;
  torch::manual_seed(0);
  std::vector<torch::Tensor> xs, ys;
  if (workload == "cnn") {
    for (int i = 0; i < 8; ++i) {
      xs.push_back(torch::randn({64, 1, 28, 28}));
      ys.push_back(torch::randint(0, 10, {64}));
    }
    return run(
        accelerator, make_cnn(), xs, ys,
        [](const torch::Tensor& out, const torch::Tensor& y) { return torch::nn::functional::cross_entropy(out, y); },
        "cnn", steps);
  }
  if (workload == "gpt") {
    for (int i = 0; i < 8; ++i) {
      auto window = torch::randint(0, 256, {32, 129});
      xs.push_back(window.narrow(1, 0, 128).contiguous());
      ys.push_back(window.narrow(1, 1, 128).contiguous());
    }
    return run(
        accelerator, Gpt(128, 4, 4, 128, 0.0), xs, ys,
        [](const torch::Tensor& logits, const torch::Tensor& y) {
          return torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), y.reshape({-1}));
        },
        "gpt", steps);
  }
  throw spur::Error("unknown workload " + workload + " (cnn, gpt)");
} catch (const std::exception& e) {
  std::cerr << "workload_bench: " << e.what() << "\n";
  return 1;
}
