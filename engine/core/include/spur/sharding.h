// SPDX-License-Identifier: Apache-2.0
// How a run's processes share an epoch's batches, with Hugging Face Accelerate's exact rules (BatchSamplerShard,
// IterableDatasetShard, gather_for_metrics' remainder). Pure and torch-free: the data loader and `spur shard-plan`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spur::sharding {

using Batch = std::vector<int64_t>;
using Batches = std::vector<Batch>;

struct Layout {
  int64_t num_processes = 1;
  /// true: each of the user's batches is split between the processes (batch_size is the global batch);
  /// false: each process gets whole batches of batch_size, in turn.
  bool split_batches = false;
  /// Pad the last round by cycling from the start of the epoch, so every process gets as many batches.
  bool even_batches = true;
};

/// Throws spur::Error (naming the option) for an impossible layout: batch_size < 1, num_processes < 1,
/// split_batches with a batch size the processes cannot share evenly.
void check(int64_t batch_size, const Layout& layout);

/// The user's batches: `order` (the sampler's indices) cut into batch_size pieces; a short last one is kept
/// unless drop_last.
Batches make_batches(const std::vector<int64_t>& order, int64_t batch_size, bool drop_last);

/// BatchSamplerShard: the batches process `rank` receives from the user's `batches`.
Batches shard_batches(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank);

/// The per-rank plan of a sequential sampler over dataset_len items (what `spur shard-plan` prints).
std::vector<Batches> plan(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout);

/// How many samples of the last gathered round are real (gather_for_metrics cuts the rest); -1 when nothing
/// is to be cut (drop_last drops incomplete rounds instead of padding them).
int64_t metrics_remainder(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout);

/// IterableDatasetShard over a stream: blocks of batch_size (split) or batch_size * num_processes items, of
/// which process `rank` takes its slice; a final partial block is completed by repeating the first block.
template <typename T>
class StreamShard {
 public:
  StreamShard(int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank)
      : block_(layout.split_batches ? batch_size : batch_size * layout.num_processes),
        slice_(layout.split_batches ? batch_size / layout.num_processes : batch_size),
        rank_(rank),
        drop_last_(drop_last) {
    check(batch_size, layout);
  }

  /// Adds the stream's next item; returns this rank's batch when it completes a block.
  std::optional<std::vector<T>> push(T item) {
    current_.push_back(std::move(item));
    if (static_cast<int64_t>(current_.size()) < block_) return std::nullopt;
    if (first_.empty()) first_ = current_;
    auto mine = take();
    current_.clear();
    return mine;
  }

  /// At the end of the stream: this rank's slice of the padded last block, if there is one.
  std::optional<std::vector<T>> finish() {
    if (drop_last_ || current_.empty()) return std::nullopt;
    remainder_ = static_cast<int64_t>(current_.size());
    if (first_.empty()) first_ = current_;
    while (static_cast<int64_t>(current_.size()) < block_)
      current_.insert(current_.end(), first_.begin(), first_.end());
    auto mine = take();
    current_.clear();
    return mine;
  }

  /// Real items in the padded last block (0 when the stream ended on a block boundary), for gather_for_metrics.
  int64_t remainder() const { return drop_last_ ? -1 : remainder_; }

 private:
  std::vector<T> take() const {
    return std::vector<T>(current_.begin() + rank_ * slice_, current_.begin() + (rank_ + 1) * slice_);
  }

  int64_t block_;
  int64_t slice_;
  int64_t rank_;
  bool drop_last_;
  int64_t remainder_ = 0;
  std::vector<T> current_;
  std::vector<T> first_;
};

/// The per-rank batches of a stream of dataset_len items 0, 1, 2... (the stream flavour of `plan`).
std::vector<Batches> stream_plan(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout);

/// One line of JSON per rank: {"rank": 0, "batches": [[0, 1, 2], [6, 7, 8]]}.
std::string plan_json_lines(const std::vector<Batches>& plan);

}  // namespace spur::sharding
