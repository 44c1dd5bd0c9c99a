// SPDX-License-Identifier: Apache-2.0
// Collectives across the ranks of a run (Accelerator::gather, reduce, broadcast, pad_across_processes), over a
// tensor or nested std::vector / std::map / std::unordered_map of tensors. Every rank must make the same calls.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/variable.h>

namespace spur {

enum class Reduction { sum, mean };

namespace detail {

class Communicator;

// Tensor primitives; with no communicator (one process) they return their input.
// Shapes are exchanged first, so ranks may hold tensors of different sizes where the operation allows it,
// and a mismatch is an error on every rank (naming the ranks and shapes), never a hang.
torch::Tensor gather_tensor(Communicator* comm, const torch::Tensor& tensor);
torch::Tensor reduce_tensor(Communicator* comm, const torch::Tensor& tensor, Reduction reduction);
torch::Tensor broadcast_tensor(Communicator* comm, const torch::Tensor& tensor, int64_t from_process);
torch::Tensor pad_tensor(Communicator* comm, const torch::Tensor& tensor, int64_t dim, int64_t pad_index,
                         bool pad_first);

// Bytes between ranks (gather_object, broadcast_object_list): every rank's bytes in rank order, and rank
// `from_process`'s bytes on every rank. With no communicator, the input alone.
std::vector<std::string> gather_bytes(Communicator* comm, const std::string& bytes);
std::string broadcast_bytes(Communicator* comm, const std::string& bytes, int64_t from_process);

// Applies `fn` to every tensor of a nested structure, in an order that is the same on every rank
// (vectors by index, maps by key; unordered maps are visited in sorted key order).
template <typename F>
torch::Tensor map_tensors(const torch::Tensor& tensor, const F& fn) {
  return fn(tensor);
}

template <typename T, typename F>
std::vector<T> map_tensors(const std::vector<T>& items, const F& fn) {
  std::vector<T> out;
  out.reserve(items.size());
  for (const auto& item : items) out.push_back(map_tensors(item, fn));
  return out;
}

template <typename K, typename T, typename C, typename F>
std::map<K, T, C> map_tensors(const std::map<K, T, C>& items, const F& fn) {
  std::map<K, T, C> out;
  for (const auto& [key, value] : items) out.emplace(key, map_tensors(value, fn));
  return out;
}

template <typename K, typename T, typename H, typename E, typename F>
std::unordered_map<K, T, H, E> map_tensors(const std::unordered_map<K, T, H, E>& items, const F& fn) {
  std::vector<const K*> keys;
  keys.reserve(items.size());
  for (const auto& entry : items) keys.push_back(&entry.first);
  std::sort(keys.begin(), keys.end(), [](const K* a, const K* b) { return *a < *b; });
  std::unordered_map<K, T, H, E> out;
  for (const K* key : keys) out.emplace(*key, map_tensors(items.at(*key), fn));
  return out;
}

}  // namespace detail
}  // namespace spur
