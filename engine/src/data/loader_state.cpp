// SPDX-License-Identifier: Apache-2.0
// The non-template half of spur::DataLoader: option checks, the per-epoch plan (sampler order, Accelerate's
// sharding, the zero-sample batch that keeps uneven ranks in step), position and end-of-data bookkeeping.
#include <spur/data.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>

#include <algorithm>
#include <iostream>

namespace spur {

TensorDataset::TensorDataset(torch::Tensor inputs, torch::Tensor targets)
    : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  if (!inputs_.defined() || !targets_.defined() || inputs_.dim() == 0 || targets_.dim() == 0 ||
      inputs_.size(0) != targets_.size(0)) {
    throw Error("TensorDataset: inputs and targets need the same first dimension (one row per sample)");
  }
}

namespace {

thread_local at::Generator* current_loader_generator = nullptr;

// splitmix64's finaliser: nearby inputs give unrelated seeds.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

at::Generator loader_generator() {
  return current_loader_generator ? *current_loader_generator : at::detail::getDefaultCPUGenerator();
}

namespace detail {

at::Generator batch_generator(uint64_t seed, int64_t epoch, int64_t rank, int64_t position) {
  uint64_t h = mix(seed);
  h = mix(h ^ static_cast<uint64_t>(epoch));
  h = mix(h ^ static_cast<uint64_t>(rank));
  h = mix(h ^ static_cast<uint64_t>(position));
  return at::make_generator<at::CPUGeneratorImpl>(h);
}

LoaderGeneratorScope::LoaderGeneratorScope(at::Generator generator)
    : generator_(std::move(generator)), previous_(current_loader_generator) {
  current_loader_generator = &generator_;
}

LoaderGeneratorScope::~LoaderGeneratorScope() { current_loader_generator = previous_; }

void note_stream_skip(int64_t rank, int64_t epoch, int64_t batches) {
  if (rank != 0) return;
  std::cerr << "spur: data loader: resuming a stream at batch " << batches << " of epoch " << epoch << ": its first "
            << batches << " batch(es) are read again and discarded (the stream's next() runs "
            << "for them, with the same per-batch generators)" << std::endl;
}

void LoaderState::reseed(uint64_t seed) {
  options.seed = seed;
  if (!stream && !user_sampler && options.shuffle && dataset_size >= 0) {
    sampler = std::make_shared<RandomSampler>(dataset_size, seed);
  }
}

std::shared_ptr<LoaderState> make_state(const DataLoaderOptions& options, int64_t dataset_size,
                                        std::shared_ptr<Sampler> sampler) {
  if (options.batch_size < 1) throw Error("DataLoaderOptions: batch_size must be at least 1");
  if (options.num_workers < 0) throw Error("DataLoaderOptions: num_workers must not be negative");
  if (options.prefetch_factor < 1) throw Error("DataLoaderOptions: prefetch_factor must be at least 1");
  auto state = std::make_shared<LoaderState>();
  state->options = options;
  state->dataset_size = dataset_size;
  // Every loader has a seed: its shuffling order and its per-batch generators (loader_generator()) follow it.
  const uint64_t seed = options.seed.value_or(at::detail::getDefaultCPUGenerator().current_seed());
  state->options.seed = seed;
  if (dataset_size >= 0) {
    state->user_sampler = sampler != nullptr;
    if (!sampler) {
      sampler = options.shuffle ? std::shared_ptr<Sampler>(std::make_shared<RandomSampler>(dataset_size, seed))
                                : std::make_shared<SequentialSampler>(dataset_size);
    }
    state->sampler = std::move(sampler);
  }
  return state;
}

std::vector<size_t> batch_request(const std::vector<int64_t>& indices, int64_t size) {
  std::vector<size_t> request;
  request.reserve(indices.size());
  for (const int64_t index : indices) {
    if (index < 0 || index >= size) {
      throw Error("data loader: the sampler asked for index " + std::to_string(index) + " of a dataset of " +
                  std::to_string(size) + " samples");
    }
    request.push_back(static_cast<size_t>(index));
  }
  return request;
}

DataLoaderOptions from_torch_options(const torch::data::DataLoaderOptions& options) {
  DataLoaderOptions out;
  out.batch_size = static_cast<int64_t>(options.batch_size());
  out.drop_last = options.drop_last();
  out.num_workers = static_cast<int64_t>(options.workers());
  // torch keeps up to max_jobs batches in flight (default: 2 per worker).
  if (options.workers() > 0 && options.max_jobs().has_value()) {
    out.prefetch_factor =
        std::max<int64_t>(1, static_cast<int64_t>(*options.max_jobs()) / static_cast<int64_t>(options.workers()));
  }
  return out;
}

int64_t LoaderState::batches_per_epoch() const {
  // The batch count depends on the number of indices only: count with 0..n-1, drawing nothing.
  auto copy = *this;
  copy.check_order = nullptr;
  copy.agree_order = nullptr;
  copy.sampler = std::make_shared<SequentialSampler>(sampler->size());
  return static_cast<int64_t>(copy.plan_epoch().batches.size());
}

LoaderState::EpochPlan LoaderState::plan_epoch() {
  EpochPlan plan;
  auto order = sampler->indices(epoch);
  if (static_cast<int64_t>(order.size()) != sampler->size()) {
    throw Error("data loader: the sampler gave " + std::to_string(order.size()) + " indices for epoch " +
                std::to_string(epoch) + " but its size() says " + std::to_string(sampler->size()));
  }
  if (dataset_size == 0 || order.empty()) throw Error("data loader: the dataset is empty, there is nothing to load");
  if (agree_order) {
    agree_order(order);
  } else if (check_order) {
    check_order(order);
  }

  const auto batches = sharding::make_batches(order, options.batch_size, options.drop_last);
  if (layout.num_processes == 1) {
    plan.batches = batches;
    return plan;
  }
  plan.batches = sharding::shard_batches(batches, options.batch_size, options.drop_last, layout, rank);
  plan.remainder =
      sharding::metrics_remainder(static_cast<int64_t>(order.size()), options.batch_size, options.drop_last, layout);
  if (!layout.even_batches && !options.drop_last) {
    // Short ranks get a zero-sample batch per missing round, so every rank runs the same number of loop
    // iterations and no collective inside the loop waits for a rank that already left it.
    size_t most = plan.batches.size();
    for (int64_t other = 0; other < layout.num_processes; ++other) {
      if (other == rank) continue;
      most = std::max(most, sharding::shard_batches(batches, options.batch_size, false, layout, other).size());
    }
    plan.batches.resize(most);
  }
  return plan;
}

void LoaderState::begin_epoch() {
  position = 0;
  at_end = false;
  remainder = -1;
  if (on_active) on_active(this, true);
}

void LoaderState::handed_out(bool last, int64_t last_remainder) {
  ++position;
  at_end = last;
  remainder = last ? last_remainder : -1;
}

void LoaderState::finish_epoch() {
  ++epoch;
  position = 0;
  at_end = false;
  if (on_active) on_active(this, false);
}

void LoaderState::abandon() {
  at_end = false;
  if (on_active) on_active(this, false);
}

bool can_pin_memory() { return torch::cuda::is_available(); }

torch::Tensor pin(torch::Tensor t) { return t.is_pinned() ? t : t.pin_memory(); }

}  // namespace detail
}  // namespace spur
