// SPDX-License-Identifier: Apache-2.0
// A small byte-level GPT (decoder-only transformer: causal self-attention, pre-norm blocks, learned positions)
// learns a text corpus on one process or many:
//   ./train_gpt [--data PATH] [--max_steps 2000] [--batch_size 32] [--block_size 128] [--n_layer 4] [--n_head 4]
//               [--n_embd 128] [--lr 1e-3] [--mixed_precision no|fp16|bf16] [--gradient_accumulation_steps K]
//               [--output_dir DIR] [--resume_from_checkpoint PATH|latest] [--sample PROMPT]
//   spur launch --num_processes 2 ./train_gpt
// Default corpus: the Python standard library's sources that Debian installs (/usr/lib/python3.N/**/*.py, ~11
// MB), split by file: every 20th file is validation. PATH may be any text file or folder. AdamW with weight decay
// on weight matrices only, warm-up then cosine schedule, clipping. Logs training and validation loss,
// perplexity and tokens/s; prints the corpus's unigram entropy (the loss of a model that knows only byte
// frequencies) to compare with, and a sample continuation at the end.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/init.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>

#include <spur/spur.h>

#include "../common/example_checkpoints.h"
#include "../common/example_flags.h"

#include "gpt_model.h"

namespace {

namespace fs = std::filesystem;

struct Options {
  std::string data;  // empty: the Python standard library
  int64_t max_steps = 2000;
  int64_t batch_size = 32;  // sequences per process
  int64_t block_size = 128;
  int64_t n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0.0;
  double lr = 1e-3, weight_decay = 0.1, clip = 1.0;
  int64_t warmup = 100;
  int64_t accumulation = 0;
  std::string precision;
  std::string output_dir = "gpt_output";
  std::string resume;
  std::string sample;  // with --resume_from_checkpoint: only print a continuation of this prompt
  int64_t eval_every = 250, eval_batches = 16, log_every = 50, save_every = 500, sample_bytes = 300;
  uint64_t seed = 1337;
  bool checksum = false;
};

Options parse(int argc, char** argv) {
  Options o;
  const std::string known =
      "--data PATH --max_steps N --batch_size B --block_size T --n_layer L --n_head H --n_embd C "
      "--dropout P --lr LR --weight_decay W --clip C --warmup N --gradient_accumulation_steps K "
      "--mixed_precision no|fp16|bf16 --output_dir DIR --resume_from_checkpoint PATH|latest --sample PROMPT "
      "--eval_every N --eval_batches N --log_every N --save_every N --sample_bytes N --seed S --checksum";
  ExampleFlags flags(argc, argv, known);
  bool output_given = false;
  while (flags.next()) {
    if (flags.is("--data")) o.data = flags.value();
    else if (flags.is("--max_steps")) o.max_steps = flags.integer(1);
    else if (flags.is("--batch_size")) o.batch_size = flags.integer(1);
    else if (flags.is("--block_size")) o.block_size = flags.integer(2);
    else if (flags.is("--n_layer")) o.n_layer = flags.integer(1);
    else if (flags.is("--n_head")) o.n_head = flags.integer(1);
    else if (flags.is("--n_embd")) o.n_embd = flags.integer(1);
    else if (flags.is("--dropout")) o.dropout = flags.real();
    else if (flags.is("--lr")) o.lr = flags.real();
    else if (flags.is("--weight_decay")) o.weight_decay = flags.real();
    else if (flags.is("--clip")) o.clip = flags.real();
    else if (flags.is("--warmup")) o.warmup = flags.integer(0);
    else if (flags.is("--gradient_accumulation_steps")) o.accumulation = flags.integer(1);
    else if (flags.is("--mixed_precision")) o.precision = flags.value();
    else if (flags.is("--output_dir")) {
      o.output_dir = flags.value();
      output_given = true;
    } else if (flags.is("--resume_from_checkpoint")) o.resume = flags.value();
    else if (flags.is("--sample")) o.sample = flags.value();
    else if (flags.is("--eval_every")) o.eval_every = flags.integer(1);
    else if (flags.is("--eval_batches")) o.eval_batches = flags.integer(1);
    else if (flags.is("--log_every")) o.log_every = flags.integer(1);
    else if (flags.is("--save_every")) o.save_every = flags.integer(1);
    else if (flags.is("--sample_bytes")) o.sample_bytes = flags.integer(0);
    else if (flags.is("--seed")) o.seed = static_cast<uint64_t>(flags.integer(0));
    else if (flags.is("--checksum")) o.checksum = flags.on();
    else flags.unknown();
  }
  if (o.n_embd % o.n_head != 0) {
    throw spur::Error("--n_embd " + std::to_string(o.n_embd) + " must be a multiple of --n_head " +
                      std::to_string(o.n_head));
  }
  if (o.warmup > o.max_steps) o.warmup = o.max_steps;
  if (!output_given) o.output_dir = run_output_folder(o.output_dir);  // each sweep run its own folder
  return o;
}

// --- the corpus ----------------------------------------------------------------------------------------------

// The newest /usr/lib/python3.N Debian installs.
std::string default_corpus() {
  std::string best;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator("/usr/lib", error)) {
    const std::string name = entry.path().filename().string();
    if (std::regex_match(name, std::regex(R"(python3\.\d+)")) && fs::exists(entry.path() / "os.py")) {
      if (best.empty() || std::stoi(name.substr(8)) > std::stoi(fs::path(best).filename().string().substr(8))) {
        best = entry.path().string();
      }
    }
  }
  if (best.empty()) throw spur::Error("no Python standard library under /usr/lib/python3.N: pass --data PATH");
  return best;
}

