// SPDX-License-Identifier: Apache-2.0
// Data-loader throughput, samples/s, one process, measured alternately in rounds (medians):
//   plain     spur::DataLoader, 2 workers, not sharded
//   sharded   rank 0 of 2 of a loader over twice the samples (Accelerate's rules), so it delivers as many:
//             what sharding costs
//   libtorch  torch::data::make_data_loader on the same dataset, 2 workers, Stack<> collation
// `loader_bench [--samples N] [--rounds R]` prints one JSON line; run_benchmarks.py turns it into ratios.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <torch/data/dataloader.h>
#include <torch/data/datasets/base.h>
#include <torch/data/datasets/map.h>
#include <torch/data/transforms/stack.h>

#include <spur/spur.h>

namespace {

// An image-like sample (3x16x16 floats) with a little per-sample work (normalisation), as real loaders do.
struct ImageDataset : torch::data::datasets::Dataset<ImageDataset> {
  explicit ImageDataset(int64_t n) : images(torch::rand({n, 3, 16, 16})), labels(torch::randint(0, 10, {n})) {}
  torch::data::Example<> get(size_t i) override {
    return {(images[static_cast<int64_t>(i)] - 0.5) / 0.25, labels[static_cast<int64_t>(i)]};
  }
  torch::optional<size_t> size() const override { return static_cast<size_t>(images.size(0)); }
  torch::Tensor images, labels;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename Loader>
double spur_rate(Loader& loader) {
  const auto start = std::chrono::steady_clock::now();
  int64_t samples = 0;
  for (auto& batch : loader) samples += batch.data.size(0);
  return samples / seconds_since(start);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int64_t samples = 40000, rounds = 9;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--samples") samples = std::stoll(argv[i + 1]);
    if (key == "--rounds") rounds = std::stoll(argv[i + 1]);
  }
  torch::manual_seed(0);
  ImageDataset dataset(samples);
  const spur::DataLoaderOptions options{.batch_size = 64, .shuffle = true, .num_workers = 2, .seed = 1};
  auto plain = spur::make_data_loader(dataset, options);
  auto sharded = spur::make_data_loader(ImageDataset(2 * samples), options).sharded({2, false, true}, 0);
  auto libtorch = torch::data::make_data_loader(dataset.map(torch::data::transforms::Stack<>()),
                                                torch::data::DataLoaderOptions().batch_size(64).workers(2));

  std::vector<double> plain_rates, sharded_rates, libtorch_rates;
  for (int64_t round = 0; round < rounds; ++round) {
    plain_rates.push_back(spur_rate(plain));
    sharded_rates.push_back(spur_rate(sharded));
    const auto start = std::chrono::steady_clock::now();
    int64_t seen = 0;
    for (auto& batch : *libtorch) seen += batch.data.size(0);
    libtorch_rates.push_back(seen / seconds_since(start));
  }
  std::printf("{\"samples\": %lld, \"plain_per_s\": %.1f, \"sharded_per_s\": %.1f, \"libtorch_per_s\": %.1f}\n",
              static_cast<long long>(samples), median(plain_rates), median(sharded_rates), median(libtorch_rates));
  return 0;
}
