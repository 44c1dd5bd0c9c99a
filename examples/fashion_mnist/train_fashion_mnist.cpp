// SPDX-License-Identifier: Apache-2.0
// A small CNN learns Fashion-MNIST (Debian's dataset-fashion-mnist) on one process or many:
//   ./train_fashion_mnist [--epochs 5] [--batch_size 64] [--lr 3e-3] [--mixed_precision no|fp16|bf16]
//                         [--gradient_accumulation_steps K] [--num_workers 2] [--data_dir DIR]
//                         [--output_dir DIR] [--resume_from_checkpoint PATH|latest] [--max_steps N]
//                         [--checkpoints_total_limit N]
//   spur launch --num_processes 2 ./train_fashion_mnist
// Augmentation (a random 28x28 crop of the image padded by 2, and a horizontal flip) runs in the loader's worker
// threads from spur::loader_generator(). AdamW, a warm-up then cosine schedule, gradient clipping; each epoch it
// measures accuracy on the 10,000 test images (every image once, whatever the number of ranks) and saves a
// checkpoint (output_dir/checkpoints/checkpoint_N, the newest --checkpoints_total_limit kept). Logs loss, accuracy,
// learning rate and samples/s to the run history and to TensorBoard (output_dir/fashion-mnist). Flags also as
// --name=value (a sweep's ${args}); under `spur sweep` output_dir defaults to fashion_mnist_output/sweep-ID/run-N.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <spur/spur.h>

#include "../common/example_checkpoints.h"
#include "../common/example_flags.h"

#include "cnn.h"
#include "idx.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  int64_t epochs = 5;
  int64_t batch_size = 64;  // per process
  double lr = 3e-3;
  double weight_decay = 5e-4;
  double clip = 1.0;
  int64_t num_workers = 2;
  int64_t accumulation = 0;  // 0: the launcher's (SPUR_GRADIENT_ACCUMULATION_STEPS), else 1
  std::string precision;     // empty: the launcher's
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string output_dir = "fashion_mnist_output";
  std::string resume;
  int64_t keep = 3;       // checkpoints kept
  int64_t max_steps = 0;  // 0: whole epochs
  int64_t log_every = 50;
  uint64_t seed = 42;
  bool checksum = false;  // print a checksum of the parameters at the end (tests compare the ranks')
};

Options parse(int argc, char** argv) {
  Options o;
  const std::string known =
      "--epochs N --batch_size B --lr LR --weight_decay W --clip C --num_workers N "
      "--gradient_accumulation_steps K --mixed_precision no|fp16|bf16 --data_dir DIR --output_dir DIR "
      "--resume_from_checkpoint PATH|latest --checkpoints_total_limit N --max_steps N --log_every N --seed S "
      "--checksum";
  ExampleFlags flags(argc, argv, known);
  bool output_given = false;
  while (flags.next()) {
    if (flags.is("--epochs")) o.epochs = flags.integer(1);
    else if (flags.is("--batch_size")) o.batch_size = flags.integer(1);
    else if (flags.is("--lr")) o.lr = flags.real();
    else if (flags.is("--weight_decay")) o.weight_decay = flags.real();
    else if (flags.is("--clip")) o.clip = flags.real();
    else if (flags.is("--num_workers")) o.num_workers = flags.integer(0);
    else if (flags.is("--gradient_accumulation_steps")) o.accumulation = flags.integer(1);
    else if (flags.is("--mixed_precision")) o.precision = flags.value();
    else if (flags.is("--data_dir")) o.data_dir = flags.value();
    else if (flags.is("--output_dir")) {
      o.output_dir = flags.value();
      output_given = true;
    } else if (flags.is("--resume_from_checkpoint")) o.resume = flags.value();
    else if (flags.is("--checkpoints_total_limit")) o.keep = flags.integer(1);
    else if (flags.is("--max_steps")) o.max_steps = flags.integer(1);
    else if (flags.is("--log_every")) o.log_every = flags.integer(1);
    else if (flags.is("--seed")) o.seed = static_cast<uint64_t>(flags.integer(0));
    else if (flags.is("--checksum")) o.checksum = flags.on();
    else flags.unknown();
  }
  if (!output_given) o.output_dir = run_output_folder(o.output_dir);
  return o;
}

// Fashion-MNIST's pixel statistics (training set), for normalisation.
constexpr double kMean = 0.2860, kStd = 0.3530;

// Images as uint8 [N, 28, 28], labels as int64 [N]. Training images are augmented in get(): a random crop of the
// image padded by 2 pixels, and a horizontal flip half the time, drawn from the loader's per-batch generator.
struct FashionMnist {
  torch::Tensor images, labels;
  bool augment = false;

