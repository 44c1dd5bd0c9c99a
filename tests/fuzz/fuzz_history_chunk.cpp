// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a chunk of metric points as the history stores it (a BLOB of {step, value, wall} records),
// decoded from any offset as the reader does; whole records round-trip bit for bit. The decoded points are then
// summarised as the writer does (summary.h) at a size taken from the input: the buckets merged equal one fold over
// the points (count, extent, min, max, first, last), and encoded buckets decode to themselves.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "chunk.h"
#include "summary.h"

namespace {

bool same(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0 || (a != a && b != b); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t skip = data[0] % 4;
  std::vector<spur::history::Point> points;
  spur::history::decode_points(data + 1, size - 1, skip, points);
  const size_t whole = (size - 1) / spur::history::kPointBytes;
  if (points.size() != (whole > skip ? whole - skip : 0)) __builtin_trap();
  std::vector<unsigned char> encoded;
  spur::history::encode_points(points.data(), points.size(), encoded);
  if (!encoded.empty() &&
      std::memcmp(encoded.data(), data + 1 + skip * spur::history::kPointBytes, encoded.size()) != 0) {
    __builtin_trap();
  }
  if (points.empty()) return 0;
  const int64_t size_of_bucket = 1 + data[0] / 4;
  const auto buckets = spur::history::bucket_points(points.data(), points.size(), size_of_bucket);
  spur::history::Bucket fold;
  for (const auto& p : points) spur::history::add_point(fold, p);
  const auto all = spur::history::merged(buckets);
  if (all.count != static_cast<int64_t>(points.size()) || all.count != fold.count || all.finite != fold.finite ||
      all.step_lo != fold.step_lo || all.step_hi != fold.step_hi || !same(all.min, fold.min) ||
      !same(all.max, fold.max) || !same(all.first, points.front().value) || !same(all.last, points.back().value) ||
      !same(all.wall_lo, fold.wall_lo) || !same(all.wall_hi, fold.wall_hi)) {
    __builtin_trap();
  }
  std::vector<unsigned char> packed;
  spur::history::encode_buckets(buckets, packed);
  std::vector<spur::history::Bucket> back;
  spur::history::decode_buckets(packed.data(), packed.size(), back);
  if (back.size() != buckets.size()) __builtin_trap();
  for (size_t i = 0; i < back.size(); ++i) {
    if (back[i].count != buckets[i].count || back[i].finite != buckets[i].finite ||
        !same(back[i].sum, buckets[i].sum) || !same(back[i].min, buckets[i].min))
      __builtin_trap();
  }
  return 0;
}
