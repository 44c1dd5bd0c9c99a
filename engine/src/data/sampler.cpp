// SPDX-License-Identifier: Apache-2.0
// The built-in samplers. Each epoch draws from a fresh generator seeded with seed + epoch, so the order depends
// only on (seed, epoch): the same on every rank, and the same after a resume.
#include <spur/sampler.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <spur/error.h>

namespace spur {
namespace {

std::vector<int64_t> to_vector(const at::Tensor& indices) {
  auto contiguous = indices.to(torch::kLong).contiguous();
  const auto* data = contiguous.data_ptr<int64_t>();
  return std::vector<int64_t>(data, data + contiguous.numel());
}

at::Generator generator(uint64_t seed, int64_t epoch) {
  return at::make_generator<at::CPUGeneratorImpl>(seed + static_cast<uint64_t>(epoch));
}

}  // namespace

std::vector<int64_t> SequentialSampler::indices(int64_t) {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  for (int64_t i = 0; i < size_; ++i) order[i] = i;
  return order;
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) {
  return to_vector(torch::randperm(size_, generator(seed_, epoch), torch::kLong));
}

WeightedRandomSampler::WeightedRandomSampler(at::Tensor weights, int64_t num_samples, bool replacement, uint64_t seed)
    : weights_(weights.to(torch::kDouble).contiguous()),
      num_samples_(num_samples),
      replacement_(replacement),
      seed_(seed) {
  if (weights_.dim() != 1 || weights_.numel() == 0)
    throw Error("WeightedRandomSampler: weights must be a non-empty 1-d tensor");
  if (num_samples < 1) throw Error("WeightedRandomSampler: num_samples must be at least 1");
  if (!replacement && num_samples > weights_.numel()) {
    throw Error("WeightedRandomSampler: without replacement, num_samples (" + std::to_string(num_samples) +
                ") cannot exceed the number of weights (" + std::to_string(weights_.numel()) + ")");
  }
}

std::vector<int64_t> WeightedRandomSampler::indices(int64_t epoch) {
  return to_vector(torch::multinomial(weights_, num_samples_, replacement_, generator(seed_, epoch)));
}

}  // namespace spur
