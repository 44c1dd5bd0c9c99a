// SPDX-License-Identifier: Apache-2.0
// PreparedModel<M>: the user's module after Accelerator::prepare. `model(x)` runs forward under autocast (bf16,
// fp16) with fp32 outputs (tensors, and vectors, pairs, tuples of them) and arms gradient synchronisation, as
// DistributedDataParallel does; `model->` is the module.
#pragma once

#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>

#include <spur/precision.h>

namespace spur {

namespace detail {

/// The non-template half of a prepared model: device placement, rank-0 broadcast, the c10d Reducer that
/// all-reduces gradient buckets while backward runs, and the autocast settings. Owned by PreparedModel copies.
class ModelSync {
 public:
  virtual ~ModelSync() = default;
  /// Before forward: broadcasts buffers, re-orders buckets after the first step, returns the autocast scope.
  virtual std::optional<AutocastScope> begin_forward() = 0;
  /// After forward: arms the reducer for the coming backward when gradients are to be synchronised. With
  /// find_unused_parameters it routes the outputs through one autograd node (as DDP's _DDPSink), so backward
  /// reaches every parameter behind any output, also outputs the loss ignores; then it replaces `outputs` and
  /// returns true.
  virtual bool end_forward(std::vector<torch::Tensor>& outputs) = 0;
  /// True when forward ran under autocast, so floating outputs are returned as fp32.
  virtual bool converts_outputs() const = 0;
  virtual void set_require_backward_grad_sync(bool sync) = 0;
  virtual bool require_backward_grad_sync() const = 0;
};

inline void collect_tensors(const torch::Tensor& t, std::vector<torch::Tensor>& out) {
  if (t.defined()) out.push_back(t);
}
inline void collect_tensors(const std::vector<torch::Tensor>& ts, std::vector<torch::Tensor>& out) {
  for (const auto& t : ts) collect_tensors(t, out);
}
template <typename... Ts>
void collect_tensors(const std::tuple<Ts...>& tuple, std::vector<torch::Tensor>& out) {
  std::apply([&](const auto&... items) { (collect_tensors(items, out), ...); }, tuple);
}
template <typename A, typename B>
void collect_tensors(const std::pair<A, B>& pair, std::vector<torch::Tensor>& out) {
  collect_tensors(pair.first, out);
  collect_tensors(pair.second, out);
}
template <typename T>
void collect_tensors(const T&, std::vector<torch::Tensor>&) {}

// The inverse of collect_tensors: puts `from[next...]` back where collect_tensors found the tensors.
inline void replace_tensors(torch::Tensor& t, const std::vector<torch::Tensor>& from, size_t& next) {
  if (t.defined()) t = from.at(next++);
}
inline void replace_tensors(std::vector<torch::Tensor>& ts, const std::vector<torch::Tensor>& from, size_t& next) {
  for (auto& t : ts) replace_tensors(t, from, next);
}
template <typename... Ts>
void replace_tensors(std::tuple<Ts...>& tuple, const std::vector<torch::Tensor>& from, size_t& next) {
  std::apply([&](auto&... items) { (replace_tensors(items, from, next), ...); }, tuple);
}
template <typename A, typename B>
void replace_tensors(std::pair<A, B>& pair, const std::vector<torch::Tensor>& from, size_t& next) {
  replace_tensors(pair.first, from, next);
  replace_tensors(pair.second, from, next);
}
template <typename T>
void replace_tensors(T&, const std::vector<torch::Tensor>&, size_t&) {}

inline torch::Tensor to_fp32(torch::Tensor t) {
  if (t.defined() && (t.scalar_type() == torch::kHalf || t.scalar_type() == torch::kBFloat16)) {
    return t.to(torch::kFloat);
  }
  return t;
}
inline std::vector<torch::Tensor> to_fp32(std::vector<torch::Tensor> ts) {
  for (auto& t : ts) t = to_fp32(std::move(t));
  return ts;
}
template <typename A, typename B>
std::pair<A, B> to_fp32(std::pair<A, B> pair) {
  return {to_fp32(std::move(pair.first)), to_fp32(std::move(pair.second))};
}
template <typename... Ts>
std::tuple<Ts...> to_fp32(std::tuple<Ts...> tuple) {
  return std::apply([](auto&&... items) { return std::tuple<Ts...>(to_fp32(std::move(items))...); }, std::move(tuple));
}
template <typename T, typename = std::enable_if_t<!std::is_convertible_v<T, torch::Tensor>>>
T to_fp32(T value) {
  return value;
}

}  // namespace detail

template <typename Module>
class PreparedModel {
 public:
  using module_type = Module;

  PreparedModel(std::shared_ptr<Module> module, std::shared_ptr<detail::ModelSync> sync)
      : module_(std::move(module)), sync_(std::move(sync)) {}

  /// Runs `forward(args...)` as DistributedDataParallel and Accelerate's autocast wrapper do.
  template <typename... Args>
  auto operator()(Args&&... args) const {
    auto out = [&] {
      auto autocast = sync_->begin_forward();
      return module_->forward(std::forward<Args>(args)...);
    }();
    // Accelerate converts to fp32 inside DDP's forward, so the reducer sees the fp32 outputs.
    if (sync_->converts_outputs()) out = detail::to_fp32(std::move(out));
    std::vector<torch::Tensor> outputs;
    detail::collect_tensors(out, outputs);
    if (sync_->end_forward(outputs)) {
      size_t next = 0;
      detail::replace_tensors(out, outputs, next);
    }
    return out;
  }

  Module* operator->() const { return module_.get(); }
  Module& operator*() const { return *module_; }
  Module* get() const { return module_.get(); }
  /// The user's module (what Accelerator::unwrap_model returns).
  const std::shared_ptr<Module>& ptr() const { return module_; }
  detail::ModelSync& sync() const { return *sync_; }

 private:
  std::shared_ptr<Module> module_;
  std::shared_ptr<detail::ModelSync> sync_;
};

}  // namespace spur
