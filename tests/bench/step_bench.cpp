// SPDX-License-Identifier: Apache-2.0
// Training-step benchmark on reference/benchmarks.md's workloads (SGD lr 0.01, cross-entropy, fp32).
//   step_bench single WORKLOAD [--steps N]   one process: hand-written LibTorch step vs Spur step, interleaved
//   step_bench rank WORKLOAD [--steps N]     one rank of a Spur DDP run (RANK, WORLD_SIZE... from the driver)
//   step_bench adamw WORKLOAD [--steps N]    the same with AdamW (lr 1e-3, weight decay 0.01): zero_bench.py runs it
//                                            with SPUR_ZERO_STAGE 0, 1, 2 and 3 (issues 17, 37); with
//                                            SPUR_BENCH_FULLY_SHARD=1 each Linear is a spur::fully_shard unit
// With SPUR_PROGRESS_FILE set (what `spur launch --hang_timeout` gives a rank), `rank` also prints what progress
// reporting costs: the file's changes per step and the time of one operation's report (enter and leave).
// Prints one JSON object per line; run_benchmarks.py turns them into ratios.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/cuda.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <spur/fully_shard.h>
#include <spur/spur.h>

#include "bench_support.h"
#include <spur/core/progress_file.h>

namespace {

using spur::bench::median;
using spur::bench::now_ms;
using spur::bench::print_rank_record;

struct Workload {
  std::string name;
  int64_t in, hidden, out, batch;
  int64_t layers = 1;  // hidden-to-hidden Linear layers
};

Workload workload(const std::string& name) {
  if (name == "small") return {"small", 256, 512, 10, 64};
  if (name == "large") return {"large", 1024, 2048, 10, 128};
  // Issue 17: a model whose Adam state dominates memory (21 M parameters, small batch).
  if (name == "wide") return {"wide", 1024, 4096, 10, 32};
  // And one where the model state dwarfs a LibTorch process's own ~130 MiB (75 M parameters, 300 MB).
  if (name == "wider") return {"wider", 1024, 8192, 10, 8};
  // Issue 37: 75 M parameters in 18 equal blocks (each 2048 x 2048), where sharding per block can pay.
  if (name == "deep") return {"deep", 2048, 2048, 10, 32, 17};
  throw spur::Error("unknown workload " + name + " (small, large, wide, wider, deep)");
}

torch::nn::Sequential make_model(const Workload& w) {
  torch::manual_seed(0);
  torch::nn::Sequential model(torch::nn::Linear(w.in, w.hidden), torch::nn::ReLU());
  for (int64_t i = 0; i < w.layers; ++i) {
    model->push_back(torch::nn::Linear(w.hidden, w.hidden));
    model->push_back(torch::nn::ReLU());
  }
  model->push_back(torch::nn::Linear(w.hidden, w.out));
  return model;
}

// The same layers, each a spur::fully_shard unit (a Sequential calls its children itself, so it cannot).
struct ShardedMlpImpl : torch::nn::Module {
  explicit ShardedMlpImpl(const Workload& w) {
    torch::manual_seed(0);
    std::vector<std::pair<int64_t, int64_t>> shapes{{w.in, w.hidden}};
    for (int64_t i = 0; i < w.layers; ++i) shapes.emplace_back(w.hidden, w.hidden);
    shapes.emplace_back(w.hidden, w.out);
    for (size_t i = 0; i < shapes.size(); ++i) {
      auto layer = register_module(std::to_string(2 * i), torch::nn::Linear(shapes[i].first, shapes[i].second));
      layers.push_back(spur::fully_shard(layer));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i](x);
      if (i + 1 < layers.size()) x = torch::relu(x);
    }
    return x;
  }
  std::vector<spur::FullyShard<torch::nn::Linear>> layers;
};
TORCH_MODULE(ShardedMlp);

struct Batches {
  std::vector<torch::Tensor> x, y;
};

// Data made before timing starts (loading is outside the timed region), on the device the run uses.
Batches make_batches(const Workload& w, int count, torch::Device device) {
  Batches b;
  for (int i = 0; i < count; ++i) {
    b.x.push_back(torch::randn({w.batch, w.in}).to(device));
    b.y.push_back(torch::randint(0, w.out, {w.batch}).to(device));
  }
  return b;
}

// On a GPU a step is timed once its kernels have finished.
void finish(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize();
}

