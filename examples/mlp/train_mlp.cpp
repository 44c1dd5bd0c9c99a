// SPDX-License-Identifier: Apache-2.0
// A small MLP learns to imitate a fixed random "teacher" network on data it generates, on one process or many:
//   ./train_mlp                                   one process
//   torchrun --no_python ./train_mlp              or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by hand
#include <cstdio>
#include <cstdlib>
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
  int64_t epochs = 4;
  int64_t batch_size = 64;  // per process
  int64_t log_every = 16;
  double lr = 3e-3;
};

// Every flag, for --help and for the error about one it does not know.
constexpr const char* kFlags = "--epochs N --batch_size B --log_every K --lr LR";

Options parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw spur::Error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::printf(
          "usage: train_mlp [flags]\n  flags: %s\n  on several processes: spur launch --num_processes N train_mlp "
          "[flags]\n",
          kFlags);
      std::exit(0);
    }
    if (arg == "--epochs") {
      options.epochs = std::stoll(value());
    } else if (arg == "--batch_size") {
      options.batch_size = std::stoll(value());
    } else if (arg == "--log_every") {
      options.log_every = std::stoll(value());
    } else if (arg == "--lr") {
      options.lr = std::stod(value());
    } else {
      throw spur::Error("unknown argument " + arg + " (known: " + kFlags + ")");
    }
  }
  return options;
}

constexpr int64_t kInputs = 32;
constexpr int64_t kClasses = 8;

torch::nn::Sequential make_mlp(int64_t hidden) {
  return torch::nn::Sequential(torch::nn::Linear(kInputs, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, hidden),
                               torch::nn::ReLU(), torch::nn::Linear(hidden, kClasses));
}

}  // namespace

int main(int argc, char** argv) try {
  const Options options = parse(argc, argv);
  spur::Accelerator accelerator;
  accelerator.print(spur::environment_summary(), "|", accelerator.num_processes(), "process(es) on",
                    accelerator.device().str(), "| mixed precision", spur::to_string(accelerator.mixed_precision()),
                    "| gradients via", accelerator.gradient_transport());

  // The data: random inputs labelled by a fixed random teacher network (the same on every rank: same seed).
  accelerator.set_seed(1234);
  auto teacher = make_mlp(64);
  auto make_dataset = [&](int64_t n) {
    torch::NoGradGuard no_grad;
    auto x = torch::randn({n, kInputs});
    return spur::TensorDataset(x, teacher->forward(x).argmax(1));
  };
  auto train_set = make_dataset(4096);
  auto valid_set = make_dataset(1000);

  auto student = make_mlp(128);
  torch::optim::Adam adam(student->parameters(), torch::optim::AdamOptions(options.lr));
  auto [model, optimizer, train_loader, valid_loader] = accelerator.prepare(
      student, adam, spur::make_data_loader(train_set, {.batch_size = options.batch_size, .shuffle = true}),
      spur::make_data_loader(valid_set, {.batch_size = 250}));

  const int64_t total = options.epochs * train_loader.size();
  // Metrics go to the run history (`spur runs`, Spur Studio); only the main process records.
  accelerator.init_trackers("mlp", {{"lr", options.lr}, {"batch_size", options.batch_size}, {"epochs", options.epochs}},
                            {.total_steps = total});
  int64_t step = 0;
  auto loss_sum = torch::zeros({}, accelerator.device());
  int64_t since_log = 0;
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    model->train();
    for (auto& batch : train_loader) {
      // Gradient accumulation as configured (spur launch --gradient_accumulation_steps K): backward, step, zero_grad.
      auto scope = accelerator.accumulate(model);
      auto loss = torch::nn::functional::cross_entropy(model(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer.step();
      optimizer.zero_grad();

      loss_sum += loss.detach();
      ++since_log;
      if (++step % options.log_every == 0 || step == total) {
        // Mean over the last steps and over every rank.
        auto mean = accelerator.reduce(loss_sum / since_log, spur::Reduction::mean).item<double>();
        accelerator.print("step " + std::to_string(step) + "/" + std::to_string(total), "loss", std::to_string(mean));
        accelerator.log({{"loss", mean}}, step);
        loss_sum.zero_();
        since_log = 0;
      }
    }

    // Accuracy over the whole validation set, each sample counted once whatever the number of ranks.
    model->eval();
    torch::NoGradGuard no_grad;
    double correct = 0, seen = 0;
    for (auto& batch : valid_loader) {
      auto hits = accelerator.gather_for_metrics((model(batch.data).argmax(1) == batch.target).to(torch::kFloat));
      correct += hits.sum().item<double>();
      seen += static_cast<double>(hits.size(0));
    }
    accelerator.print("epoch", epoch, "accuracy", std::to_string(correct / seen), "on", seen, "samples");
    accelerator.log({{"accuracy", correct / seen}, {"epoch", epoch}}, step);
  }
  accelerator.end_training();
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "train_mlp: " << e.what() << "\n";
  return EXIT_FAILURE;
}
