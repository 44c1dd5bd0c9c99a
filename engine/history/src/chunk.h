// SPDX-License-Identifier: Apache-2.0
// The packed form of metric points in the `points` table: count x {int64 step, float64 value, float64 wall},
// little-endian as on every machine Spur builds for (x86-64, aarch64). Internal to the history library.
#pragma once

#include <cstring>
#include <vector>

#include "spur/history/records.h"

namespace spur::history {

inline constexpr int64_t kChunkPoints = 1024;
inline constexpr size_t kPointBytes = 24;

inline void encode_points(const Point* points, size_t n, std::vector<unsigned char>& out) {
  out.resize(n * kPointBytes);
  unsigned char* at = out.data();
  for (size_t i = 0; i < n; ++i, at += kPointBytes) {
    std::memcpy(at, &points[i].step, 8);
    std::memcpy(at + 8, &points[i].value, 8);
    std::memcpy(at + 16, &points[i].wall, 8);
  }
}

inline void decode_points(const void* data, size_t bytes, size_t skip, std::vector<Point>& out) {
  const auto* at = static_cast<const unsigned char*>(data) + skip * kPointBytes;
  const size_t n = bytes / kPointBytes;
  for (size_t i = skip; i < n; ++i, at += kPointBytes) {
    Point point;
    std::memcpy(&point.step, at, 8);
    std::memcpy(&point.value, at + 8, 8);
    std::memcpy(&point.wall, at + 16, 8);
    out.push_back(point);
  }
}

}  // namespace spur::history
