// SPDX-License-Identifier: Apache-2.0
// Samplers: the order in which a data loader visits a map-style dataset, epoch by epoch. Every sampler must give
// the same order on every rank for the same epoch (seeded by seed + epoch), since the ranks shard that order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace spur {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The dataset indices of `epoch`, in visiting order.
  virtual std::vector<int64_t> indices(int64_t epoch) = 0;
  /// How many indices indices() returns (the loader checks it).
  virtual int64_t size() const = 0;
};

/// 0, 1, 2, ... size-1.
class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t size) : size_(size) {}
  std::vector<int64_t> indices(int64_t epoch) override;
  int64_t size() const override { return size_; }

 private:
  int64_t size_;
};

/// A permutation of 0..size-1 drawn from a generator seeded with seed + epoch (Accelerate's seedable sampler).
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t size, uint64_t seed) : size_(size), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) override;
  int64_t size() const override { return size_; }
  uint64_t seed() const { return seed_; }

 private:
  int64_t size_;
  uint64_t seed_;
};

/// num_samples indices drawn with probability proportional to `weights` (torch.multinomial), seeded as above.
class WeightedRandomSampler : public Sampler {
 public:
  WeightedRandomSampler(at::Tensor weights, int64_t num_samples, bool replacement = true, uint64_t seed = 0);
  std::vector<int64_t> indices(int64_t epoch) override;
  int64_t size() const override { return num_samples_; }

 private:
  at::Tensor weights_;
  int64_t num_samples_;
  bool replacement_;
  uint64_t seed_;
};

}  // namespace spur
