// SPDX-License-Identifier: Apache-2.0
// The safetensors header, read without LibTorch (so that tests/fuzz can fuzz it): the JSON text after the 8-byte
// length, checked against the size of the data that follows. engine/src/checkpoint/safetensors.cpp turns the
// entries into tensors. Every error is a spur::Error naming the tensor and what is wrong; the caller adds the file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace spur::detail {

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of safetensors_element_size's names
  std::vector<int64_t> shape;
  int64_t begin = 0;  // byte offsets into the data part, end - begin = elements x element size
  int64_t end = 0;
};

struct SafetensorsHeader {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  std::vector<SafetensorsEntry> entries;        // by begin; together they cover the data part exactly
};

/// Bytes per element of a safetensors dtype name (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL); 0 if unknown.
int safetensors_element_size(const std::string& dtype);

/// Reads a header for a file whose data part holds data_size bytes: each tensor's dtype, shape and offsets, sizes
/// that agree, no overflow, no gap or overlap between tensors, and the data part covered to its last byte.
SafetensorsHeader parse_safetensors_header(const std::string& text, int64_t data_size);

}  // namespace spur::detail
