// SPDX-License-Identifier: Apache-2.0
// A rank program for the multi-process tests: `test_worker SCENARIO [--out DIR] [--steps N] [--k K]
// [--bucket_bytes B] [--crash_rank R] [--rows N]`. It trains or calls collectives on cue, writes what the test compares
// (flat float32 parameter files) and prints "OK name" / "FAIL name: why" lines. Exit 0 only if nothing failed.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <torch/nn/functional/loss.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/schedulers/step_lr.h>
#include <torch/optim/sgd.h>

#include <spur/fully_shard.h>
#include <spur/spur.h>

namespace {

struct Args {
  std::string scenario;
  std::string out = ".";
  int64_t steps = 8;
  int64_t k = 3;
  std::size_t bucket_bytes = 0;  // 0: the defaults
  int64_t crash_rank = -1;
  int64_t rows = 12;  // reference: rows of the global batch per step
  int64_t save_at = -1;
  bool load = false;
  int64_t big = 0;                   // save_loop: parameters of the model, in millions
  int64_t accumulate = 1;            // resume: micro-steps per optimizer step
  int64_t workers = 0;               // resume: loader threads (with augmentation drawn from spur::loader_generator())
  bool random_seed = false;          // resume: seed torch from the clock before building the loader (no fixed seed)
  int64_t batch = 64;                // large_batch: the README loop's batch size
  int64_t hidden = 128;              // large_batch: the README model's width
  std::string optimizer = "sgd";     // zero: sgd (momentum) or adamw
  double clip = 0;                   // zero: clip_grad_norm_ to this (0: none)
  int64_t slow_rank = -1;            // ddp: this rank sleeps 60 ms before each backward (the others wait for it)
  std::size_t odd_bucket_bytes = 0;  // ddp: rank 1's bucket size only (the ranks then reduce other sizes)
  std::string zero_grad = "optimizer";  // zero: "optimizer" or "model" (LibTorch's Module::zero_grad)
  std::string poison;                   // scaler_oracle: "step:branch,..." (branch a or b gets inputs of 1e4 there)
  std::string wrap = "blocks";          // shard: which modules spur::fully_shard wraps (blocks, none, keep, twice,
                                        // skip, tied, odd)
  int64_t width = 24;                   // shard: the blocks' width
  int64_t blocks = 3;                   // shard: how many
  int64_t save_hook_rank = -1;          // shard: this rank registers a save_state pre-hook (that changes nothing)
  bool outputs = true;                  // shard: evaluate, save the model and write the parameters at the end
};

Args parse(int argc, char** argv) {
  Args args;
  if (argc < 2) throw spur::Error("usage: test_worker SCENARIO [options]");
  args.scenario = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    const std::string value = argv[i + 1];
    if (key == "--out") args.out = value;
    else if (key == "--steps") args.steps = std::stoll(value);
    else if (key == "--k") args.k = std::stoll(value);
    else if (key == "--bucket_bytes") args.bucket_bytes = std::stoull(value);
    else if (key == "--crash_rank") args.crash_rank = std::stoll(value);
    else if (key == "--rows") args.rows = std::stoll(value);
    else if (key == "--save_at") args.save_at = std::stoll(value);
    else if (key == "--load") args.load = value == "1";
    else if (key == "--big") args.big = std::stoll(value);
    else if (key == "--accumulate") args.accumulate = std::stoll(value);
    else if (key == "--workers") args.workers = std::stoll(value);
    else if (key == "--random_seed") args.random_seed = value == "1";
    else if (key == "--batch") args.batch = std::stoll(value);
    else if (key == "--hidden") args.hidden = std::stoll(value);
    else if (key == "--optimizer") args.optimizer = value;
    else if (key == "--clip") args.clip = std::stod(value);
    else if (key == "--slow_rank") args.slow_rank = std::stoll(value);
    else if (key == "--odd_bucket_bytes") args.odd_bucket_bytes = std::stoull(value);
    else if (key == "--zero_grad") args.zero_grad = value;
    else if (key == "--poison") args.poison = value;
    else if (key == "--wrap") args.wrap = value;
    else if (key == "--width") args.width = std::stoll(value);
    else if (key == "--blocks") args.blocks = std::stoll(value);
    else if (key == "--save_hook_rank") args.save_hook_rank = std::stoll(value);
    else if (key == "--outputs") args.outputs = value == "1";
    else throw spur::Error("test_worker: unknown option " + key);
  }
  return args;
}

int failures = 0;

void check(bool ok, const std::string& name, const std::string& detail = "") {
  if (ok) {
    std::cout << "OK " << name << std::endl;
  } else {
    std::cout << "FAIL " << name << (detail.empty() ? "" : ": " + detail) << std::endl;
    ++failures;
  }
}

std::string str(const torch::Tensor& t) {
  std::ostringstream out;
  out << t;
  return out.str();
}

bool same(const torch::Tensor& a, const torch::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() && a.equal(b);
}

// Tanh MLP that exercises what DDP must get right besides plain layers: a buffer (broadcast from rank 0), a
// frozen layer (broadcast, never reduced) and a layer registered twice and applied twice (tied weights: hooked
// and reduced once).
struct NetImpl : torch::nn::Module {
  NetImpl() {
    frozen = register_module("frozen", torch::nn::Linear(8, 8));
    fc1 = register_module("fc1", torch::nn::Linear(8, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 16));
    register_module("fc2_tied", fc2);
    fc3 = register_module("fc3", torch::nn::Linear(16, 4));
    offset = register_buffer("offset", torch::zeros({8}));
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::tanh(fc1(frozen(x + offset)));
    return fc3(torch::tanh(fc2(torch::tanh(fc2(h)))));
  }
  torch::nn::Linear frozen{nullptr}, fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
  torch::Tensor offset;
};
TORCH_MODULE(Net);

Net make_net(uint64_t seed) {
  torch::manual_seed(seed);
  Net net;
  torch::NoGradGuard no_grad;
  net->offset.fill_(static_cast<float>(seed) * 0.01f);
  return net;
}

// Each tensor once, though the tied layer is listed under two names (LibTorch does not de-duplicate).
std::vector<torch::Tensor> unique_parameters(torch::nn::Module& module) {
  std::vector<torch::Tensor> unique;
  for (const auto& p : module.parameters()) {
    bool seen = false;
    for (const auto& q : unique) seen = seen || q.is_same(p);
    if (!seen) unique.push_back(p);
  }
  return unique;
}

torch::Tensor flat(torch::nn::Module& module) {
  std::vector<torch::Tensor> parts;
  for (const auto& p : unique_parameters(module)) parts.push_back(p.detach().reshape({-1}));
  for (const auto& b : module.buffers()) parts.push_back(b.detach().reshape({-1}));
  return torch::cat(parts).to(torch::kFloat).contiguous();
}

void write_flat(const std::string& path, const torch::Tensor& values) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(values.data_ptr()), values.numel() * sizeof(float));
  if (!out) throw spur::Error("cannot write " + path);
}

// Deterministic data, identical on every rank: [steps, rows, 8] inputs and [steps, rows, 4] targets.
std::pair<torch::Tensor, torch::Tensor> make_data(int64_t steps, int64_t rows) {
  torch::manual_seed(7);
  auto x = torch::randn({steps, rows, 8});
  auto y = torch::randn({steps, rows, 4});
  return {x, y};
}

torch::optim::SGD make_sgd(Net& net) {
  std::vector<torch::Tensor> trained;
  for (const auto& p : unique_parameters(*net)) {
    if (p.requires_grad()) trained.push_back(p);
  }
  return torch::optim::SGD(trained, torch::optim::SGDOptions(0.1).momentum(0.9));
}

// One process, no Spur, the whole global batch per step: what the distributed runs must equal.
int reference(const Args& args) {
  auto [x, y] = make_data(args.steps, args.rows);
  Net net = make_net(1000);
  auto sgd = make_sgd(net);
  for (int64_t step = 0; step < args.steps; ++step) {
    sgd.zero_grad();
    torch::nn::functional::mse_loss(net(x[step]), y[step]).backward();
    sgd.step();
  }
  write_flat(args.out + "/reference.bin", flat(*net));
  return 0;
}

spur::AcceleratorOptions ddp_options(const Args& args) {
  spur::AcceleratorOptions options;
  std::size_t bytes = args.bucket_bytes;
  if (args.odd_bucket_bytes > 0 && std::getenv("RANK") && std::string(std::getenv("RANK")) == "1") {
    bytes = args.odd_bucket_bytes;
  }
  if (bytes > 0) {
    options.bucket_cap_bytes = bytes;
    options.first_bucket_cap_bytes = bytes / 2;
  }
  return options;
}

