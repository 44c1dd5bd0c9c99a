// SPDX-License-Identifier: Apache-2.0
// A small MLP learns to imitate a fixed random "teacher" network on data it generates, on one process or many:
//   ./train_mlp                        one process
//   spur launch --num_processes 2 ./train_mlp   (or torchrun --no_python, or RANK/WORLD_SIZE by hand)
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <string>

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>

#include <spur/spur.h>

namespace {

struct Options {
  int64_t steps = 300;
  int64_t batch_size = 64;  // per process
  int64_t log_every = 25;
  double lr = 3e-3;
};

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw spur::Error("train_mlp: " + arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--steps") {
      options.steps = std::stoll(value());
    } else if (arg == "--batch_size") {
      options.batch_size = std::stoll(value());
    } else if (arg == "--log_every") {
      options.log_every = std::stoll(value());
    } else if (arg == "--lr") {
      options.lr = std::stod(value());
    } else {
      throw spur::Error("train_mlp: unknown argument " + arg +
                        " (known: --steps N --batch_size B --log_every K --lr LR)");
    }
  }
  return options;
}

constexpr int64_t kInputs = 32;
constexpr int64_t kClasses = 8;

torch::nn::Sequential make_mlp(int64_t hidden) {
  return torch::nn::Sequential(torch::nn::Linear(kInputs, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, hidden), torch::nn::ReLU(),
                               torch::nn::Linear(hidden, kClasses));
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  spur::Accelerator accelerator;
  accelerator.print(spur::environment_summary(), "|", accelerator.num_processes(), "process(es) on",
                    accelerator.device().str(), "| mixed precision", spur::to_string(accelerator.mixed_precision()));

  // Same seed everywhere: the teacher and the student's initial weights are identical on every rank.
  accelerator.set_seed(1234);
  auto teacher = make_mlp(64);
  teacher->to(accelerator.device());
  auto student = make_mlp(128);
  torch::optim::Adam adam(student->parameters(), torch::optim::AdamOptions(options.lr));

  auto [model, optimizer] = accelerator.prepare(student, adam);

  // From here each rank draws its own samples.
  accelerator.set_seed(1234, /*device_specific=*/true);
  auto sample = [&](int64_t n) {
    auto x = torch::randn({n, kInputs}, accelerator.device());
    torch::NoGradGuard no_grad;
    return std::make_pair(x, teacher->forward(x).argmax(1));
  };

  model->train();
  auto loss_sum = torch::zeros({}, accelerator.device());
  int64_t since_log = 0;
  for (int64_t step = 1; step <= options.steps; ++step) {
    auto [x, y] = sample(options.batch_size);
    optimizer.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model(x), y);
    accelerator.backward(loss);
    optimizer.step();

    loss_sum += loss.detach();
    ++since_log;
    if (step % options.log_every == 0 || step == options.steps) {
      // Mean over the last steps and over every rank.
      auto mean = accelerator.reduce(loss_sum / since_log, spur::Reduction::mean).item<double>();
      accelerator.print("step " + std::to_string(step) + "/" + std::to_string(options.steps), "loss",
                        std::to_string(mean));
      loss_sum.zero_();
      since_log = 0;
    }
  }

  // Accuracy over the samples of every rank together.
  model->eval();
  torch::NoGradGuard no_grad;
  auto [x, y] = sample(512);
  auto correct = accelerator.gather((model(x).argmax(1) == y).to(torch::kFloat));
  accelerator.print("accuracy", std::to_string(correct.mean().item<double>()), "on", correct.size(0), "samples");
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "train_mlp: " << e.what() << "\n";
  return EXIT_FAILURE;
}
