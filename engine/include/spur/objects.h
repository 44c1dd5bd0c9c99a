// SPDX-License-Identifier: Apache-2.0
// spur::ObjectCodec<T>: how Accelerator::gather_object and broadcast_object_list send a value between ranks (as
// JSON text). Built in: bool, integers, floating point (NaN and infinities too), std::string, spur::json::Value, and
// std::vector, std::map / std::unordered_map with string keys, std::pair, std::optional of those. Anything else is a
// compile-time error naming ObjectCodec; specialise it (encode and decode) for your own types.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spur/error.h>
#include <spur/json.h>

namespace spur {

template <typename T, typename Enable = void>
struct ObjectCodec {
  static_assert(sizeof(T) == 0,
                "gather_object / broadcast_object_list: this type cannot be sent between ranks. Use numbers, bools, "
                "std::string, spur::json::Value, or vectors, string-keyed maps, pairs and optionals of them, or "
                "specialise spur::ObjectCodec<T> with static json::Value encode(const T&) and T decode(const "
                "json::Value&)");
};

template <>
struct ObjectCodec<bool> {
  static json::Value encode(bool v) { return v; }
  static bool decode(const json::Value& v) { return v.as_bool("a bool"); }
};

template <typename T>
struct ObjectCodec<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  // 64-bit unsigned values travel as their int64 bit pattern.
  static json::Value encode(T v) { return static_cast<int64_t>(v); }
  static T decode(const json::Value& v) { return static_cast<T>(v.as_int("an integer")); }
};

template <typename T>
struct ObjectCodec<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  // JSON has no NaN or infinity: those travel as strings.
  static json::Value encode(T v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    return static_cast<double>(v);
  }
  static T decode(const json::Value& v) {
    if (v.is_string()) {
      const auto& s = v.as_string();
      if (s == "NaN") return std::numeric_limits<T>::quiet_NaN();
      if (s == "Infinity") return std::numeric_limits<T>::infinity();
      if (s == "-Infinity") return -std::numeric_limits<T>::infinity();
    }
    return static_cast<T>(v.as_double("a number"));
  }
};

template <>
struct ObjectCodec<std::string> {
  static json::Value encode(const std::string& v) { return v; }
  static std::string decode(const json::Value& v) { return v.as_string("a string"); }
};

template <>
struct ObjectCodec<json::Value> {
  static json::Value encode(const json::Value& v) { return v; }
  static json::Value decode(const json::Value& v) { return v; }
};

template <typename T, typename A>
struct ObjectCodec<std::vector<T, A>> {
  static json::Value encode(const std::vector<T, A>& items) {
    json::Array out;
    out.reserve(items.size());
    for (const auto& item : items) out.push_back(ObjectCodec<T>::encode(item));
    return out;
  }
  static std::vector<T, A> decode(const json::Value& v) {
    std::vector<T, A> out;
    for (const auto& item : v.as_array("a list")) out.push_back(ObjectCodec<T>::decode(item));
    return out;
  }
};

namespace detail {
template <typename Map>
struct StringMapCodec {
  using Mapped = typename Map::mapped_type;
  static json::Value encode(const Map& items) {
    json::Object out;
    for (const auto& [key, value] : items) out.emplace_back(key, ObjectCodec<Mapped>::encode(value));
    return out;
  }
  static Map decode(const json::Value& v) {
    Map out;
    for (const auto& [key, value] : v.as_object("a map")) out.emplace(key, ObjectCodec<Mapped>::decode(value));
    return out;
  }
};
}  // namespace detail

template <typename T, typename C, typename A>
struct ObjectCodec<std::map<std::string, T, C, A>> : detail::StringMapCodec<std::map<std::string, T, C, A>> {};
template <typename T, typename H, typename E, typename A>
struct ObjectCodec<std::unordered_map<std::string, T, H, E, A>>
    : detail::StringMapCodec<std::unordered_map<std::string, T, H, E, A>> {};

template <typename A, typename B>
struct ObjectCodec<std::pair<A, B>> {
  static json::Value encode(const std::pair<A, B>& v) {
    return json::Array{ObjectCodec<A>::encode(v.first), ObjectCodec<B>::encode(v.second)};
  }
  static std::pair<A, B> decode(const json::Value& v) {
    const auto& items = v.as_array("a pair");
    if (items.size() != 2) throw Error("a pair sent between ranks has " + std::to_string(items.size()) + " items");
    return {ObjectCodec<A>::decode(items[0]), ObjectCodec<B>::decode(items[1])};
  }
};

template <typename T>
struct ObjectCodec<std::optional<T>> {
  static json::Value encode(const std::optional<T>& v) { return v ? ObjectCodec<T>::encode(*v) : json::Value(); }
  static std::optional<T> decode(const json::Value& v) {
    if (v.is_null()) return std::nullopt;
    return ObjectCodec<T>::decode(v);
  }
};

}  // namespace spur