// Every rank starts from different weights, frozen ones and the buffer included (seed 1000 + rank): prepare must
// hand them rank 0's.
int ddp(const Args& args) {
  spur::Accelerator accelerator(ddp_options(args));
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  const int64_t rows = 12 / world;
  auto [x, y] = make_data(args.steps, 12);

  Net net = make_net(1000 + rank);
  auto sgd = make_sgd(net);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  check(accelerator.unwrap_model(model).get() == net.get(), "unwrap_model returns the user's module");
  const char* shm = std::getenv("SPUR_SHM_ALLREDUCE");
  const std::string expected = world == 1 ? "none" : (shm && std::string(shm) == "0") ? "gloo" : "shared memory";
  check(accelerator.gradient_transport() == expected,
        "gradients via " + accelerator.gradient_transport() + ", expected " + expected);

  for (int64_t step = 0; step < args.steps; ++step) {
    if (step == 3 && rank == args.crash_rank) {
      std::cout << "rank " << rank << " crashing on cue" << std::endl;
      std::_Exit(3);
    }
    optimizer.zero_grad();
    auto loss = torch::nn::functional::mse_loss(model(x[step].narrow(0, rank * rows, rows)),
                                                y[step].narrow(0, rank * rows, rows));
    if (rank == args.slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    accelerator.backward(loss);
    optimizer.step();
  }
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

// k micro-batches of 2 rows per rank and optimizer step, through accumulate(); k comes from the environment
// (SPUR_GRADIENT_ACCUMULATION_STEPS), as the launcher would pass it. SPUR_TEST_SYNC_EACH_BATCH=1 turns on
// AcceleratorOptions::sync_each_batch: gradients are then identical across ranks on every micro-step.
int accumulate(const Args& args) {
  const char* each = std::getenv("SPUR_TEST_SYNC_EACH_BATCH");
  const bool sync_each_batch = each && std::string(each) == "1";
  spur::AcceleratorOptions options;
  options.sync_each_batch = sync_each_batch;
  spur::Accelerator accelerator(options);
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  const int64_t k = accelerator.gradient_accumulation_steps();
  const int64_t micro = 2;
  auto [x, y] = make_data(args.steps, world * k * micro);

  Net net = make_net(1000);
  auto sgd = make_sgd(net);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  for (int64_t step = 0; step < args.steps; ++step) {
    for (int64_t i = 0; i < k; ++i) {
      auto scope = accelerator.accumulate(model);
      check(accelerator.sync_gradients() == (i == k - 1), "sync_gradients on micro-step " + std::to_string(i));
      const auto before = flat(*net);
      const int64_t offset = (rank * k + i) * micro;
      auto loss =
          torch::nn::functional::mse_loss(model(x[step].narrow(0, offset, micro)), y[step].narrow(0, offset, micro));
      accelerator.backward(loss);
      if (step == 0 && world > 1) {
        // Gradients match across ranks only once synchronised.
        auto grads = torch::cat({net->fc1->weight.grad().reshape({-1}), net->fc3->bias.grad().reshape({-1})});
        auto all = accelerator.gather(grads.unsqueeze(0));
        bool identical = true;
        for (int64_t r = 1; r < world; ++r) identical = identical && all[r].equal(all[0]);
        check(identical == (accelerator.sync_gradients() || sync_each_batch),
              "gradients identical across ranks exactly on sync steps (micro-step " + std::to_string(i) + ")");
      }
      optimizer.step();
      optimizer.zero_grad();
      if (!accelerator.sync_gradients()) {
        check(flat(*net).equal(before), "no optimizer step on micro-step " + std::to_string(i));
      }
    }
  }
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

int collectives(const Args& args) {
  spur::Accelerator accelerator;
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  auto f = torch::kFloat;

  // gather: rank r holds r+1 rows of value r.
  auto rows = torch::full({rank + 1, 3}, static_cast<float>(rank), f);
  std::vector<torch::Tensor> expected_rows;
  for (int64_t r = 0; r < world; ++r) expected_rows.push_back(torch::full({r + 1, 3}, static_cast<float>(r), f));
  auto gathered = accelerator.gather(rows);
  check(same(gathered, torch::cat(expected_rows)), "gather uneven first dimension", str(gathered));

  auto scalar = accelerator.gather(torch::tensor(static_cast<int64_t>(rank * 10)));
  check(same(scalar, torch::arange(world, torch::kLong) * 10), "gather 0-d tensors", str(scalar));

  auto flags = accelerator.gather(torch::tensor({rank % 2 == 0}));
  check(flags.scalar_type() == torch::kBool && flags.size(0) == world, "gather bool keeps dtype", str(flags));

  auto halves = accelerator.gather(torch::full({2}, 1.5f + rank, torch::kBFloat16));
  check(halves.scalar_type() == torch::kBFloat16 && halves[2 * (world - 1)].item<float>() == 0.5f + world,
        "gather bfloat16", str(halves));

  std::map<std::string, std::vector<torch::Tensor>> nested{
      {"a", {torch::full({1}, static_cast<float>(rank), f)}},
      {"b", {torch::full({rank + 1}, 1.0f, f), torch::full({2, 2}, 2.0f, f)}}};
  auto nested_out = accelerator.gather(nested);
  check(nested_out.at("a")[0].size(0) == world && nested_out.at("b")[0].size(0) == world * (world + 1) / 2 &&
            nested_out.at("b")[1].size(0) == 2 * world,
        "gather nested map of vectors");

  // A mismatch (trailing dimension) is the same error on every rank, and the group stays usable.
  try {
    accelerator.gather(torch::zeros({2, 2 + rank}));
    check(false, "gather mismatched trailing dimensions raises");
  } catch (const spur::Error& e) {
    const std::string what = e.what();
    check(what.find("rank 1 [2, 3]") != std::string::npos, "gather mismatch names rank and shape", what);
  }

  try {
    std::vector<int64_t> many(17, 1);
    accelerator.gather(rank == 0 ? torch::zeros(many) : torch::zeros({1}));
    check(false, "a 17-dimensional tensor on rank 0 raises on every rank");
  } catch (const spur::Error& e) {
    check(std::string(e.what()).find("rank 0 passed a tensor of more than 16 dimensions") != std::string::npos,
          "a 17-dimensional tensor on rank 0 raises on every rank", e.what());
  }

  auto sum = accelerator.reduce(torch::full({2, 2}, static_cast<float>(rank + 1), f));
  check(same(sum, torch::full({2, 2}, world * (world + 1) / 2.0f, f)), "reduce sum", str(sum));
  auto mean = accelerator.reduce(torch::full({3}, static_cast<float>(rank), f), spur::Reduction::mean);
  check(torch::allclose(mean, torch::full({3}, (world - 1) / 2.0f, f)), "reduce mean", str(mean));
  auto int_sum = accelerator.reduce(torch::tensor({rank, int64_t{1}}));
  check(same(int_sum, torch::tensor({world * (world - 1) / 2, world})), "reduce sum of int64", str(int_sum));
  try {
    accelerator.reduce(torch::zeros({rank + 1}));
    check(false, "reduce of uneven shapes raises");
  } catch (const spur::Error& e) {
    check(std::string(e.what()).find("reduce(sum)") != std::string::npos, "reduce of uneven shapes raises", e.what());
  }

  // broadcast from the last rank; others hold tensors of other shapes, or none.
  const int64_t source = world - 1;
  torch::Tensor mine = rank == source ? torch::arange(6, torch::kInt).reshape({2, 3})
                                      : (rank == 0 ? torch::Tensor() : torch::zeros({7}));
  auto got = accelerator.broadcast(mine, source);
  check(same(got, torch::arange(6, torch::kInt).reshape({2, 3})), "broadcast to other shapes", str(got));
  std::vector<torch::Tensor> list{torch::full({rank + 1}, static_cast<float>(rank), f)};
  auto list_got = accelerator.broadcast(list, 0);
  check(same(list_got[0], torch::zeros({1}, f)), "broadcast nested vector from rank 0", str(list_got[0]));

  auto padded = accelerator.pad_across_processes(torch::ones({rank + 1, 2}, f), 0, -1);
  auto expect = torch::full({world, 2}, -1.0f, f);
  expect.narrow(0, 0, rank + 1).fill_(1.0f);
  check(same(padded, expect), "pad_across_processes at the end", str(padded));
  auto first = accelerator.pad_across_processes(torch::ones({2, rank + 1}, f), 1, 0, /*pad_first=*/true);
  check(first.size(1) == world && first[0][world - 1].item<float>() == 1.0f &&
            (rank == world - 1 || first[0][0].item<float>() == 0.0f),
        "pad_across_processes first, along dim 1", str(first));

  // main_process_first: the main process writes, the others then read.
  const std::string marker = args.out + "/main_first.txt";
  {
    auto scope = accelerator.main_process_first();
    if (accelerator.is_main_process()) {
      std::ofstream(marker) << "written by rank 0";
    } else {
      check(std::ifstream(marker).good(), "main_process_first: main ran first");
    }
  }
  accelerator.wait_for_everyone();
  accelerator.print("printed", "by", "main");
  return 0;
}

// Sample i carries i as its target.
struct IndexDataset {
  int64_t n = 17;
  torch::data::Example<> get(size_t i) const {
    return {torch::full({2}, static_cast<float>(i)), torch::tensor(static_cast<int64_t>(i))};
  }
  size_t size() const { return static_cast<size_t>(n); }
};

class IndexStream : public spur::StreamDataset<torch::data::Example<>> {
 public:
  explicit IndexStream(int64_t n) : n_(n) {}
  void reset(int64_t) override { next_ = 0; }
  std::optional<torch::data::Example<>> next() override {
    if (next_ >= n_) return std::nullopt;
    const auto i = next_++;
    return torch::data::Example<>{torch::full({2}, static_cast<float>(i)), torch::tensor(i)};
  }

 private:
  int64_t n_;
  int64_t next_ = 0;
};

std::vector<int64_t> values(const torch::Tensor& t) {
  auto c = t.contiguous().to(torch::kLong);
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// Every flag combination, map-style and stream, with and without workers: each rank's prepared loader yields
// exactly its sharding plan, every rank runs as many iterations, and gather_for_metrics keeps every sample once.
int data(const Args&) {
  const int64_t len = 17, bs = 6;
  int combos = 0;
  for (bool split : {false, true}) {
    for (bool even : {true, false}) {
      for (bool drop : {false, true}) {
        for (bool stream : {false, true}) {
          for (int64_t workers : {0, 2}) {
            for (bool shuffle : {false, true}) {
              if (stream && shuffle) continue;
              spur::AcceleratorOptions options;
              options.split_batches = split;
              options.even_batches = even;
              spur::Accelerator accelerator(options);
              const auto world = accelerator.num_processes();
              const auto rank = accelerator.process_index();
              const std::string name = std::string(stream ? "stream" : "map") + (split ? " split" : "") +
                                       (even ? " even" : " uneven") + (drop ? " drop_last" : "") +
                                       (shuffle ? " shuffled" : "") + " workers " + std::to_string(workers);
              const spur::DataLoaderOptions loader_options{
                  .batch_size = bs,
                  .shuffle = shuffle,
                  .drop_last = drop,
                  .num_workers = workers,
                  // Each rank its own seed: prepare must make them shuffle alike.
                  .seed = shuffle ? std::optional<uint64_t>(100 + rank) : std::nullopt};
              std::vector<std::vector<int64_t>> got;
              std::vector<int64_t> kept;
              auto consume = [&](auto& loader) {
                for (auto& batch : loader) {
                  got.push_back(values(batch.target));
                  auto gathered = values(accelerator.gather_for_metrics(batch.target));
                  kept.insert(kept.end(), gathered.begin(), gathered.end());
                }
              };
              if (stream) {
                auto loader =
                    accelerator.prepare(spur::make_stream_loader(std::make_shared<IndexStream>(len), loader_options));
                consume(loader);
              } else {
                auto loader = accelerator.prepare(spur::make_data_loader(IndexDataset{len}, loader_options));
                consume(loader);
              }
              const spur::sharding::Layout layout{world, split, even};
              const auto plan = stream ? spur::sharding::stream_plan(len, bs, drop, layout)
                                       : spur::sharding::plan(len, bs, drop, layout);
              // Zero-sample batches keep uneven ranks in step; the real ones are the plan's.
              std::vector<std::vector<int64_t>> real;
              for (const auto& b : got) {
                if (!b.empty()) real.push_back(b);
              }
              if (!shuffle) check(real == plan[rank], name + ": batches follow the plan");
              auto counts = values(accelerator.gather(torch::tensor(static_cast<int64_t>(got.size()))));
              check(std::all_of(counts.begin(), counts.end(), [&](int64_t c) { return c == counts[0]; }),
                    name + ": every rank iterates as often");
              if (!drop) {
                std::vector<int64_t> sorted = kept;
                std::sort(sorted.begin(), sorted.end());
                std::vector<int64_t> all(len);
                for (int64_t i = 0; i < len; ++i) all[i] = i;
                check(sorted == all, name + ": gather_for_metrics keeps every sample once");
                if (!shuffle) check(kept == all, name + ": ... in order");
              }
              ++combos;
            }
          }
        }
      }
    }
  }
  check(combos == 48, "all combinations ran");
  return 0;
}

// Rank 1's dataset fails on sample 10: rank 1 stops with an error naming it, and rank 0, waiting in the next
// gather, fails too instead of hanging.
struct FailingDataset {
  int64_t rank;
  torch::data::Example<> get(size_t i) const {
    if (rank == 1 && i == 10) throw std::runtime_error("disk read error");
    return {torch::zeros({2}), torch::tensor(static_cast<int64_t>(i))};
  }
  size_t size() const { return 40; }
};

int data_error(const Args&) {
  spur::Accelerator accelerator;
  auto loader = accelerator.prepare(
      spur::make_data_loader(FailingDataset{accelerator.process_index()}, {.batch_size = 2, .num_workers = 2}));
  for (auto& batch : loader) accelerator.gather_for_metrics(batch.target);
  return 0;
}

// Accuracy over 17 samples from the prepared loader equals the accuracy computed on all of them at once.
int metrics(const Args&) {
  torch::manual_seed(5);
  torch::nn::Linear model(4, 3);
  auto x = torch::randn({17, 4});
  auto y = torch::randint(0, 3, {17});
  torch::NoGradGuard no_grad;
  const auto reference = (model(x).argmax(1) == y).to(torch::kDouble).mean().item<double>();
  for (bool even : {true, false}) {
    spur::AcceleratorOptions options;
    options.even_batches = even;
    spur::Accelerator accelerator(options);
    auto loader = accelerator.prepare(spur::make_data_loader(spur::TensorDataset(x, y), {.batch_size = 4}));
    int64_t counted = 0;
    double correct = 0;
    for (auto& batch : loader) {
      auto hits = accelerator.gather_for_metrics((model(batch.data).argmax(1) == batch.target).to(torch::kDouble));
      counted += hits.size(0);
      correct += hits.sum().item<double>();
    }
    const std::string name = even ? "even_batches" : "uneven batches";
    check(counted == 17, name + ": 17 samples counted", std::to_string(counted));
    check(correct / counted == reference, name + ": accuracy equals one process's",
          std::to_string(correct / counted) + " vs " + std::to_string(reference));
  }
  return 0;
}

// Training with everything a checkpoint must carry: a shuffled loader, dropout (RNG), Adam, a StepLR schedule
// and a registered step counter. Without --load: trains --steps steps, saving at --save_at. With --load 1:
// restores the checkpoint and trains on to --steps. Prints "loss RANK STEP HEXFLOAT" for every step.
// Samples of x with noise drawn from the loader's per-batch generator (an augmentation).
struct NoisyDataset {
  torch::Tensor x, y;
  torch::data::Example<> get(size_t i) const {
    return {x[static_cast<int64_t>(i)] + 0.1 * torch::randn({x.size(1)}, spur::loader_generator()),
            y[static_cast<int64_t>(i)]};
  }
  size_t size() const { return static_cast<size_t>(x.size(0)); }
};

// Trains with dropout, Adam, StepLR and a registered counter, printing every step's loss exactly; saves the state
// at step --save_at, or (--load 1) resumes from it. With --accumulate K the loop accumulates K micro-steps (the
// save may fall in the middle of one); --workers N loads on N threads with noise from spur::loader_generator();
// --random_seed 1 seeds torch from the clock first, so the loader's shuffling seed differs between runs.
int resume(const Args& args) {
  spur::AcceleratorOptions options;
  options.gradient_accumulation_steps = args.accumulate;
  spur::Accelerator accelerator(options);
  torch::manual_seed(3);
  auto x = torch::randn({64, 8});
  auto y = torch::randint(0, 4, {64});
  if (args.random_seed) {
    accelerator.set_seed(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  }
  std::optional<uint64_t> seed;
  if (!args.random_seed) seed = 11;
  auto loader = spur::make_data_loader(NoisyDataset{x, y},
                                       {.batch_size = 4, .shuffle = true, .num_workers = args.workers, .seed = seed});
  torch::manual_seed(4 + accelerator.process_index());
  torch::nn::Sequential net(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Dropout(0.3),
                            torch::nn::Linear(32, 4));
  torch::optim::Adam adam(net->parameters(), 1e-2);
  torch::optim::StepLR schedule(adam, 3, 0.5);
  auto counter = torch::zeros({}, torch::kLong);
  accelerator.register_for_checkpointing([&](torch::serialize::OutputArchive& a) { a.write("step", counter); },
                                         [&](torch::serialize::InputArchive& a) { a.read("step", counter); });
  auto [model, optimizer, scheduler, train_loader] = accelerator.prepare(net, adam, schedule, loader);
  const std::string dir = args.out + "/checkpoint";
  if (args.scenario == "load_weights") {
    // Issue 17: a checkpoint's consolidated weights, loaded into a run of any size (and any ZeRO stage).
    spur::load_model(*net, dir);
    write_flat(args.out + "/loaded_rank" + std::to_string(accelerator.process_index()) + ".bin", flat(*net));
    return 0;
  }
  if (args.load) accelerator.load_state(dir);
  model->train();
  auto step = counter.item<int64_t>();
  while (step < args.steps) {
    for (auto& batch : train_loader) {
      auto scope = accelerator.accumulate(model);
      auto loss = torch::nn::functional::cross_entropy(model(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      counter.fill_(++step);
      std::printf("loss %lld %lld %a\n", static_cast<long long>(accelerator.process_index()),
                  static_cast<long long>(step), loss.item<double>());
      std::fflush(stdout);
      if (!args.load && step == args.save_at) accelerator.save_state(dir);
      if (step == args.steps) break;
    }
  }
  write_flat(
      args.out + "/resume" + std::to_string(args.load) + "_rank" + std::to_string(accelerator.process_index()) + ".bin",
      flat(*net));
  return 0;
}

// Two heads; the loss uses the first only. With find_unused_parameters the second head's parameters must not
// leave a bucket unreduced (issue 19, defect 1): 3 steps on --rows rows, every rank its share.
struct TwoHeadsImpl : torch::nn::Module {
  TwoHeadsImpl() {
    body = register_module("body", torch::nn::Linear(8, 16));
    head = register_module("head", torch::nn::Linear(16, 4));
    aux = register_module("aux", torch::nn::Linear(16, 4));
  }
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x) {
    auto h = torch::tanh(body(x));
    return {head(h), aux(h)};
  }
  torch::nn::Linear body{nullptr}, head{nullptr}, aux{nullptr};
};
TORCH_MODULE(TwoHeads);

int unused_outputs(const Args& args) {
  spur::AcceleratorOptions options;
  options.find_unused_parameters = true;
  spur::Accelerator accelerator(options);
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  const int64_t rows = args.rows / world;
  auto [x, y] = make_data(args.steps, args.rows);
  torch::manual_seed(1000 + rank);
  TwoHeads net;
  // AdamW (--optimizer adamw) moves a parameter stepped with a zero gradient (weight decay): a head that gets none
  // must not be stepped at all (issue 17: ZeRO stage 2 against DDP).
  std::unique_ptr<torch::optim::Optimizer> base;
  if (args.optimizer == "adamw") {
    base = std::make_unique<torch::optim::AdamW>(net->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  } else {
    base = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  auto [model, optimizer] = accelerator.prepare(net, *base);
  for (int64_t step = 0; step < args.steps; ++step) {
    auto [logits, aux] = model(x[step].narrow(0, rank * rows, rows));
    accelerator.backward(torch::nn::functional::mse_loss(logits, y[step].narrow(0, rank * rows, rows)));
    optimizer.step();
    optimizer.zero_grad();
  }
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

// Models without trainable parameters prepare on every rank (issue 19, defect 4): one with no parameters at all
// (a buffer only) and one whose parameters are all frozen; their forward runs, and frozen weights follow rank 0.
struct ScaleImpl : torch::nn::Module {
  ScaleImpl() { factor = register_buffer("factor", torch::full({1}, 2.0f)); }
  torch::Tensor forward(const torch::Tensor& x) { return x * factor; }
  torch::Tensor factor;
};
TORCH_MODULE(Scale);

int no_trainable(const Args&) {
  spur::Accelerator accelerator;
  const int64_t rank = accelerator.process_index();
  Scale scale;
  auto prepared_scale = accelerator.prepare(scale);
  check(prepared_scale(torch::ones({2})).equal(torch::full({2}, 2.0f)), "a model without parameters runs");
  torch::manual_seed(50 + rank);
  torch::nn::Linear frozen(4, 4);
  for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  auto prepared_frozen = accelerator.prepare(frozen);
  auto all = accelerator.gather(frozen->weight.detach().reshape({1, -1}));
  bool same_weights = true;
  for (int64_t r = 1; r < all.size(0); ++r) same_weights = same_weights && all[r].equal(all[0]);
  check(same_weights, "frozen weights follow rank 0");
  check(prepared_frozen(torch::ones({1, 4})).size(1) == 4, "a frozen model runs");
  return 0;
}

// save_model into a directory the main process cannot create (issue 19, defect 7): every rank gets an error
// at once (the main one its own, the others "failed on another rank"), and the ranks stay in step after it.
int save_model_failure(const Args& args) {
  spur::Accelerator accelerator;
  torch::nn::Linear net(4, 4);
  auto model = accelerator.prepare(net);
  const std::string blocker = args.out + "/not-a-directory";
  if (accelerator.is_main_process()) std::ofstream(blocker) << "a file";
  accelerator.wait_for_everyone();
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    accelerator.save_model(model, blocker + "/model");
  } catch (const spur::Error& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "save_model error: " << error << std::endl;
  check(!error.empty(), "save_model failed on rank " + std::to_string(accelerator.process_index()));
  check(accelerator.is_main_process() ? error.find(blocker) != std::string::npos
                                      : error.find("failed on another rank") != std::string::npos,
        "the error names the cause or the failed peer");
  check(seconds < 10, "no rank waited for the failed one (" + std::to_string(seconds) + " s)");
  // In step: a gather after the failure works and sees every rank.
  auto ranks = accelerator.gather(torch::tensor({accelerator.process_index()}));
  check(ranks.size(0) == accelerator.num_processes(), "the ranks are still in step");
  return 0;
}

// DDP's buffer rule, pinned (issue 19, item 11): before a forward that follows a synchronised training forward,
// every rank takes rank 0's buffers. The buffer counts forwards, rank r adding r + 1 each time.
struct CounterImpl : torch::nn::Module {
  explicit CounterImpl(int64_t rank) : step(static_cast<float>(rank + 1)) {
    fc = register_module("fc", torch::nn::Linear(2, 1));
    count = register_buffer("count", torch::zeros({1}));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    count.add_(step);
    return fc(x);
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor count;
  float step;
};
TORCH_MODULE(Counter);

int buffers(const Args&) {
  spur::Accelerator accelerator;
  const int64_t rank = accelerator.process_index();
  Counter net(rank);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  for (int i = 0; i < 3; ++i) {
    accelerator.backward(model(torch::ones({2, 2})).sum());
    optimizer.step();
    optimizer.zero_grad();
  }
  // After 3 training forwards: rank 0 holds 3, rank r holds 2 + (r + 1).
  check(net->count.item<float>() == static_cast<float>(rank == 0 ? 3 : 3 + rank), "buffers after training");
  torch::NoGradGuard no_grad;
  model(torch::ones({2, 2}));  // follows a synchronised forward: takes rank 0's 3 first
  check(net->count.item<float>() == static_cast<float>(3 + rank + 1), "buffers synchronised before evaluation");
  model(torch::ones({2, 2}));  // follows an evaluation forward: no synchronisation
  check(net->count.item<float>() == static_cast<float>(3 + 2 * (rank + 1)), "no synchronisation after evaluation");
  return 0;
}

// Mixed precision for real (SPUR_MIXED_PRECISION from the test: fp16 or bf16): a classifier on two separable
// clusters, every rank its share of 24 rows per step, Adam; prints "loss STEP VALUE" (mean over ranks) and
// writes the parameters, which must be identical on every rank.
int precision(const Args& args) {
  spur::Accelerator accelerator;
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  torch::manual_seed(11);
  const int64_t rows = 24;
  auto labels = torch::randint(0, 2, {args.steps, rows});
  auto centres = torch::stack({torch::full({8}, -1.0), torch::full({8}, 1.0)});
  auto inputs = centres.index({labels}) + 0.8 * torch::randn({args.steps, rows, 8});
  torch::manual_seed(12 + rank);  // prepare() hands every rank rank 0's weights
  torch::nn::Sequential net(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Linear(32, 2));
  torch::optim::Adam adam(net->parameters(), 1e-2);
  auto [model, optimizer] = accelerator.prepare(net, adam);
  const int64_t share = rows / world;
  if (accelerator.is_main_process())
    std::printf("precision %s\n", std::string(spur::to_string(accelerator.mixed_precision())).c_str());
  for (int64_t step = 0; step < args.steps; ++step) {
    auto x = inputs[step].narrow(0, rank * share, share);
    auto y = labels[step].narrow(0, rank * share, share);
    auto loss = torch::nn::functional::cross_entropy(model(x), y);
    accelerator.backward(loss);
    optimizer.step();
    optimizer.zero_grad();
    const auto mean = accelerator.reduce(loss.detach(), spur::Reduction::mean).item<double>();
    if (accelerator.is_main_process()) std::printf("loss %lld %.6f\n", static_cast<long long>(step), mean);
  }
  if (auto* scaler = accelerator.scaler()) std::printf("scale %g\n", scaler->get_scale());
  std::fflush(stdout);
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

// Issue 17: the same training under DDP (SPUR_ZERO_STAGE=0) and ZeRO stages 1 and 2 (the test sets the stage):
// the tied-weight Net, AdamW or SGD with momentum, --accumulate micro-steps per step, optional clipping, the
// launcher's mixed precision. Writes each rank's parameters and, per step, the gradient norm clipping saw.
int zero(const Args& args) {
  spur::AcceleratorOptions options;
  options.gradient_accumulation_steps = args.accumulate;
  spur::Accelerator accelerator(options);
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  const int64_t k = accelerator.gradient_accumulation_steps();
  const int64_t micro = 2;
  auto [x, y] = make_data(args.steps, world * k * micro);
  Net net = make_net(1000 + rank);
  std::vector<torch::Tensor> trained;
  for (const auto& p : unique_parameters(*net)) {
    if (p.requires_grad()) trained.push_back(p);
  }
  std::unique_ptr<torch::optim::Optimizer> base, second;
  if (args.optimizer == "adamw") {
    base = std::make_unique<torch::optim::AdamW>(trained, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  } else if (args.optimizer == "split") {
    // Two optimizers over one model (fc2 by AdamW, the rest by SGD), each stepped and zeroed in turn: one's
    // zero_grad must not clear the other's reduced gradients.
    std::vector<torch::Tensor> rest;
    for (const auto& p : trained) {
      if (!p.is_same(net->fc2->weight) && !p.is_same(net->fc2->bias)) rest.push_back(p);
    }
    base = std::make_unique<torch::optim::SGD>(rest, torch::optim::SGDOptions(0.1).momentum(0.9));
    second = std::make_unique<torch::optim::AdamW>(std::vector<torch::Tensor>{net->fc2->weight, net->fc2->bias},
                                                   torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  } else {
    base = std::make_unique<torch::optim::SGD>(trained, torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  auto [model, optimizer] = accelerator.prepare(net, *base);
  std::optional<spur::PreparedOptimizer> other;
  if (second) other.emplace(accelerator.prepare(*second));
  for (int64_t step = 0; step < args.steps; ++step) {
    for (int64_t i = 0; i < k; ++i) {
      auto scope = accelerator.accumulate(model);
      const int64_t offset = (rank * k + i) * micro;
      auto loss =
          torch::nn::functional::mse_loss(model(x[step].narrow(0, offset, micro)), y[step].narrow(0, offset, micro));
      accelerator.backward(loss);
      const char* stage = std::getenv("SPUR_ZERO_STAGE");
      if (stage && std::string(stage) == "2" && world > 1 && accelerator.sync_gradients()) {
        // What is left in .grad() is at most the empty marker a zero_grad of the model is seen by (zero.h).
        bool freed = true;
        for (const auto& p : trained) freed = freed && (!p.grad().defined() || p.grad().numel() == 0);
        check(freed, "stage 2 keeps no full gradient after a synchronising backward");
      }
      if (args.clip > 0 && accelerator.sync_gradients()) {
        const auto norm = accelerator.clip_grad_norm_(model->parameters(), args.clip).item<double>();
        if (rank == 0) std::printf("norm %lld %.9g\n", static_cast<long long>(step), norm);
      }
      optimizer.step();
      if (args.zero_grad == "model") {
        if (accelerator.sync_gradients()) net->zero_grad();  // LibTorch's own, with its default
      } else {
        optimizer.zero_grad();
      }
      if (other) {
        other->step();
        other->zero_grad();
      }
    }
  }
  if (auto* scaler = accelerator.scaler()) std::printf("scale %g\n", scaler->get_scale());
  std::fflush(stdout);
  auto full = accelerator.summon_full_params(/*writeback=*/false);  // stage 3: the parameters are sharded
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

// Issue 37: a model of blocks for ZeRO stage 3. The root holds an input layer, a frozen layer, a buffer, a trained
// parameter of no elements and the head; --blocks blocks (Linear + LayerNorm + tanh, --width wide; 3 of 24 by default)
// are spur::fully_shard units
// (--wrap blocks), or not (none: the whole model one unit), or kept gathered from forward to backward (keep); the wrong
// ways are there for the refusals: a block called twice (twice), one not called (skip), a weight tied across blocks
// (tied), rank 1 wrapping a block fewer (odd), a parameter added after prepare (changed), find_unused_parameters
// (unused); and a forward without gradients before each backward (eval_between, blocks wrapped).
struct BlockImpl : torch::nn::Module {
  explicit BlockImpl(int64_t width) {
    fc = register_module("fc", torch::nn::Linear(width, width));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})));
  }
  // (LayerNorm in float: LibTorch 1.13's CPU kernel refuses a bf16 input with float weights under autocast.)
  torch::Tensor forward(const torch::Tensor& x) { return x + torch::tanh(norm(fc(x).to(torch::kFloat))); }
  torch::nn::Linear fc{nullptr};
  torch::nn::LayerNorm norm{nullptr};
};
TORCH_MODULE(Block);

struct ShardNetImpl : torch::nn::Module {
  ShardNetImpl(const std::string& wrap, int64_t rank, int64_t width, int64_t count) {
    frozen = register_module("frozen", torch::nn::Linear(8, 8));
    for (auto& p : frozen->parameters()) p.set_requires_grad(false);
    input = register_module("input", torch::nn::Linear(8, width));
    spur::FullyShardOptions options;
    options.reshard_after_forward = wrap != "keep";
    for (int64_t i = 0; i < count; ++i) {
      auto block = register_module("h" + std::to_string(i), Block(width));
      const bool wrapped = wrap != "none" && !(wrap == "odd" && rank == 1 && i == 2);  // else "blocks" and the rest
      blocks.push_back(wrapped ? spur::FullyShard<Block>(spur::fully_shard(block, options))
                               : spur::FullyShard<Block>(block, nullptr));
    }
    if (wrap == "tied") blocks[1]->register_parameter("tied", blocks[0]->fc->weight);  // h0's, also in h1
    head = register_module("head", torch::nn::Linear(width, 4));
    offset = register_buffer("offset", torch::zeros({8}));
    empty = register_parameter("empty", torch::zeros({0, width}));  // trained, no elements: in every checkpoint
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = input(frozen(x + offset));
    h = torch::cat({h, torch::matmul(h, empty.t())}, 1);  // no columns: only the gradient's path
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (wrap_skip && i == 1) continue;
      h = blocks[i](h);
      if (wrap_twice && i == 1) h = blocks[i](h);
    }
    return head(h);
  }
  torch::nn::Linear frozen{nullptr}, input{nullptr}, head{nullptr};
  std::vector<spur::FullyShard<Block>> blocks;
  torch::Tensor offset, empty;
  bool wrap_skip = false, wrap_twice = false;
};
TORCH_MODULE(ShardNet);

int shard(const Args& args) {
  spur::AcceleratorOptions options;
  options.gradient_accumulation_steps = args.accumulate;
  options.find_unused_parameters = args.wrap == "unused";
  spur::Accelerator accelerator(options);
  const int64_t world = accelerator.num_processes();
  const int64_t rank = accelerator.process_index();
  const int64_t k = accelerator.gradient_accumulation_steps();
  const int64_t micro = 2;
  auto [x, y] = make_data(args.steps, world * k * micro);
  torch::manual_seed(2000 + rank);  // rank 0's weights reach every rank at prepare
  ShardNet net(args.wrap, rank, args.width, args.blocks);
  net->wrap_skip = args.wrap == "skip";
  net->wrap_twice = args.wrap == "twice";
  {
    torch::NoGradGuard no_grad;
    net->offset.fill_(0.01f * static_cast<float>(rank + 1));
  }
  std::vector<torch::Tensor> trained;
  for (const auto& p : unique_parameters(*net)) {
    if (p.requires_grad()) trained.push_back(p);
  }
  std::unique_ptr<torch::optim::Optimizer> base;
  if (args.optimizer == "adamw") {
    base = std::make_unique<torch::optim::AdamW>(trained, torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  } else {
    base = std::make_unique<torch::optim::SGD>(trained, torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  auto [model, optimizer] = accelerator.prepare(net, *base);
  if (args.wrap == "changed") net->blocks[0]->register_parameter("late", torch::zeros({2}));  // after prepare
  if (rank == args.save_hook_rank) {
    accelerator.register_save_state_pre_hook(
        [](spur::ModelList&, std::vector<spur::NamedTensors>&, const std::string&) {});
  }
  int64_t first = 0;
  if (args.load) {
    accelerator.load_state(args.out + "/checkpoint");
    first = args.save_at;
  }
  for (int64_t step = first; step < args.steps; ++step) {
    for (int64_t i = 0; i < k; ++i) {
      auto scope = accelerator.accumulate(model);
      const int64_t offset = (rank * k + i) * micro;
      auto loss =
          torch::nn::functional::mse_loss(model(x[step].narrow(0, offset, micro)), y[step].narrow(0, offset, micro));
      if (args.wrap == "eval_between") {
        // A forward without gradients between a training forward and its backward (an evaluation, a sample):
        // under stage 3 it frees the root, which the backward must gather again.
        torch::NoGradGuard no_grad;
        model(x[step].narrow(0, 0, 1));
      }
      accelerator.backward(loss);
      if (args.clip > 0 && accelerator.sync_gradients()) {
        const auto norm = accelerator.clip_grad_norm_(model->parameters(), args.clip).item<double>();
        if (rank == 0) std::printf("norm %lld %.9g\n", static_cast<long long>(step), norm);
      }
      optimizer.step();
      optimizer.zero_grad();
      const auto mean = accelerator.reduce(loss.detach(), spur::Reduction::mean).item<double>();
      if (accelerator.is_main_process() && accelerator.sync_gradients()) {
        std::printf("loss %lld %.9g\n", static_cast<long long>(step), mean);
      }
    }
    if (step + 1 == args.save_at && !args.load) accelerator.save_state(args.out + "/checkpoint");
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak_rss_mib %lld %.1f\n", static_cast<long long>(rank), static_cast<double>(usage.ru_maxrss) / 1024);
  if (!args.outputs) return 0;
  {
    torch::NoGradGuard no_grad;
    auto eval = model(x[0]);  // a forward without gradients gathers and frees as well
    if (rank == 0) std::printf("eval %.9g\n", eval.sum().item<double>());
  }
  accelerator.save_model(model, args.out + "/model");
  std::fflush(stdout);
  auto full = accelerator.summon_full_params(/*writeback=*/false);
  write_flat(args.out + "/rank" + std::to_string(rank) + ".bin", flat(*net));
  return 0;
}

// Issues 32 (8) and 34: a function written for the plain module (Net&), called with the module inside the prepared
// model, runs its own forward; the backward that follows is synchronised all the same (the first gradient arms the
// reduction), on local micro-steps and synchronising ones, under SPUR_ZERO_STAGE too. Each rank trains on its own
// data, so without synchronisation the ranks would drift apart; the parameters after each step are compared.
int unwrapped(const Args& args) {
  spur::AcceleratorOptions options;
  options.gradient_accumulation_steps = 2;
  spur::Accelerator accelerator(options);
  const int64_t rank = accelerator.process_index();
  Net net = make_net(1000);
  auto sgd = make_sgd(net);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  auto data = make_data(8, 4);
  const torch::Tensor x = data.first + static_cast<double>(rank), y = data.second * static_cast<double>(rank + 1);
  // The user's own helper, written for the plain module.
  auto loss_of = [&](NetImpl& module, int64_t step) {
    return torch::nn::functional::mse_loss(module.forward(x[step]), y[step]);
  };
  auto agree = [&](const char* what) {
    const auto all = accelerator.gather(flat(*net).unsqueeze(0));
    bool equal = true;
    for (int64_t r = 1; r < all.size(0); ++r) equal = equal && all[r].equal(all[0]);
    check(equal, what);
  };
  const auto before = flat(*net);
  for (int64_t step = 0; step < 4; ++step) {
    auto scope = accelerator.accumulate(model);
    accelerator.backward(loss_of(*model, step));  // the module's own forward
    optimizer.step();
    optimizer.zero_grad();
  }
  check(!flat(*net).equal(before), "the module's own forward trained");
  agree("the ranks agree after steps through the module's own forward");
  for (int64_t step = 4; step < 8; ++step) {
    auto scope = accelerator.accumulate(model);
    const auto output = step % 2 ? net->forward(x[step]) : model(x[step]);  // mixed, as a real program may
    accelerator.backward(torch::nn::functional::mse_loss(output, y[step]));
    optimizer.step();
    optimizer.zero_grad();
  }
  agree("the ranks agree after mixed steps");
  // With BatchNorm (pytorch/examples' dcgan): its backward reads the running statistics saved by the forward, so
  // rank 0's buffers may reach the other ranks only after the backward (an in-place broadcast at the first
  // gradient failed it with "modified by an inplace operation").
  torch::nn::Sequential bn(torch::nn::Linear(8, 6), torch::nn::BatchNorm1d(6), torch::nn::Linear(6, 4));
  torch::optim::SGD bn_sgd(bn->parameters(), torch::optim::SGDOptions(0.1));
  auto [bn_model, bn_optimizer] = accelerator.prepare(bn, bn_sgd);
  // Its first synchronised backward comes from the prepared call, the next from the module's own forward (the
  // Reducer's first bucket rebuild must follow either), and the program's own optimizer zeroes the gradients after
  // a backward armed by the prepared call too (bucket views refuse torch's zero_grad).
  for (int64_t step = 0; step < 8; ++step) {
    auto scope = accelerator.accumulate(bn_model);
    const auto output = (step / 2) % 2 ? bn->forward(x[step]) : bn_model(x[step]);
    accelerator.backward(torch::nn::functional::mse_loss(output, y[step]));
    bn_optimizer.step();
    if (accelerator.sync_gradients()) bn_sgd.zero_grad();
  }
  const auto bn_all = accelerator.gather(flat(*bn).unsqueeze(0));
  for (int64_t r = 1; r < bn_all.size(0); ++r) {
    check(bn_all[r].equal(bn_all[0]), "the ranks agree on a BatchNorm model's weights and running statistics");
  }
  std::cout << "rank " << rank << " synchronised through the module" << std::endl;
  return 0;
}

// Issue 34: a ported loop that keeps its own loss.backward() and optimizer.step() (what accelerator.prepare
// returned is not used). Plain DDP trains it synchronised; under fp16, gradient accumulation or ZeRO it would train
// wrong without a word, so its first backward (or, under ZeRO, its 16th) is refused, on every rank.
int own_steps(const Args&) {
  spur::Accelerator accelerator;
  const int64_t rank = accelerator.process_index();
  Net net = make_net(1000);
  auto sgd = make_sgd(net);
  accelerator.prepare(net, sgd);
  auto data = make_data(40, 4);
  const torch::Tensor x = data.first + static_cast<double>(rank);
  try {
    for (int64_t step = 0; step < 40; ++step) {
      auto loss = torch::nn::functional::mse_loss(net->forward(x[step]), data.second[step]);
      sgd.zero_grad();
      loss.backward();
      sgd.step();
    }
  } catch (const std::exception& e) {
    std::cout << "rank " << rank << " error: " << e.what() << std::endl;
    return 3;
  }
  const auto all = accelerator.gather(flat(*net).unsqueeze(0));
  for (int64_t r = 1; r < all.size(0); ++r) check(all[r].equal(all[0]), "the ranks agree after their own steps");
  std::cout << "rank " << rank << " trained with its own steps" << std::endl;
  return 0;
}

// Issue 34: rank 1 leaves the training loop on its own after 2 steps (a per-rank `break`) and its program ends;
// rank 0's next gradient all-reduce fails saying that rank 1 left, and how to stop together.
int leave_early(const Args&) {
  spur::Accelerator accelerator;
  const int64_t rank = accelerator.process_index();
  Net net = make_net(1000);
  auto sgd = make_sgd(net);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  auto data = make_data(8, 4);
  try {
    for (int64_t step = 0; step < 8; ++step) {
      if (rank == 1 && step == 2) break;
      accelerator.backward(torch::nn::functional::mse_loss(model(data.first[step]), data.second[step]));
      optimizer.step();
      optimizer.zero_grad();
    }
  } catch (const std::exception& e) {
    std::cout << "rank " << rank << " error: " << e.what() << std::endl;
    return 3;
  }
  return 0;
}

// Issue 38 beside torch (tests/rigs/ddp_hook_oracle.py, the same set-up under DDP with torch's own hook): a
// Linear(6, 5) - tanh - Linear(5, 3) model whose weights and data come from formulas (no random generator to agree
// on), trained by SGD with momentum on every rank's own rows for --steps steps. The communication hook is the
// launcher's (SPUR_DDP_COMM_HOOK). Rank 0 prints every parameter's float32 bits, one line per parameter.
struct HookNetImpl : torch::nn::Module {
  HookNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 5));
    fc2 = register_module("fc2", torch::nn::Linear(5, 3));
    torch::NoGradGuard no_grad;
    double offset = 0;
    for (auto& p : parameters()) {
      p.copy_(torch::sin(torch::arange(p.numel(), torch::kFloat) * 0.37 + offset).mul(0.5).view_as(p));
      offset += 1;
    }
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(HookNet);

int hook_oracle(const Args& args) {
  spur::Accelerator accelerator;
  const auto rank = static_cast<double>(accelerator.process_index());
  HookNet net;
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto [model, opt] = accelerator.prepare(net, sgd);
  for (int64_t step = 0; step < args.steps; ++step) {
    const auto s = static_cast<double>(step);
    auto x = torch::cos(torch::arange(24, torch::kFloat) * 0.11 + (s * 1.3 + rank * 0.7)).mul(2.0).view({4, 6});
    auto y = torch::sin(torch::arange(12, torch::kFloat) * 0.23 + (s + rank)).view({4, 3});
    accelerator.backward(torch::nn::functional::mse_loss(model(x), y));
    opt.step();
    opt.zero_grad();
  }
  if (accelerator.is_main_process()) {
    std::printf("gradients via %s\n", accelerator.gradient_transport().c_str());
    for (const auto& item : net->named_parameters()) {
      const auto bits = item.value().detach().contiguous().view(torch::kInt);
      std::printf("param %s:", item.key().c_str());
      for (int64_t i = 0; i < bits.numel(); ++i) std::printf(" %d", bits.data_ptr<int32_t>()[i]);
      std::printf("\n");
    }
  }
  return 0;
}

// Issue 32 (5, 6) beside torch (tests/rigs/ddp_scaler_oracle.py, the same set-up under DDP and
// torch.amp.GradScaler): two branches, each trained by its own optimizer (AdamW for a, SGD for b) and StepLR, in fp16
// on 2 ranks; on the poisoned steps one branch's inputs on rank 0 are 1e4, so its scaled gradients overflow and only
// its optimizer skips. Each step prints the scale it used, which optimizers skipped and both learning rates after the
// schedulers, as JSON lines.
struct TwoBranchImpl : torch::nn::Module {
  TwoBranchImpl() {
    a = register_module("a", torch::nn::Linear(4, 3));
    b = register_module("b", torch::nn::Linear(4, 3));
  }
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& xa, const torch::Tensor& xb) {
    return {a(xa), b(xb)};
  }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(TwoBranch);

int scaler_oracle(const Args& args) {
  spur::AcceleratorOptions options;
  options.mixed_precision = spur::Precision::fp16;
  options.scaler.init_scale = 1024;
  options.scaler.growth_interval = 2;
  spur::Accelerator accelerator(options);
  const int64_t rank = accelerator.process_index();
  torch::manual_seed(5);
  TwoBranch net;
  torch::optim::AdamW adamw(net->a->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.1));
  torch::optim::SGD sgd(net->b->parameters(), torch::optim::SGDOptions(0.1));
  torch::optim::StepLR schedule_a(adamw, 2, 0.5), schedule_b(sgd, 3, 0.5);
  auto [model, opt_a, opt_b, sched_a, sched_b] = accelerator.prepare(net, adamw, sgd, schedule_a, schedule_b);
  std::map<int64_t, std::string> poisoned;  // step -> branch
  std::stringstream list(args.poison);
  for (std::string item; std::getline(list, item, ',');) {
    if (item.empty()) continue;
    poisoned[std::stoll(item.substr(0, item.find(':')))] = item.substr(item.find(':') + 1);
  }
  torch::manual_seed(6 + rank);
  for (int64_t step = 0; step < args.steps; ++step) {
    auto xa = torch::randn({2, 4}), xb = torch::randn({2, 4}), ya = torch::randn({2, 3}), yb = torch::randn({2, 3});
    if (rank == 0 && poisoned.contains(step)) (poisoned[step] == "a" ? xa : xb).mul_(1e4);
    auto [out_a, out_b] = model(xa, xb);
    accelerator.backward(torch::nn::functional::mse_loss(out_a, ya) + torch::nn::functional::mse_loss(out_b, yb));
    const double scale = accelerator.scaler()->get_scale();  // the one this step's loss was scaled by
    // Both optimizers, then both schedulers: each schedule must follow its own optimizer's skip.
    opt_a.step();
    opt_b.step();
    sched_a.step();
    sched_b.step();
    opt_a.zero_grad();
    opt_b.zero_grad();
    if (rank == 0) {
      std::printf(
          "{\"step\": %lld, \"scale\": %.17g, \"skipped_a\": %s, \"skipped_b\": %s, \"lr_a\": %.17g, "
          "\"lr_b\": %.17g}\n",
          static_cast<long long>(step), scale, opt_a.step_was_skipped() ? "true" : "false",
          opt_b.step_was_skipped() ? "true" : "false", adamw.param_groups()[0].options().get_lr(),
          sgd.param_groups()[0].options().get_lr());
    }
  }
  std::fflush(stdout);
  return 0;
}

// --- The README's and the porting guide's training loops, compiled as written (tests/rigs/extract_readme.py) ----
namespace readme {

// What the tested snippets assume: `train_set`, `make_mlp`, and for the accumulation loop `net`, `adam`,
// `loader` and `loss_fn`. The reference below builds the same objects in the same order.
torch::nn::Sequential make_mlp(int64_t hidden) {
  torch::manual_seed(21);
  return torch::nn::Sequential(torch::nn::Linear(8, hidden), torch::nn::ReLU(), torch::nn::Linear(hidden, 4));
}

spur::TensorDataset make_set(int64_t samples) {
  torch::manual_seed(22);
  return spur::TensorDataset(torch::randn({samples, 8}), torch::randint(0, 4, {samples}));
}

int quick_start(const Args& args) {
  auto train_set = make_set(args.rows);
#include "readme_quick_start.inc"
  write_flat(args.out + "/rank" + std::to_string(accelerator.process_index()) + ".bin", flat(*net));
  return 0;
}

int accumulation(const Args& args) {
  auto train_set = make_set(args.rows);
  auto net = make_mlp(64);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(3e-3));
  auto loader = spur::make_data_loader(train_set, {.batch_size = 16, .shuffle = true});
  auto loss_fn = [](const torch::Tensor& output, const torch::Tensor& target) {
    return torch::nn::functional::cross_entropy(output, target);
  };
#include "readme_accumulation.inc"
  write_flat(args.out + "/rank" + std::to_string(accelerator.process_index()) + ".bin", flat(*net));
  return 0;
}

// The porting guide's checkpoints-and-TensorBoard loop (docs/porting.md) for --steps epochs, in --out (its "out"
// is relative).
int project(const Args& args) {
  const int64_t epochs = args.steps;
  auto train_set = make_set(args.rows);
  std::filesystem::current_path(args.out);
#include "readme_project.inc"
  write_flat(args.out + "/rank" + std::to_string(accelerator.process_index()) + ".bin", flat(*net));
  return 0;
}

// One process, plain LibTorch, one Adam step on every --k consecutive batches of the same (unprepared) loader at
// once: what N ranks x K micro-steps must equal.
int large_batch(const Args& args) {
  auto train_set = make_set(args.rows);
  auto net = make_mlp(args.hidden);
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(3e-3));
  auto loader = spur::make_data_loader(train_set, {.batch_size = args.batch, .shuffle = true});
  std::vector<torch::Tensor> xs, ys;
  for (auto& batch : loader) {
    xs.push_back(batch.data);
    ys.push_back(batch.target);
    if (static_cast<int64_t>(xs.size()) < args.k) continue;
    adam.zero_grad();
    torch::nn::functional::cross_entropy(net->forward(torch::cat(xs)), torch::cat(ys)).backward();
    adam.step();
    xs.clear();
    ys.clear();
  }
  write_flat(args.out + "/reference.bin", flat(*net));
  return 0;
}

}  // namespace readme

// Saves a large model's state ("saved 1"), then saves again with other weights ("saving 2"): the test kills
// this process during the second save. With --load 1: loads the checkpoint and prints the first weight.
int save_loop(const Args& args) {
  spur::Accelerator accelerator;
  const int64_t width = static_cast<int64_t>(std::sqrt(static_cast<double>(std::max<int64_t>(1, args.big)) * 1e6));
  torch::nn::Linear net(width, width);
  auto model = accelerator.prepare(net);
  const std::string dir = args.out + "/checkpoint";
  if (args.load) {
    accelerator.load_state(dir);
    std::printf("weight %g\n", net->weight.view(-1)[0].item<double>());
    return 0;
  }
  torch::NoGradGuard no_grad;
  for (auto& p : net->parameters()) p.fill_(1.0);
  accelerator.save_state(dir);
  std::printf("saved 1\n");
  std::fflush(stdout);
  for (auto& p : net->parameters()) p.fill_(2.0);
  std::printf("saving 2\n");
  std::fflush(stdout);
  accelerator.save_state(dir);
  std::printf("saved 2\n");
  return 0;
}

// Logs `steps` values of "x" (value = step) one every ~100 microseconds, saying how many it has logged; the test
// SIGKILLs it mid-run and checks the history.
int track(const Args& args) {
  spur::Accelerator accelerator;
  accelerator.init_trackers("kill-test", {{"steps", args.steps}});
  for (int64_t step = 0; step < args.steps; ++step) {
    accelerator.log({{"x", step}}, step);
    if (step % 100 == 99) {
      std::printf("logged %lld\n", static_cast<long long>(step) + 1);
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  accelerator.end_training();
  return 0;
}

// Issue 15's process helpers on every rank: objects gathered and broadcast, inputs split (with padding on uneven
// counts), triggers, the batch-size search agreeing across ranks, and the logger's three ways of writing.
int helpers(const Args& args) {
  spur::Accelerator accelerator;
  const int64_t rank = accelerator.process_index();
  const int64_t world = accelerator.num_processes();
  auto join = [](const std::vector<std::string>& items) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
    return out;
  };

  // gather_object: one value per rank; a vector is concatenated; maps and JSON values travel whole.
  const auto names = accelerator.gather_object("rank-" + std::to_string(rank) + "-\u00e9");
  std::vector<std::string> expected_names;
  for (int64_t r = 0; r < world; ++r) expected_names.push_back("rank-" + std::to_string(r) + "-\u00e9");
  check(names == expected_names, "gather_object strings", join(names));
  std::vector<int64_t> mine(static_cast<std::size_t>(rank + 1), rank);
  const auto flat = accelerator.gather_object(mine);
  std::vector<int64_t> expected_flat;
  for (int64_t r = 0; r < world; ++r) expected_flat.insert(expected_flat.end(), static_cast<std::size_t>(r + 1), r);
  check(flat == expected_flat, "gather_object concatenates vectors of uneven length");
  const auto maps = accelerator.gather_object(
      std::map<std::string, double>{{"loss", 0.5 * static_cast<double>(rank)}, {"nan", std::nan("")}});
  check(maps.size() == static_cast<std::size_t>(world) &&
            maps.back().at("loss") == 0.5 * static_cast<double>(world - 1) && std::isnan(maps.front().at("nan")),
        "gather_object maps with NaN");
  const auto empty = accelerator.gather_object(std::vector<std::string>{});
  check(empty.empty(), "gather_object of empty vectors");

  // broadcast_object_list from the last rank; the others start with lists of other sizes.
  std::vector<std::string> list = rank == world - 1 ? std::vector<std::string>{"a", "b", "c"}
                                                    : std::vector<std::string>(static_cast<std::size_t>(rank), "x");
  accelerator.broadcast_object_list(list, world - 1);
  check(list == std::vector<std::string>{"a", "b", "c"}, "broadcast_object_list from the last rank", join(list));
  try {
    std::vector<int> nothing;
    accelerator.broadcast_object_list(nothing, world);
    check(false, "broadcast_object_list from a rank that does not exist raises");
  } catch (const spur::Error& e) {
    check(std::string(e.what()).find("from_process " + std::to_string(world)) != std::string::npos,
          "broadcast_object_list from a rank that does not exist raises", e.what());
  }

  // split_between_processes: 7 items (uneven for 2 and 3 ranks), with and without padding.
  const std::vector<int> items{0, 1, 2, 3, 4, 5, 6};
  const auto share = accelerator.split_between_processes(items);
  const int64_t per = 7 / world, extras = 7 % world;
  const int64_t begin = rank * per + std::min(rank, extras);
  const int64_t count = per + (rank < extras ? 1 : 0);
  std::vector<int> expected_share(items.begin() + begin, items.begin() + begin + count);
  check(share == expected_share, "split_between_processes vector");
  const auto padded = accelerator.split_between_processes(items, true);
  auto expected_padded = expected_share;
  expected_padded.resize(static_cast<std::size_t>(per + (extras > 0 ? 1 : 0)), 6);
  check(padded == expected_padded, "split_between_processes pads with the last item");
  const auto all_shares = accelerator.gather_object(padded);
  check(all_shares.size() == static_cast<std::size_t>(world * (per + (extras > 0 ? 1 : 0))),
        "padded shares are the same length on every rank");
  const auto rows = torch::arange(14, torch::kFloat).reshape({7, 2});
  const auto tensor_share = accelerator.split_between_processes(rows, true);
  check(tensor_share.size(0) == per + (extras > 0 ? 1 : 0) && tensor_share[0][0].item<float>() == 2.0f * begin &&
            tensor_share[-1][0].item<float>() == (count < tensor_share.size(0) ? 12.0f : 2.0f * (begin + count - 1)),
        "split_between_processes tensor with padding", str(tensor_share));
  const auto map_share =
      accelerator.split_between_processes(std::map<std::string, std::vector<int>>{{"a", items}, {"b", items}});
  check(map_share.at("a") == expected_share && map_share.at("b") == expected_share, "split_between_processes map");
  const auto few = accelerator.split_between_processes(std::vector<int>{42}, true);
  check(few == std::vector<int>{42}, "fewer items than processes: padded with the last");

  // Triggers: rank 1 (the last, with 2 ranks) raises at step 3; every rank stops at step 3, and the trigger is
  // lowered after the check.
  int64_t stopped = -1;
  for (int64_t step = 0; step < 10; ++step) {
    if (step == 3 && rank == 1) accelerator.set_trigger();
    if (accelerator.check_trigger()) {
      stopped = step;
      break;
    }
  }
  check(stopped == 3, "check_trigger stops every rank at the same step", std::to_string(stopped));
  check(!accelerator.check_trigger(), "check_trigger lowers the trigger");

  // find_executable_batch_size: only the last rank runs out of memory above 16; every rank ends on 16.
  std::vector<int64_t> tried;
  const int64_t size = accelerator.find_executable_batch_size(128, [&](int64_t batch_size) {
    tried.push_back(batch_size);
    if (rank == world - 1 && batch_size > 16) throw std::bad_alloc();
    if (rank == 0 && batch_size > 64) {
      throw c10::Error({"helpers", __FILE__, static_cast<uint32_t>(__LINE__)},
                       "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes.");
    }
    return batch_size;
  });
  check(size == 16 && tried == std::vector<int64_t>{128, 64, 32, 16}, "find_executable_batch_size agrees on 16",
        std::to_string(size));
  // Another error on rank 0 only: rethrown there, a spur::Error on the others; nobody waits for the timeout.
  try {
    accelerator.find_executable_batch_size(4, [&](int64_t size) -> int64_t {
      if (rank == 0) throw std::runtime_error("not memory");
      return size;
    });
    check(false, "find_executable_batch_size passes other errors through");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    check(rank == 0 ? what == "not memory" : what.find("failed on another rank") != std::string::npos,
          "find_executable_batch_size passes other errors through", what);
  }

  // on_* helpers run on their process only.
  const auto on_main = accelerator.on_main_process([] { return 7; });
  check(on_main.has_value() == accelerator.is_main_process(), "on_main_process");
  int ran = 0;
  accelerator.on_last_process([&] { ++ran; });
  accelerator.on_process(0, [&] { ran += 10; });
  check(ran == (accelerator.is_last_process() ? 1 : 0) + (rank == 0 ? 10 : 0), "on_last_process and on_process");

  // The logger: main only (no rank), every rank (with its rank), in order.
  auto& logger = spur::get_logger("helpers");
  logger.info("main only line");
  logger.debug("a debug line, below the level");
  logger.warning("every rank line", {.main_process_only = false});
  // in_order into one file all ranks append to, so the test sees the order the lines were written in.
  const int saved_stderr = ::dup(STDERR_FILENO);
  const int shared = ::open((args.out + "/ordered.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(shared, STDERR_FILENO);
  for (int i = 0; i < 3; ++i) logger.info("ordered " + std::to_string(i), {.in_order = true});
  ::dup2(saved_stderr, STDERR_FILENO);
  ::close(shared);
  ::close(saved_stderr);
  accelerator.wait_for_everyone();
  return 0;
}

// Automatic checkpoints with total_limit 2 on every rank: saves one per step; with --crash_rank R and --save_at K,
// rank R dies inside the K-th save (after the temporary directory exists, before anything is committed). With
// --load 1, resumes from the latest and saves once more.
int rotate(const Args& args) {
  spur::AcceleratorOptions options;
  options.project_config.project_dir = args.out;
  options.project_config.automatic_checkpoint_naming = true;
  options.project_config.total_limit = 2;
  spur::Accelerator accelerator(options);
  torch::manual_seed(1);
  torch::nn::Linear net(4, 4);
  auto model = accelerator.prepare(net);
  accelerator.register_save_state_pre_hook([&](spur::ModelList&, std::vector<spur::NamedTensors>&, const std::string&) {
    if (accelerator.save_iteration() == args.save_at && accelerator.process_index() == args.crash_rank) {
      std::printf("crashing in save %lld\n", static_cast<long long>(args.save_at));
      std::fflush(stdout);
      std::_Exit(3);
    }
  });
  if (args.load) {
    const std::string loaded = accelerator.load_state();
    std::printf("loaded %s weight %g next %lld\n", loaded.c_str(), net->weight.view(-1)[0].item<double>(),
                static_cast<long long>(accelerator.save_iteration()));
    std::printf("saved %s\n", accelerator.save_state().c_str());
    return 0;
  }
  torch::NoGradGuard no_grad;
  for (int64_t step = 0; step < args.steps; ++step) {
    for (auto& p : net->parameters()) p.fill_(static_cast<double>(step));
    const std::string dir = accelerator.save_state();
    std::printf("saved %s\n", dir.c_str());
    std::fflush(stdout);
  }
  return 0;
}

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Issue 16: training under `spur launch --max_restarts`. Resumes from the latest automatic checkpoint when there
// is one, saves every --k steps, and on the first attempt rank --crash_rank SIGKILLs itself at step --save_at
// (mid-epoch, between checkpoints). Writes its final parameters (out/final_rank<r>.bin); prints when it joined
// the group and when it died (wall clock, ns), from which the test measures a restart.
int restart(const Args& args) {
  spur::AcceleratorOptions options;
  options.project_config.project_dir = args.out + "/project";
  options.project_config.automatic_checkpoint_naming = true;
  options.project_config.total_limit = 2;
  spur::Accelerator accelerator(options);
  const int64_t attempt = accelerator.state().restart_count;
  std::printf("attempt %lld joined %lld\n", static_cast<long long>(attempt), static_cast<long long>(wall_ns()));
  torch::manual_seed(3);
  auto x = torch::randn({64, 8});
  auto y = torch::randint(0, 4, {64});
  auto loader = spur::make_data_loader(NoisyDataset{x, y}, {.batch_size = 4, .shuffle = true, .seed = 11});
  torch::manual_seed(4 + accelerator.process_index());
  torch::nn::Sequential net(torch::nn::Linear(8, 32), torch::nn::ReLU(), torch::nn::Dropout(0.3),
                            torch::nn::Linear(32, 4));
  torch::optim::Adam adam(net->parameters(), 1e-2);
  torch::optim::StepLR schedule(adam, 3, 0.5);
  auto counter = torch::zeros({}, torch::kLong);
  accelerator.register_for_checkpointing([&](torch::serialize::OutputArchive& a) { a.write("step", counter); },
                                         [&](torch::serialize::InputArchive& a) { a.read("step", counter); });
  auto [model, optimizer, scheduler, train_loader] = accelerator.prepare(net, adam, schedule, loader);
  if (!accelerator.latest_checkpoint().empty()) {
    std::printf("resuming from %s\n", accelerator.load_state().c_str());
  }
  model->train();
  auto step = counter.item<int64_t>();
  while (step < args.steps) {
    for (auto& batch : train_loader) {
      auto loss = torch::nn::functional::cross_entropy(model(batch.data), batch.target);
      accelerator.backward(loss);
      optimizer.step();
      scheduler.step();
      optimizer.zero_grad();
      counter.fill_(++step);
      if (step % args.k == 0) accelerator.save_state();
      if (attempt == 0 && accelerator.process_index() == args.crash_rank && step == args.save_at) {
        std::printf("killed %lld at step %lld\n", static_cast<long long>(wall_ns()), static_cast<long long>(step));
        std::fflush(stdout);
        ::raise(SIGKILL);
      }
      if (step == args.steps) break;
    }
  }
  write_flat(args.out + "/final_rank" + std::to_string(accelerator.process_index()) + ".bin", flat(*net));
  return 0;
}

// Issue 16: a hang for `spur launch --hang_timeout`. The ranks train; at step --save_at rank --crash_rank stays in
// its own code (sleeps) while the others wait in wait_for_everyone. With --load 1 only on the first attempt.
int hang(const Args& args) {
  spur::Accelerator accelerator;
  const int64_t attempt = accelerator.state().restart_count;
  torch::manual_seed(1);
  torch::nn::Linear net(4, 2);
  torch::optim::SGD sgd(net->parameters(), 0.1);
  auto [model, optimizer] = accelerator.prepare(net, sgd);
  for (int64_t step = 0; step < args.steps; ++step) {
    auto loss = model(torch::randn({8, 4})).pow(2).mean();
    accelerator.backward(loss);
    optimizer.step();
    optimizer.zero_grad();
    if (step == 10) {
      std::printf("rank %lld is training (pid %lld)\n", static_cast<long long>(accelerator.process_index()),
                  static_cast<long long>(::getpid()));
      std::fflush(stdout);
    }
    if (step == args.save_at) {
      if (accelerator.process_index() == args.crash_rank && (!args.load || attempt == 0)) {
        std::printf("rank %lld stays in its own code\n", static_cast<long long>(accelerator.process_index()));
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::minutes(10));
      }
      accelerator.wait_for_everyone();
    }
  }
  std::printf("rank %lld done after attempt %lld\n", static_cast<long long>(accelerator.process_index()),
              static_cast<long long>(attempt));
  return 0;
}

// Logs scalars and a text to TensorBoard, waits for the writer to hand them over, then aborts without
// end_training: the event file must still read back.
int tensorboard_crash(const Args& args) {
  spur::AcceleratorOptions options;
  options.project_config.logging_dir = args.out;
  options.log_with = {"tensorboard"};
  spur::Accelerator accelerator(options);
  accelerator.init_trackers("crash", {{"lr", 0.25}}, {.trackers = {"none"}});
  for (int64_t step = 0; step < args.steps; ++step)
    accelerator.log({{"loss", 1.0 / static_cast<double>(step + 1)}}, step);
  accelerator.log({{"note", "before the crash"}}, args.steps);
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // several flush intervals
  std::printf("aborting\n");
  std::fflush(stdout);
  std::abort();
}

// Logs the same values to the run history (SPUR_HISTORY) and to TensorBoard (in --out/both), for --steps steps,
// and ends: `spur runs import` of the event files must give back the history's run (ImportTest).
int tensorboard_history(const Args& args) {
  spur::AcceleratorOptions options;
  options.project_config.logging_dir = args.out;
  options.log_with = {"tensorboard"};
  spur::Accelerator accelerator(options);
  accelerator.init_trackers("both", {{"lr", 0.25}, {"model", "mlp"}, {"amp", false}});
  for (int64_t step = 0; step < args.steps; ++step) {
    accelerator.log({{"loss", 1.0 / static_cast<double>(step + 1)}, {"eval/acc", static_cast<double>(step) * 0.01}},
                    step);
  }
  accelerator.end_training();
  return 0;
}

// find_executable_batch_size against the device's real out-of-memory error (tests/gpu/run.sh): 1 GiB of float32 per
// batch item, from 16 TiB down, until one allocation fits; prints the size found. (On the CPU a large malloc may
// succeed without touching memory, so the size found there says little.)
int batch_search(const Args&) {
  spur::Accelerator accelerator;
  const auto options = torch::TensorOptions(torch::kFloat).device(accelerator.device());
  const int64_t found = accelerator.find_executable_batch_size(16384, [&](int64_t size) {
    auto block = torch::empty({size, 256, 1024, 1024}, options);
    return block.size(0);
  });
  check(found >= 1, "find_executable_batch_size found a size", std::to_string(found));
  std::printf("batch size %lld fits on %s (%lld GiB)\n", static_cast<long long>(found),
              accelerator.device().str().c_str(), static_cast<long long>(found));
  return 0;
}

int rendezvous(const Args&) {
  spur::Accelerator accelerator;
  std::cout << "joined as rank " << accelerator.process_index() << std::endl;
  accelerator.wait_for_everyone();
  return 0;
}

}  // namespace

namespace spur_differential {
int run(int argc, char** argv);  // differential.cpp: the engine's differential test
}

int main(int argc, char** argv) try {
  if (argc >= 2 && std::string(argv[1]) == "differential") return spur_differential::run(argc, argv);
  const Args args = parse(argc, argv);
  int code = 2;
  if (args.scenario == "ddp") {
    code = ddp(args);
  } else if (args.scenario == "zero") {
    return zero(args);
  } else if (args.scenario == "shard") {
    return shard(args);
  } else if (args.scenario == "accumulate") {
    code = accumulate(args);
  } else if (args.scenario == "collectives") {
    code = collectives(args);
  } else if (args.scenario == "data") {
    code = data(args);
  } else if (args.scenario == "data_error") {
    code = data_error(args);
  } else if (args.scenario == "metrics") {
    code = metrics(args);
  } else if (args.scenario == "resume" || args.scenario == "load_weights") {
    code = resume(args);
  } else if (args.scenario == "save_loop") {
    code = save_loop(args);
  } else if (args.scenario == "track") {
    code = track(args);
  } else if (args.scenario == "helpers") {
    code = helpers(args);
  } else if (args.scenario == "restart") {
    return restart(args);
  } else if (args.scenario == "hang") {
    return hang(args);
  } else if (args.scenario == "rotate") {
    code = rotate(args);
  } else if (args.scenario == "tensorboard_crash") {
    code = tensorboard_crash(args);
  } else if (args.scenario == "tensorboard_history") {
    code = tensorboard_history(args);
  } else if (args.scenario == "batch_search") {
    code = batch_search(args);
  } else if (args.scenario == "rendezvous") {
    code = rendezvous(args);
  } else if (args.scenario == "reference") {
    code = reference(args);
  } else if (args.scenario == "precision") {
    code = precision(args);
  } else if (args.scenario == "buffers") {
    code = buffers(args);
  } else if (args.scenario == "unused_outputs") {
    code = unused_outputs(args);
  } else if (args.scenario == "no_trainable") {
    code = no_trainable(args);
  } else if (args.scenario == "leave_early") {
    code = leave_early(args);
  } else if (args.scenario == "unwrapped") {
    code = unwrapped(args);
  } else if (args.scenario == "own_steps") {
    code = own_steps(args);
  } else if (args.scenario == "hook_oracle") {
    code = hook_oracle(args);
  } else if (args.scenario == "scaler_oracle") {
    code = scaler_oracle(args);
  } else if (args.scenario == "save_model_failure") {
    code = save_model_failure(args);
  } else if (args.scenario == "readme_quick_start") {
    code = readme::quick_start(args);
  } else if (args.scenario == "readme_accumulation") {
    code = readme::accumulation(args);
  } else if (args.scenario == "readme_project") {
    code = readme::project(args);
  } else if (args.scenario == "large_batch") {
    code = readme::large_batch(args);
  } else {
    std::cerr << "test_worker: unknown scenario " << args.scenario << "\n";
  }
  return failures > 0 ? 1 : code;
} catch (const std::exception& e) {
  std::cout << "error: " << e.what() << std::endl;
  return 1;
}
