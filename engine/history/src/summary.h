// SPDX-License-Identifier: Apache-2.0
// The history's multi-resolution summaries (the `summaries` table): each full chunk of kChunkPoints points is
// summarised into buckets of kLevelPoints[1] points (level 1), and every level above merges kFanOut buckets of the
// level below into one. A row holds up to kBucketsPerRow buckets of one level, packed as kBucketBytes each (count,
// step_lo, step_hi, wall_lo, wall_hi, min, max, first, last, sum, finite; little-endian), in the
// order of the points. Internal to the history library: the one place the bucket formula and layout exist.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "chunk.h"
#include "spur/history/records.h"

namespace spur::history {

inline constexpr int kLevels = 3;
inline constexpr int64_t kFanOut = 64;
/// Points per bucket at each level (index 0: the raw points themselves).
inline constexpr int64_t kLevelPoints[kLevels + 1] = {1, kFanOut, (kFanOut * kFanOut), (kFanOut * kFanOut * kFanOut)};
inline constexpr int64_t kBucketsPerRow = kChunkPoints / kFanOut;  // 16: a level-1 row is one chunk
/// Full chunks per row of each level (level 1: one; level 2: 64; level 3: 4096).
inline constexpr int64_t kChunksPerRow[kLevels + 1] = {0, 1, kFanOut, (kFanOut * kFanOut)};
/// Full chunks per bucket of each level (level 1: a sixteenth of one, so unused).
inline constexpr int64_t kChunksPerBucket[kLevels + 1] = {0, 0, kLevelPoints[2] / kChunkPoints,
                                                          kLevelPoints[3] / kChunkPoints};
inline constexpr size_t kBucketBytes = 88;
static_assert(kChunkPoints == kLevelPoints[1] * kBucketsPerRow, "a level-1 row summarises exactly one chunk");
static_assert(kChunksPerBucket[2] == 4 && kChunksPerBucket[3] == 256 && kChunksPerRow[3] == 4096, "the levels above");

/// Appends `later` (the points right after `into`'s) to `into`.
inline void merge_bucket(Bucket& into, const Bucket& later) {
  if (later.count == 0) return;
  if (into.count == 0) {
    into = later;
    return;
  }
  into.step_lo = std::min(into.step_lo, later.step_lo);
  into.step_hi = std::max(into.step_hi, later.step_hi);
  into.wall_lo = std::fmin(into.wall_lo, later.wall_lo);
  into.wall_hi = std::fmax(into.wall_hi, later.wall_hi);
  into.min = std::fmin(into.min, later.min);
  into.max = std::fmax(into.max, later.max);
  into.last = later.last;
  into.sum += later.sum;
  into.finite += later.finite;
  into.count += later.count;
}

/// Adds one point to a bucket: the merge of a one-point bucket, so the two cannot drift apart.
inline void add_point(Bucket& b, const Point& p) { merge_bucket(b, Bucket::of(p)); }

/// Points in order -> buckets of `size` points (the last may hold fewer).
inline std::vector<Bucket> bucket_points(const Point* points, size_t n, int64_t size) {
  std::vector<Bucket> out;
  out.reserve(n / static_cast<size_t>(size) + 1);
  for (size_t i = 0; i < n; ++i) {
    if (i % static_cast<size_t>(size) == 0) out.emplace_back();
    add_point(out.back(), points[i]);
  }
  return out;
}

/// The whole extent of some buckets as one.
inline Bucket merged(const std::vector<Bucket>& buckets) {
  Bucket all;
  for (const auto& b : buckets) merge_bucket(all, b);
  return all;
}

inline void encode_buckets(const std::vector<Bucket>& buckets, std::vector<unsigned char>& out) {
  out.resize(buckets.size() * kBucketBytes);
  unsigned char* at = out.data();
  for (const auto& b : buckets) {
    const double doubles[] = {b.wall_lo, b.wall_hi, b.min, b.max, b.first, b.last, b.sum};
    std::memcpy(at, &b.count, 8);
    std::memcpy(at + 8, &b.step_lo, 8);
    std::memcpy(at + 16, &b.step_hi, 8);
    std::memcpy(at + 24, doubles, sizeof doubles);
    std::memcpy(at + 80, &b.finite, 8);
    at += kBucketBytes;
  }
}

inline void decode_buckets(const void* data, size_t bytes, std::vector<Bucket>& out) {
  const auto* at = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i + kBucketBytes <= bytes; i += kBucketBytes, at += kBucketBytes) {
    Bucket b;
    double doubles[7];
    std::memcpy(&b.count, at, 8);
    std::memcpy(&b.step_lo, at + 8, 8);
    std::memcpy(&b.step_hi, at + 16, 8);
    std::memcpy(doubles, at + 24, sizeof doubles);
    std::memcpy(&b.finite, at + 80, 8);
    b.wall_lo = doubles[0];
    b.wall_hi = doubles[1];
    b.min = doubles[2];
    b.max = doubles[3];
    b.first = doubles[4];
    b.last = doubles[5];
    b.sum = doubles[6];
    out.push_back(b);
  }
}

}  // namespace spur::history