struct Corpus {
  std::string train, valid;
  std::string source;
  size_t files = 0;
};

// A file: 95/5 by position, cut at a line. A folder: its files (.py for the default corpus, every regular file
// otherwise), sorted by path; every 20th file is validation.
Corpus load_corpus(const std::string& requested) {
  Corpus corpus;
  corpus.source = requested.empty() ? default_corpus() : requested;
  std::error_code error;
  if (!fs::exists(corpus.source, error)) throw spur::Error("--data " + corpus.source + ": no such file or folder");
  auto read = [](const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw spur::Error(path.string() + ": cannot read");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  if (fs::is_regular_file(corpus.source, error)) {
    const std::string text = read(corpus.source);
    size_t cut = text.size() * 95 / 100;
    const size_t line = text.find('\n', cut);
    if (line != std::string::npos) cut = line + 1;
    corpus.train = text.substr(0, cut);
    corpus.valid = text.substr(cut);
    corpus.files = 1;
  } else {
    const bool python_only = requested.empty();
    std::vector<fs::path> files;
    for (auto it =
             fs::recursive_directory_iterator(corpus.source, fs::directory_options::skip_permission_denied, error);
         it != fs::recursive_directory_iterator(); it.increment(error)) {
      if (error) break;
      const std::string path = it->path().string();
      if (python_only &&
          (path.find("site-packages") != std::string::npos || path.find("dist-packages") != std::string::npos)) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file()) continue;
      if (python_only && it->path().extension() != ".py") continue;
      files.push_back(it->path());
    }
    std::sort(files.begin(), files.end());
    for (size_t i = 0; i < files.size(); ++i) (i % 20 == 10 ? corpus.valid : corpus.train) += read(files[i]);
    corpus.files = files.size();
  }
  if (corpus.train.empty()) throw spur::Error("--data " + corpus.source + ": the corpus is empty");
  return corpus;
}

// Entropy of the byte distribution, in nats: what a model that knows only byte frequencies would score.
double unigram_entropy(const std::string& text) {
  std::vector<double> counts(256, 0.0);
  for (const unsigned char c : text) counts[c] += 1;
  double entropy = 0;
  for (const double n : counts) {
    if (n > 0) entropy -= n / static_cast<double>(text.size()) * std::log(n / static_cast<double>(text.size()));
  }
  return entropy;
}

