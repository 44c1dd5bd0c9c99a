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
  while (static_cast<int64_t>(start.size()) < batch_size) start.insert(start.end(), batches.front().begin(), batches.front().end());
  Batch padded = last;
  padded.insert(padded.end(), start.begin(), start.end());
  out.push_back(mine(padded));
  return out;
}

// Whole batches in turn: batch i goes to rank i % num_processes, a round is yielded once all of it exists.
Batches shard_whole(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  const int64_t np = layout.num_processes;
  Batches out;
  Batch start;    // the epoch's first np batches, to complete the last round from
  Batch pending;  // this rank's batch of the current round
  int64_t idx = -1;
  for (const auto& batch : batches) {
    ++idx;
    if (!drop_last && idx < np) start.insert(start.end(), batch.begin(), batch.end());
    if (idx % np == rank) pending = batch;
    if (idx % np == np - 1 && static_cast<int64_t>(batch.size()) == batch_size) {
      out.push_back(pending);
      pending.clear();
    }
  }
  if (drop_last || start.empty()) return out;
  if (!layout.even_batches) {
    if (!pending.empty()) out.push_back(pending);
    return out;
  }
  if (static_cast<int64_t>(pending.size()) == batch_size) out.push_back(pending);
  const Batch first = start;
  while (static_cast<int64_t>(start.size()) < np * batch_size) start.insert(start.end(), first.begin(), first.end());
  Batch last = batches.back();
  if (static_cast<int64_t>(last.size()) == batch_size) {
    // The last batch was full and went to its rank already: start a new round.
    last.clear();
    ++idx;
  }
  // Complete the round: the short batch first, then whole batches cycled from the start of the epoch.
  int64_t cycle = 0;
  while (idx % np != 0 || !last.empty()) {
    const int64_t end = cycle + batch_size - static_cast<int64_t>(last.size());
    last.insert(last.end(), start.begin() + cycle, start.begin() + end);
    if (idx % np == rank) out.push_back(last);
    cycle = end;
    last.clear();
    ++idx;
  }
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

Batches shard_batches(const Batches& batches, int64_t batch_size, bool drop_last, const Layout& layout, int64_t rank) {
  check(batch_size, layout);
  if (rank < 0 || rank >= layout.num_processes) {
    throw Error("rank " + std::to_string(rank) + " is not one of the " + std::to_string(layout.num_processes) +
                " processes");
  }
  if (layout.num_processes == 1) return batches;  // one process: the plain batches
  return layout.split_batches ? shard_split(batches, batch_size, drop_last, layout, rank)
                              : shard_whole(batches, batch_size, drop_last, layout, rank);
}

std::vector<Batches> plan(int64_t dataset_len, int64_t batch_size, bool drop_last, const Layout& layout) {
  check(batch_size, layout);
  if (dataset_len < 0) throw Error("dataset_len must not be negative");
  std::vector<int64_t> order(static_cast<size_t>(dataset_len));
  for (int64_t i = 0; i < dataset_len; ++i) order[i] = i;
  const auto batches = make_batches(order, batch_size, drop_last);
  std::vector<Batches> out;
  for (int64_t rank = 0; rank < layout.num_processes; ++rank) {
    out.push_back(shard_batches(batches, batch_size, drop_last, layout, rank));
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