int single(const Workload& w, int steps) {
  spur::Accelerator accelerator;
  const auto device = accelerator.device();
  auto plain_net = make_model(w);
  plain_net->to(device);
  torch::optim::SGD plain_opt(plain_net->parameters(), 0.01);
  auto spur_net = make_model(w);
  torch::optim::SGD spur_sgd(spur_net->parameters(), 0.01);
  // Not a structured binding: lambdas capture those only from C++20 (clang-tidy's clang 14 refuses them).
  auto prepared = accelerator.prepare(spur_net, spur_sgd);
  auto& model = std::get<0>(prepared);
  auto& optimizer = std::get<1>(prepared);
  const auto data = make_batches(w, 16, device);

  auto plain_step = [&](int i) {
    plain_opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(plain_net->forward(data.x[i % 16]), data.y[i % 16]);
    loss.backward();
    plain_opt.step();
  };
  auto spur_step = [&](int i) {
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model(data.x[i % 16]), data.y[i % 16]);
    accelerator.backward(loss);
    optimizer.step();
  };
  for (int i = 0; i < 20; ++i) plain_step(i), spur_step(i);

  // Alternating blocks of 10 steps, so drift in machine speed hits both alike.
  std::vector<double> plain_ms, spur_ms;
  for (int block = 0; block < steps / 10; ++block) {
    for (int i = 0; i < 10; ++i) {
      const double t0 = now_ms();
      plain_step(i);
      finish(device);
      plain_ms.push_back(now_ms() - t0);
    }
    for (int i = 0; i < 10; ++i) {
      const double t0 = now_ms();
      spur_step(i);
      finish(device);
      spur_ms.push_back(now_ms() - t0);
    }
  }
  std::printf(
      "{\"mode\": \"single\", \"workload\": \"%s\", \"device\": \"%s\", \"plain_ms\": %.4f, "
      "\"spur_ms\": %.4f, \"steps\": %d}\n",
      w.name.c_str(), device.str().c_str(), median(plain_ms), median(spur_ms), steps);
  return 0;
}

template <typename Optimizer, typename Net>
int rank(const Workload& w, int steps, Net net) {
  spur::Accelerator accelerator;
  Optimizer base = [&] {
    if constexpr (std::is_same_v<Optimizer, torch::optim::AdamW>) {
      return torch::optim::AdamW(net->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(0.01));
    } else {
      return torch::optim::SGD(net->parameters(), 0.01);
    }
  }();
  auto [model, optimizer] = accelerator.prepare(net, base);
  const auto device = accelerator.device();
  const auto data = make_batches(w, 16, device);
  std::vector<double> times;
  for (int i = 0; i < 20 + steps; ++i) {
    const double t0 = now_ms();
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model(data.x[i % 16]), data.y[i % 16]);
    accelerator.backward(loss);
    optimizer.step();
    finish(device);
    if (i >= 20) times.push_back(now_ms() - t0);
  }
  print_rank_record(w.name, static_cast<long long>(accelerator.process_index()), times);
  if (const char* path = std::getenv("SPUR_PROGRESS_FILE"); path && spur::progress::Writer::instance().active()) {
    const spur::progress::Reader reader(path);
    const auto before = reader.read();
    constexpr int kSteps = 20;
    for (int i = 0; i < kSteps; ++i) {
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model(data.x[i % 16]), data.y[i % 16]);
      accelerator.backward(loss);
      optimizer.step();
    }
    finish(device);
    const auto after = reader.read();
    constexpr int kScopes = 200000;
    const double t0 = now_ms();
    for (int i = 0; i < kScopes; ++i) spur::progress::Scope scope("bench");
    const double scope_ns = (now_ms() - t0) * 1e6 / kScopes;
    std::printf("{\"kind\": \"progress\", \"rank\": %lld, \"changes_per_step\": %.2f, \"scope_ns\": %.1f}\n",
                static_cast<long long>(accelerator.process_index()),
                before && after ? static_cast<double>(after->activity - before->activity) / kSteps : -1.0, scope_ns);
  }
  accelerator.wait_for_everyone();
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) throw spur::Error("usage: step_bench single|rank|adamw WORKLOAD [--steps N]");
  const std::string mode = argv[1];
  const auto w = workload(argv[2]);
  int steps = 200;
  if (argc >= 5 && std::string(argv[3]) == "--steps") steps = std::max(10, std::stoi(argv[4]));
  if (mode == "single") return single(w, steps);
  if (mode == "rank") return rank<torch::optim::SGD>(w, steps, make_model(w));
  if (mode == "adamw") {
    const char* wrap = std::getenv("SPUR_BENCH_FULLY_SHARD");
    if (wrap && std::string(wrap) == "1") return rank<torch::optim::AdamW>(w, steps, ShardedMlp(w));
    return rank<torch::optim::AdamW>(w, steps, make_model(w));
  }
  throw spur::Error("unknown mode " + mode);
} catch (const std::exception& e) {
  std::cerr << "step_bench: " << e.what() << "\n";
  return 1;
}