// Non-overlapping windows of block_size + 1 bytes (input and the next-byte target).
struct Windows {
  torch::Tensor bytes;  // uint8, the whole split
  int64_t block;
  torch::data::Example<> get(size_t index) const {
    auto window = bytes.narrow(0, static_cast<int64_t>(index) * block, block + 1).to(torch::kLong);
    return {window.narrow(0, 0, block), window.narrow(0, 1, block)};
  }
  size_t size() const { return static_cast<size_t>((bytes.size(0) - 1) / block); }
};

Windows windows(const std::string& text, int64_t block, const std::string& what) {
  if (static_cast<int64_t>(text.size()) < block + 1) {
    throw spur::Error("the " + what + " split has " + std::to_string(text.size()) +
                      " bytes, fewer than --block_size + 1 (" + std::to_string(block + 1) +
                      "): use a smaller --block_size or more text");
  }
  auto bytes = torch::empty({static_cast<int64_t>(text.size())}, torch::kUInt8);
  std::memcpy(bytes.data_ptr(), text.data(), text.size());
  return {bytes, block};
}

// Continues `prompt` by sampling (temperature 0.8) `count` bytes.
std::string continue_text(Gpt& model, const std::string& prompt, int64_t count, torch::Device device) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  for (auto& id : ids) id &= 0xff;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t begin = std::max<int64_t>(0, static_cast<int64_t>(ids.size()) - model->block_size);
    auto context = torch::tensor(std::vector<int64_t>(ids.begin() + begin, ids.end())).unsqueeze(0).to(device);
    auto logits = model(context).select(1, -1).squeeze(0).to(torch::kFloat).cpu() / 0.8;
    ids.push_back(torch::multinomial(torch::softmax(logits, -1), 1, false, generator).item<int64_t>());
  }
  return std::string(ids.begin(), ids.end());
}

}  // namespace