  torch::data::Example<> get(size_t index) const {
    auto image = images[static_cast<int64_t>(index)].to(torch::kFloat).div_(255.0).sub_(kMean).div_(kStd).unsqueeze(0);
    if (augment) {
      auto random = torch::randint(0, 5, {3}, spur::loader_generator(), torch::kLong);
      const auto dy = random[0].item<int64_t>();
      const auto dx = random[1].item<int64_t>();
      // Pad with the normalised value of a black pixel, then take the 28x28 window at (dy, dx).
      auto padded = torch::full({1, 32, 32}, -kMean / kStd);
      padded.narrow(1, 2, 28).narrow(2, 2, 28).copy_(image);
      image = padded.narrow(1, dy, 28).narrow(2, dx, 28).contiguous();
      if (random[2].item<int64_t>() % 2 == 1) image = image.flip({2});
    }
    return {image, labels[static_cast<int64_t>(index)]};
  }
  size_t size() const { return static_cast<size_t>(images.size(0)); }
};

FashionMnist load(const std::string& dir, const std::string& split, bool augment) {
  const std::string prefix = dir + "/" + split;
  // Debian's files are gzipped; an unpacked copy works too.
  auto file = [&](const std::string& name) {
    const std::string gz = prefix + name + ".gz";
    return fs::exists(gz) || !fs::exists(prefix + name) ? gz : prefix + name;
  };
  FashionMnist set;
  set.images = idx::read_ubyte(file("-images-idx3-ubyte"), 3);
  set.labels = idx::read_ubyte(file("-labels-idx1-ubyte"), 1).to(torch::kLong);
  if (set.images.size(0) != set.labels.size(0)) {
    throw spur::Error(prefix + ": " + std::to_string(set.images.size(0)) + " images but " +
                      std::to_string(set.labels.size(0)) + " labels");
  }
  if (set.images.size(1) != 28 || set.images.size(2) != 28) {
    throw spur::Error(file("-images-idx3-ubyte") + ": images are not 28x28");
  }
  if (set.labels.numel() > 0 && set.labels.max().item<int64_t>() > 9) {
    throw spur::Error(file("-labels-idx1-ubyte") + ": labels above 9");
  }
  set.augment = augment;
  return set;
}

int64_t count_parameters(torch::nn::Module& module) {
  int64_t total = 0;
  for (const auto& p : module.parameters()) total += p.numel();
  return total;
}

}  // namespace

