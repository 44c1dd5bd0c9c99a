// SPDX-License-Identifier: Apache-2.0
// Accelerate's sharding rules, re-derived from its documented behaviour and checked against the cases its own
// code computed (tests/fixtures/sharding). Comments name the rule each branch implements.
#include <spur/sharding.h>

#include <algorithm>

#include <spur/error.h>

namespace spur::sharding {
namespace {

Batch slice(const Batch& batch, int64_t begin, int64_t end) {
  begin = std::min<int64_t>(begin, static_cast<int64_t>(batch.size()));
  end = std::min<int64_t>(end, static_cast<int64_t>(batch.size()));
  return Batch(batch.begin() + begin, batch.begin() + end);
}

// split_batches: every full batch is cut into num_processes slices.
Batches shard_split(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  Batches out;
  const int64_t length = batch_size / layout.num_processes;
  const auto mine = [&](const Batch& batch) { return slice(batch, length * rank, length * (rank + 1)); };
  for (const auto& batch : batches) {
    if (static_cast<int64_t>(batch.size()) == batch_size) out.push_back(mine(batch));
  }
  if (drop_last || batches.empty()) return out;
  const Batch& last = batches.back();
  if (static_cast<int64_t>(last.size()) >= batch_size) return out;
  if (!layout.even_batches) {
    // The short batch is shared as far as it goes; later ranks get nothing.
    if (static_cast<int64_t>(last.size()) > length * rank) out.push_back(mine(last));
    return out;
  }
  // Pad the short batch from the epoch's first batch (repeated while the epoch is shorter than a batch).
  Batch start = batches.front();
  while (static_cast<int64_t>(start.size()) < batch_size)
    start.insert(start.end(), batches.front().begin(), batches.front().end());
  Batch padded = last;
  padded.insert(padded.end(), start.begin(), start.end());
  out.push_back(mine(padded));
  return out;
}

// Whole batches in turn: batch i goes to rank i % num_processes, a round is yielded once all of it exists.
// Work is proportional to this rank's share and one batch, not to num_processes squared: only this rank's batches
// are visited, and the padding of the last round is read from the epoch's first batches by index.
Batches shard_whole(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  const int64_t np = layout.num_processes;
  const auto n = static_cast<int64_t>(batches.size());
  const auto size = [&](int64_t i) { return static_cast<int64_t>(batches[static_cast<size_t>(i)].size()); };
  Batches out;
  Batch pending;  // this rank's batch of a round that never completes (the last one)
  for (int64_t i = rank; i < n; i += np) {
    const int64_t round_end = i - rank + np - 1;
    if (round_end < n && size(round_end) == batch_size) {
      out.push_back(batches[static_cast<size_t>(i)]);
    } else {
      pending = batches[static_cast<size_t>(i)];
    }
  }
  if (drop_last || n == 0) return out;
  if (!layout.even_batches) {
    if (!pending.empty()) out.push_back(pending);
    return out;
  }
  if (static_cast<int64_t>(pending.size()) == batch_size) out.push_back(pending);
  // The epoch's first np batches (all of them if fewer), repeated as often as needed: the padding's source.
  const int64_t first = std::min(n, np);
  const int64_t cycle_length = (first - 1) * batch_size + size(first - 1);
  const auto cycled = [&](int64_t j) {
    const int64_t k = j % cycle_length;
    return batches[static_cast<size_t>(k / batch_size)][static_cast<size_t>(k % batch_size)];
  };
  // The round is completed from position p0 on: the short last batch first (padded), then whole batches cycled
  // from the start of the epoch.
  Batch last = batches.back();
  int64_t p0 = n - 1;
  if (static_cast<int64_t>(last.size()) == batch_size) {
    last.clear();  // the last batch was full and went to its rank already: a new round starts
    p0 = n;
  }
  const auto short_length = static_cast<int64_t>(last.size());
  int64_t round_end = p0;
  if (p0 % np != 0) {
    round_end = p0 + np - p0 % np;
  } else if (short_length > 0) {
    round_end = p0 + np;
  }
  const int64_t p = p0 + ((rank - p0 % np) % np + np) % np;  // this rank's position in that round
  if (p >= round_end) return out;
  Batch batch = p == p0 ? last : Batch{};
  const int64_t offset = (p - p0) * batch_size - short_length;  // where its padding starts in the cycle
  for (int64_t j = std::max<int64_t>(offset, 0); j < offset + batch_size; ++j) batch.push_back(cycled(j));
  out.push_back(std::move(batch));
  return out;
}

}  // namespace

void check(int64_t batch_size, const Layout& layout) {
  if (batch_size < 1) throw Error("batch_size must be at least 1, not " + std::to_string(batch_size));
  if (layout.num_processes < 1) {
    throw Error("num_processes must be at least 1, not " + std::to_string(layout.num_processes));
  }
  if (layout.split_batches && batch_size % layout.num_processes != 0) {
    throw Error("split_batches needs a batch_size (" + std::to_string(batch_size) +
                ") that the processes share evenly: a multiple of num_processes (" +
                std::to_string(layout.num_processes) + ")");
  }
}

Batches make_batches(const std::vector<int64_t>& order, int64_t batch_size, bool drop_last) {
  if (batch_size < 1) throw Error("batch_size must be at least 1, not " + std::to_string(batch_size));
  Batches batches;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(order.size(), i + static_cast<size_t>(batch_size));
    if (drop_last && end - i < static_cast<size_t>(batch_size)) break;
    batches.emplace_back(order.begin() + i, order.begin() + end);
  }
  return batches;
}