int main(int argc, char** argv) try {
  const Options o = parse(argc, argv);
  spur::AcceleratorOptions accelerator_options;
  if (!o.precision.empty()) {
    const auto precision = spur::parse_precision(o.precision);
    if (!precision) throw spur::Error("--mixed_precision " + o.precision + ": use no, fp16 or bf16");
    accelerator_options.mixed_precision = *precision;
  }
  if (o.accumulation > 0) accelerator_options.gradient_accumulation_steps = o.accumulation;
  // Checkpoints as output_dir/checkpoints/checkpoint_N (the newest 3 kept); TensorBoard files in output_dir/gpt.
  accelerator_options.project_config = {
      .project_dir = o.output_dir, .automatic_checkpoint_naming = true, .total_limit = 3};
  accelerator_options.log_with = {"tensorboard"};
  spur::Accelerator accelerator(accelerator_options);
  // "latest": the newest checkpoint_N under output_dir/checkpoints.
  auto checkpoint_to_resume = [&]() -> std::string {
    if (o.resume != "latest") return o.resume;
    std::string latest = accelerator.latest_checkpoint();
    if (latest.empty()) {
      throw spur::Error("--resume_from_checkpoint latest: no checkpoint under " + o.output_dir + "/checkpoints");
    }
    return latest;
  };
  accelerator.print(spur::environment_summary(), "|", accelerator.num_processes(), "process(es) on",
                    accelerator.device().str(), "| mixed precision", spur::to_string(accelerator.mixed_precision()),
                    "| gradients via", accelerator.gradient_transport());

  accelerator.set_seed(o.seed);
  Gpt net(o.block_size, o.n_layer, o.n_head, o.n_embd, o.dropout);
  // Weight decay on matrices (linear and embedding weights), not on biases or layer norms.
  std::vector<torch::Tensor> decay, no_decay;
  int64_t parameters = 0;
  for (const auto& p : net->parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    parameters += p.numel();
  }
  torch::optim::AdamW adamw(
      {torch::optim::OptimizerParamGroup(
           decay, std::make_unique<torch::optim::AdamWOptions>(
                      torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(o.weight_decay))),
       torch::optim::OptimizerParamGroup(no_decay,
                                         std::make_unique<torch::optim::AdamWOptions>(
                                             torch::optim::AdamWOptions(o.lr).betas({0.9, 0.95}).weight_decay(0.0)))},
      torch::optim::AdamWOptions(o.lr));

  if (!o.sample.empty()) {
    // Sampling from a checkpoint: load the weights and continue the prompt, on the main process.
    if (o.resume.empty()) throw spur::Error("--sample needs --resume_from_checkpoint PATH|latest");
    spur::load_model(*net, checkpoint_to_resume());  // before prepare: under ZeRO stage 3 it then shards them
    auto model = accelerator.prepare(net);
    auto full = accelerator.summon_full_params(/*writeback=*/false);  // stage 3: whole on every rank, then
    if (accelerator.is_main_process())
      std::cout << continue_text(net, o.sample, o.sample_bytes, accelerator.device()) << "\n";
    return EXIT_SUCCESS;
  }

  const auto corpus = load_corpus(o.data);
  auto train_set = windows(corpus.train, o.block_size, "training");
  auto valid_set = windows(corpus.valid.empty() ? corpus.train.substr(corpus.train.size() * 95 / 100) : corpus.valid,
                           o.block_size, "validation");
  const double entropy = unigram_entropy(corpus.train);
  auto train_loader = spur::make_data_loader(
      train_set, {.batch_size = o.batch_size, .shuffle = true, .drop_last = true, .seed = o.seed});
  auto valid_loader =
      spur::make_data_loader(valid_set, {.batch_size = o.batch_size, .shuffle = true, .seed = o.seed + 1});
  spur::CosineWithWarmup schedule(adamw, o.warmup * accelerator.num_processes(),
                                  o.max_steps * accelerator.num_processes(), 0.1);
  auto [model, optimizer, scheduler, train, valid] =
      accelerator.prepare(net, adamw, schedule, train_loader, valid_loader);

  int64_t step = 0;
  auto counter = torch::zeros({}, torch::kLong);
  accelerator.register_for_checkpointing([&](torch::serialize::OutputArchive& a) { a.write("step", counter); },
                                         [&](torch::serialize::InputArchive& a) { a.read("step", counter); });
  if (o.resume.empty()) number_after_old_checkpoints(accelerator);
  if (!o.resume.empty()) {
    const std::string path = accelerator.load_state(checkpoint_to_resume());
    step = counter.item<int64_t>();
    accelerator.print("resumed from", path, "at step", step);
  }
  accelerator.init_trackers("gpt",
                            {{"lr", o.lr},
                             {"batch_size", o.batch_size * accelerator.num_processes()},
                             {"block_size", o.block_size},
                             {"n_layer", o.n_layer},
                             {"n_head", o.n_head},
                             {"n_embd", o.n_embd},
                             {"max_steps", o.max_steps},
                             {"parameters", parameters},
                             {"mixed_precision", std::string(spur::to_string(accelerator.mixed_precision()))},
                             {"unigram_entropy", entropy}},
                            {.total_steps = o.max_steps});
  accelerator.print("corpus:", corpus.source, "(" + std::to_string(corpus.files), "files),", corpus.train.size(),
                    "training and", corpus.valid.size(), "validation bytes; unigram entropy", std::to_string(entropy),
                    "nats per byte; model:", parameters, "parameters");

  // Mean loss over eval_batches validation batches (every rank its share, then averaged).
  // (The structured bindings by name: a lambda may not capture them implicitly before C++20's clang 16.)
  auto evaluate = [&, &model = model, &valid = valid]() {
    torch::NoGradGuard no_grad;
    model->eval();
    double sum = 0;
    int64_t n = 0;
    for (auto& batch : valid) {
      auto logits = model(batch.data);
      sum += torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), batch.target.reshape({-1})).item<double>();
      if (++n >= o.eval_batches) break;
    }
    model->train();
    const double mine = n > 0 ? sum / static_cast<double>(n) : 0;
    return accelerator.reduce(torch::tensor(mine, torch::kDouble), spur::Reduction::mean).item<double>();
  };

  model->train();
  auto loss_sum = torch::zeros({});
  int64_t since_log = 0, tokens = 0;
  auto clock = std::chrono::steady_clock::now();
  double waited = 0;  // waiting for the loader's next batch
  auto asked = std::chrono::steady_clock::now();
  while (step < o.max_steps) {
    for (auto& batch : train) {
      waited += std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
      auto scope = accelerator.accumulate(model);
      auto logits = model(batch.data);
      auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, 256}), batch.target.reshape({-1}));
      accelerator.backward(loss);
      if (accelerator.sync_gradients()) accelerator.clip_grad_norm_(model, o.clip);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      loss_sum += loss.detach();
      ++since_log;
      tokens += batch.data.numel();
      asked = std::chrono::steady_clock::now();
      if (!accelerator.sync_gradients()) continue;
      counter.fill_(++step);
      if (step % o.log_every == 0 || step == o.max_steps) {
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - clock).count();
        const auto mean = accelerator.reduce(loss_sum / since_log, spur::Reduction::mean).item<double>();
        const double per_second = static_cast<double>(tokens * accelerator.num_processes()) / seconds;
        const double lr = optimizer->param_groups()[0].options().get_lr();
        const double wait = 100.0 * waited / seconds;
        accelerator.print("step", std::to_string(step) + "/" + std::to_string(o.max_steps), "loss",
                          std::to_string(mean), "lr", std::to_string(lr), "tokens/s", std::to_string(per_second),
                          "data wait", std::to_string(wait) + "%");
        accelerator.log({{"loss", mean}, {"lr", lr}, {"tokens_per_s", per_second}, {"data_wait_percent", wait}}, step);
        loss_sum.zero_();
        since_log = 0;
        tokens = 0;
        waited = 0;
        clock = std::chrono::steady_clock::now();
      }
      if (step % o.eval_every == 0 || step == o.max_steps) {
        const double valid_loss = evaluate();
        accelerator.print("step", step, "validation loss", std::to_string(valid_loss), "perplexity",
                          std::to_string(std::exp(valid_loss)), "(unigram entropy", std::to_string(entropy) + ")");
        accelerator.log({{"valid_loss", valid_loss}, {"perplexity", std::exp(valid_loss)}}, step);
      }
      if (step % o.save_every == 0 || step == o.max_steps) accelerator.save_state();
      if (step >= o.max_steps) break;
    }
  }
  {
    // Under ZeRO stage 3 (FSDP's FULL_SHARD) each rank keeps 1/N of the weights: whole here, on every rank, for the
    // sample and the checksum (nothing to do otherwise).
    auto full = accelerator.summon_full_params(/*writeback=*/false);
    if (o.sample_bytes > 0 && accelerator.is_main_process()) {
      std::cout << "--- sample (prompt \"def \") ---\n"
                << continue_text(net, "def ", o.sample_bytes, accelerator.device()) << "\n---" << std::endl;
    }
    if (o.checksum) {
      torch::NoGradGuard no_grad;
      double sum = 0;
      for (const auto& p : net->parameters()) sum += p.to(torch::kDouble).abs().sum().item<double>();
      std::printf("rank %lld checksum %.10e\n", static_cast<long long>(accelerator.process_index()), sum);
      std::fflush(stdout);
    }
  }
  accelerator.end_training();
  return EXIT_SUCCESS;
} catch (const std::exception& e) {
  std::cerr << "train_gpt: " << e.what() << "\n";
  return EXIT_FAILURE;
}
