// SPDX-License-Identifier: Apache-2.0
// The sharded-weights index, model.safetensors.index.json (Hugging Face's layout, which save_model writes for
// shards), read without LibTorch so that tests/fuzz can fuzz it: which shard file holds each tensor. The index may
// come from a file Spur did not write, so a shard must be a plain file name in the index's own folder: a path
// (a '/'), "." or "..", a name that is not *.safetensors or holds a control character is refused, so an index
// cannot name a file outside the checkpoint's folder (a symbolic link inside it is the folder owner's choice, and
// followed). Every error is a spur::Error naming the key at fault; the caller adds the file.
#pragma once

#include <map>
#include <set>
#include <string>

namespace spur::detail {

struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;  // tensor name -> shard file name (in the index's folder)
  std::set<std::string> shards() const;           // each shard once, in name order
};

/// Reads the index's JSON text: an object with "weight_map" (tensor -> shard file name, at least one) and an
/// optional "metadata" object.
SafetensorsIndex parse_safetensors_index(const std::string& text);

}  // namespace spur::detail
