// SPDX-License-Identifier: Apache-2.0
// Fuzz target: a chunk of metric points as the history stores it (a BLOB of {step, value, wall} records),
// decoded from any offset as the reader does; whole records round-trip bit for bit.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "chunk.h"

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
  return 0;
}