int main(int argc, char** argv) try {
  // Time to an accuracy counts from the program's start, data loading included (as tests/bench/train_peer.py).
  const auto started = std::chrono::steady_clock::now();
  const Options o = parse(argc, argv);
  spur::AcceleratorOptions accelerator_options;
  if (!o.precision.empty()) {
    const auto precision = spur::parse_precision(o.precision);
    if (!precision) throw spur::Error("--mixed_precision " + o.precision + ": use no, fp16 or bf16");
    accelerator_options.mixed_precision = *precision;
  }
  if (o.accumulation > 0) accelerator_options.gradient_accumulation_steps = o.accumulation;
  // Checkpoints as output_dir/checkpoints/checkpoint_N, the oldest removed beyond the limit; TensorBoard event
  // files in output_dir/fashion-mnist besides the run history.
  accelerator_options.project_config = {
      .project_dir = o.output_dir, .automatic_checkpoint_naming = true, .total_limit = o.keep};
  accelerator_options.log_with = {"tensorboard"};
  spur::Accelerator accelerator(accelerator_options);
  accelerator.print(spur::environment_summary(), "|", accelerator.num_processes(), "process(es) on",
                    accelerator.device().str(), "| mixed precision", spur::to_string(accelerator.mixed_precision()),
                    "| gradients via", accelerator.gradient_transport());

  // Every rank reads the files (a missing or damaged file is the same error on every rank).
  const auto train_set = load(o.data_dir, "train", /*augment=*/true);
  const auto test_set = load(o.data_dir, "t10k", /*augment=*/false);

  accelerator.set_seed(o.seed);
  auto net = make_cnn();
  // Weight decay on the convolution and linear weights only (not on batch norm or biases).
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : net->named_parameters()) (item.value().dim() > 1 ? decay : no_decay).push_back(item.value());
  torch::optim::AdamW adamw(
      {torch::optim::OptimizerParamGroup(decay, std::make_unique<torch::optim::AdamWOptions>(
                                                    torch::optim::AdamWOptions(o.lr).weight_decay(o.weight_decay))),
       torch::optim::OptimizerParamGroup(
           no_decay, std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(o.lr).weight_decay(0.0)))},
      torch::optim::AdamWOptions(o.lr));
  auto train_loader = spur::make_data_loader(
      train_set,
      {.batch_size = o.batch_size, .shuffle = true, .drop_last = true, .num_workers = o.num_workers, .seed = o.seed});
  auto test_loader = spur::make_data_loader(test_set, {.batch_size = 500, .num_workers = o.num_workers});
  // The schedule is written for one process's batches (Accelerate's rule: the prepared scheduler steps once
  // per process and optimizer step).
  const int64_t steps_per_epoch = train_loader.size() / accelerator.gradient_accumulation_steps();
  const int64_t planned = o.max_steps > 0 ? o.max_steps * accelerator.num_processes() : o.epochs * steps_per_epoch;
  spur::CosineWithWarmup schedule(adamw, std::max<int64_t>(1, planned / 20), planned, 0.01);
  auto [model, optimizer, scheduler, train, test] =
      accelerator.prepare(net, adamw, schedule, train_loader, test_loader);

  int64_t epoch = 1, step = 0;
  // The optimizer step count goes into the checkpoints too (a run stopped by --max_steps resumes mid-epoch).
  auto saved_step = torch::zeros({}, torch::kLong);
  accelerator.register_for_checkpointing([&](torch::serialize::OutputArchive& a) { a.write("step", saved_step); },
                                         [&](torch::serialize::InputArchive& a) { a.read("step", saved_step); });
  if (o.resume.empty()) number_after_old_checkpoints(accelerator);
  if (!o.resume.empty()) {
    // "latest": the newest checkpoint_N under output_dir/checkpoints.
    const std::string path = accelerator.load_state(o.resume == "latest" ? "" : o.resume);
    epoch = train.epoch() + 1;
    step = saved_step.item<int64_t>();
    accelerator.print("resumed from", path, "at epoch", epoch, "step", step);
  }
  const int64_t total =
      o.max_steps > 0 ? o.max_steps : o.epochs * train.size() / accelerator.gradient_accumulation_steps();
  accelerator.init_trackers("fashion-mnist",
                            {{"lr", o.lr},
                             {"batch_size", o.batch_size * accelerator.num_processes()},
                             {"epochs", o.epochs},
                             {"weight_decay", o.weight_decay},
                             {"mixed_precision", std::string(spur::to_string(accelerator.mixed_precision()))},
                             {"parameters", count_parameters(*net)}},
                            {.total_steps = total});
  accelerator.print("model:", count_parameters(*net), "parameters;", train_set.size(), "training images,",
                    test_set.size(), "test images;", train.size(), "batches per epoch per process");

  bool done = false;
  for (; epoch <= o.epochs && !done; ++epoch) {
    model->train();
    auto loss_sum = torch::zeros({});
    int64_t since_log = 0, samples = 0;
    auto clock = std::chrono::steady_clock::now();
    // Time spent waiting for the loader's next batch (it should never starve the step).
    double waited = 0;
    auto asked = std::chrono::steady_clock::now();
    for (auto& batch : train) {
      waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
      auto scope = accelerator.accumulate(model);
      auto loss = torch::nn::functional::cross_entropy(model(batch.data), batch.target);
      accelerator.backward(loss);
      if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(model, o.clip);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      loss_sum += loss.detach();
      ++since_log;
      samples += batch.data.size(0);
      asked = std::chrono::steady_clock::now();
      if (!accelerator.sync_gradients()) continue;
      ++step;
      if (step % o.log_every == 0 || step == total) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count();
        const auto mean = accelerator.reduce(loss_sum / since_log, spur::Reduction::mean).item<double>();
        const double per_second = static_cast<double>(samples * accelerator.num_processes()) / seconds;
        const double lr = optimizer->param_groups()[0].options().get_lr();
        const double wait = 100.0 * waited / seconds;
        accelerator.print("epoch", epoch, "step", std::to_string(step) + "/" + std::to_string(total), "loss",
                          std::to_string(mean), "lr", std::to_string(lr), "samples/s", std::to_string(per_second),
                          "data wait", std::to_string(wait) + "%");
        accelerator.log({{"loss", mean}, {"lr", lr}, {"samples_per_s", per_second}, {"data_wait_percent", wait}}, step);
        loss_sum.zero_();
        since_log = 0;
        samples = 0;
        waited = 0;
        clock = std::chrono::steady_clock::now();
      }
      if (o.max_steps > 0 && step >= o.max_steps) {
        done = true;
        break;
      }
    }

    // Accuracy on the test images, each counted once whatever the number of ranks.
    model->eval();
    {
      torch::NoGradGuard no_grad;
      double correct = 0, seen = 0;
      for (auto& batch : test) {
        auto hits = accelerator.gather_for_metrics((model(batch.data).argmax(1) == batch.target).to(torch::kFloat));
        correct += hits.sum().item<double>();
        seen += static_cast<double>(hits.size(0));
      }
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      accelerator.print("epoch", epoch, "test accuracy", std::to_string(correct / seen), "on", seen, "images at",
                        std::to_string(static_cast<int64_t>(elapsed)), "s");
      accelerator.log({{"accuracy", correct / seen}, {"epoch", epoch}}, step);
    }
    // Every epoch's end (and where --max_steps stopped it) is a checkpoint to resume from.
    saved_step.fill_(step);
    accelerator.print("saved", accelerator.save_state());
  }
  if (o.checksum) {
    torch::NoGradGuard no_grad;
    double sum = 0;
    for (const auto& p : net->parameters()) sum += p.to(torch::kDouble).abs().sum().item<double>();
    std::printf("rank %lld checksum %.10e\n", static_cast<long long>(accelerator.process_index()), sum);
    std::fflush(stdout);
  }
  accelerator.end_training();
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "train_fashion_mnist: " << e.what() << "\n";
  return EXIT_FAILURE;
}
