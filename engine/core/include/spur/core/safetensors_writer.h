// SPDX-License-Identifier: Apache-2.0
// Writing safetensors files, the parts that need no LibTorch: the header's layout (which tensor goes where) and
// the content hash every checkpoint file is recorded with. engine/src/checkpoint/safetensors.cpp writes tensors
// with them; the sharded-checkpoint merge (checkpoint_merge.h) writes the same bytes without LibTorch.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <spur/core/safetensors_header.h>

namespace spur::detail {

/// FNV-1a over 8-byte words (bytes for the tail), fed in any split: the hash a checkpoint's manifest records.
class Digest {
 public:
  void update(const char* data, size_t size);
  uint64_t finish() const;

 private:
  uint64_t hash_ = 1469598103934665603ull;
  char pending_[8] = {};
  size_t pending_size_ = 0;
};

/// The Digest of a file's bytes. Throws spur::Error naming a missing or unreadable file.
uint64_t digest_file(const std::string& path);

/// Lays `entries` (name, dtype and shape set) out as a safetensors file stores them: larger elements first, then
/// by name, so that every tensor's data stays aligned to its element size; sets each entry's begin and end and
/// reorders `entries` to the file's order. Returns the header text (metadata first when there is any), padded with
/// spaces to a multiple of 8 bytes; the file is its length as 8 little-endian bytes, the text, then the data.
std::string layout_safetensors(std::vector<SafetensorsEntry>& entries,
                               const std::map<std::string, std::string>& metadata);

}  // namespace spur::detail