namespace {

// The rules (and the padding read by index from the first batches) assume batches as make_batches cuts them.
void check_batches(const Batches& batches, int64_t batch_size) {
  for (size_t i = 0; i < batches.size(); ++i) {
    const auto size = static_cast<int64_t>(batches[i].size());
    if ((i + 1 < batches.size() && size != batch_size) || size == 0 || size > batch_size) {
      throw Error("batch " + std::to_string(i) + " holds " + std::to_string(size) +
                  " indices; every batch but the "
                  "last must hold batch_size (" +
                  std::to_string(batch_size) + ") and none may be empty");
    }
  }
}

Batches shard_checked(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  if (rank < 0 || rank >= layout.num_processes) {
    throw Error("rank " + std::to_string(rank) + " is not one of the " + std::to_string(layout.num_processes) +
                " processes");
  }
  if (layout.num_processes == 1) return batches;  // one process: the plain batches
  return layout.split_batches ? shard_split(batches, batch_size, drop_last, layout, rank)
                              : shard_whole(batches, batch_size, drop_last, layout, rank);
}

}  // namespace

Batches shard_batches(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  check(batch_size, layout);
  check_batches(batches, batch_size);
  return shard_checked(batches, batch_size, drop_last, layout, rank);
}

std::vector<Batches> plan(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout) {
  check(batch_size, layout);
  if (dataset_len < 0) throw Error("dataset_len must not be negative");
  std::vector<int64_t> order(static_cast<size_t>(dataset_len));
  for (int64_t i = 0; i < dataset_len; ++i) order[i] = i;
  const auto batches = make_batches(order, batch_size, drop_last);
  std::vector<Batches> out;
  for (int64_t rank = 0; rank < layout.num_processes; ++rank) {
    out.push_back(shard_checked(batches, batch_size, drop_last, layout, rank));
  }
  return out;
}

int64_t metrics_remainder(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout) {
  if (drop_last) return -1;
  const int64_t total = layout.split_batches ? batch_size : batch_size * layout.num_processes;
  return dataset_len % total;
}

std::vector<Batches> stream_plan(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout) {
  check(batch_size, layout);
  std::vector<Batches> out;
  // Accelerate shards streams even for one process, so a short last block is padded there too.
  for (int64_t rank = 0; rank < layout.num_processes; ++rank) {
    StreamShard<int64_t> shard(batch_size, drop_last, layout, rank);
    Batches mine;
    for (int64_t i = 0; i < dataset_len; ++i) {
      if (auto batch = shard.push(i)) mine.push_back(std::move(*batch));
    }
    if (auto batch = shard.finish()) mine.push_back(std::move(*batch));
    out.push_back(std::move(mine));
  }
  return out;
}

std::string plan_json_lines(const std::vector<Batches>& plan) {
  std::string text;
  for (size_t rank = 0; rank < plan.size(); ++rank) {
    text += "{\"rank\": " + std::to_string(rank) + ", \"batches\": [";
    for (size_t b = 0; b < plan[rank].size(); ++b) {
      text += b ? ", [" : "[";
      for (size_t i = 0; i < plan[rank][b].size(); ++i) text += (i ? ", " : "") + std::to_string(plan[rank][b][i]);
      text += "]";
    }
    text += "]}\n";
  }
  return text;
}

}  // namespace spur::sharding
