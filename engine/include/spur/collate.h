// SPDX-License-Identifier: Apache-2.0
// Default collation: a batch from a vector of samples, as PyTorch's default_collate does. Tensors are stacked
// (torch::data::Example field by field), numbers become a tensor, pairs/tuples/vectors/maps collate per element.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/data/example.h>
#include <torch/types.h>

namespace spur {

namespace detail {

template <typename T>
struct Collator;

template <>
struct Collator<torch::Tensor> {
  static torch::Tensor collate(std::vector<torch::Tensor>&& samples) { return torch::stack(samples); }
};

template <typename T>
struct Collator<torch::data::Example<T, torch::data::example::NoTarget>> {
  using Sample = torch::data::Example<T, torch::data::example::NoTarget>;
  static auto collate(std::vector<Sample>&& samples) {
    std::vector<T> data;
    data.reserve(samples.size());
    for (auto& s : samples) data.push_back(std::move(s.data));
    using Data = decltype(Collator<T>::collate(std::move(data)));
    return torch::data::Example<Data, torch::data::example::NoTarget>(Collator<T>::collate(std::move(data)));
  }
};

template <typename D, typename T>
struct Collator<torch::data::Example<D, T>> {
  static auto collate(std::vector<torch::data::Example<D, T>>&& samples) {
    std::vector<D> data;
    std::vector<T> target;
    data.reserve(samples.size());
    target.reserve(samples.size());
    for (auto& s : samples) {
      data.push_back(std::move(s.data));
      target.push_back(std::move(s.target));
    }
    auto d = Collator<D>::collate(std::move(data));
    auto t = Collator<T>::collate(std::move(target));
    return torch::data::Example<decltype(d), decltype(t)>(std::move(d), std::move(t));
  }
};

template <typename A, typename B>
struct Collator<std::pair<A, B>> {
  static auto collate(std::vector<std::pair<A, B>>&& samples) {
    std::vector<A> first;
    std::vector<B> second;
    for (auto& s : samples) {
      first.push_back(std::move(s.first));
      second.push_back(std::move(s.second));
    }
    return std::make_pair(Collator<A>::collate(std::move(first)), Collator<B>::collate(std::move(second)));
  }
};

template <typename... Ts>
struct Collator<std::tuple<Ts...>> {
  template <size_t I>
  static auto field(std::vector<std::tuple<Ts...>>& samples) {
    using T = std::tuple_element_t<I, std::tuple<Ts...>>;
    std::vector<T> column;
    for (auto& s : samples) column.push_back(std::move(std::get<I>(s)));
    return Collator<T>::collate(std::move(column));
  }
  template <size_t... I>
  static auto all(std::vector<std::tuple<Ts...>>& samples, std::index_sequence<I...>) {
    return std::make_tuple(field<I>(samples)...);
  }
  static auto collate(std::vector<std::tuple<Ts...>>&& samples) {
    return all(samples, std::index_sequence_for<Ts...>{});
  }
};

template <typename T>
struct Collator<std::vector<T>> {
  // A sample that is a list: position i of every sample forms element i of the batch.
  static auto collate(std::vector<std::vector<T>>&& samples) {
    using Out = decltype(Collator<T>::collate(std::vector<T>{}));
    std::vector<Out> out;
    const size_t width = samples.empty() ? 0 : samples.front().size();
    for (size_t i = 0; i < width; ++i) {
      std::vector<T> column;
      for (auto& s : samples) column.push_back(std::move(s.at(i)));
      out.push_back(Collator<T>::collate(std::move(column)));
    }
    return out;
  }
};

template <typename T>
struct Collator<std::map<std::string, T>> {
  static auto collate(std::vector<std::map<std::string, T>>&& samples) {
    using Out = decltype(Collator<T>::collate(std::vector<T>{}));
    std::map<std::string, Out> out;
    if (samples.empty()) return out;
    for (const auto& entry : samples.front()) {
      std::vector<T> column;
      for (auto& s : samples) column.push_back(std::move(s.at(entry.first)));
      out.emplace(entry.first, Collator<T>::collate(std::move(column)));
    }
    return out;
  }
};

template <typename T>
struct NumberCollator {
  static torch::Tensor collate(std::vector<T>&& samples) {
    if constexpr (std::is_floating_point_v<T>) {
      return torch::tensor(std::vector<double>(samples.begin(), samples.end()), torch::kDouble);
    } else {
      return torch::tensor(std::vector<int64_t>(samples.begin(), samples.end()), torch::kLong);
    }
  }
};
template <>
struct Collator<int64_t> : NumberCollator<int64_t> {};
template <>
struct Collator<int32_t> : NumberCollator<int32_t> {};
template <>
struct Collator<double> : NumberCollator<double> {};
template <>
struct Collator<float> : NumberCollator<float> {};

}  // namespace detail

/// The default collate function object.
struct DefaultCollate {
  template <typename Sample>
  auto operator()(std::vector<Sample>&& samples) const {
    return detail::Collator<Sample>::collate(std::move(samples));
  }
};

}  // namespace spur
