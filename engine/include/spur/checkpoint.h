// SPDX-License-Identifier: Apache-2.0
// Checkpoint files: safetensors (the format Hugging Face's `safetensors` library reads), sharding of large
// models with an index file as Accelerate does, and directories replaced atomically so a crash keeps the old.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

namespace spur {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// Writes `tensors` (any device and layout) as a safetensors file; `metadata` goes to "__metadata__".
/// Returns the file's size and its content hash (see file_digest). Throws spur::Error naming the file.
std::pair<int64_t, uint64_t> save_safetensors(const std::string& path, const NamedTensors& tensors,
                                              const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

struct SafetensorsFile {
  NamedTensors tensors;  // in the file's order of offsets
  std::map<std::string, std::string> metadata;
};
/// Reads and validates a safetensors file (offsets contiguous and in bounds, known dtypes, sizes that match).
/// A malformed or truncated file is a spur::Error naming it.
SafetensorsFile load_safetensors(const std::string& path);

/// "10GB", "500MB", "2GiB", "1000" -> bytes (decimal units as Accelerate, binary with "i").
int64_t parse_size(const std::string& text);

/// A 64-bit hash of a file's bytes, recorded in checkpoints to catch truncated or altered files.
uint64_t file_digest(const std::string& path);

struct SaveModelOptions {
  /// Shards above this size (greedily, in parameter order) with model.safetensors.index.json, as Accelerate.
  std::string max_shard_size = "10GB";
};

/// Loads weights that save_model (or save_state) wrote into `module`: `dir` holding model.safetensors, or the
/// shards listed by model.safetensors.index.json. Names, shapes and dtypes must match; errors name the file. A
/// checkpoint whose weights are sharded per rank (ZeRO stage 3's SHARDED_STATE_DICT) is refused, naming
/// `spur merge-weights`, which writes the model.safetensors this reads.
void load_model(torch::nn::Module& module, const std::string& dir);

namespace detail {

/// Writes bytes to a file durably (fsync); returns its size and digest.
std::pair<int64_t, uint64_t> write_file(const std::string& path, const std::string& bytes);

/// Writes into `path`.spur-tmp, then swaps it with `path` atomically (renameat2 RENAME_EXCHANGE; two renames
/// where the file system has no exchange) and removes the old contents: readers see the old directory or the
/// new one, never a mix. `write` fills the temporary directory.
void replace_directory(const std::string& path, const std::function<void(const std::string& tmp)>& write);
/// The temporary directory replace_directory writes into.
std::string temporary_directory(const std::string& path);
/// Swaps a fully written temporary directory into place (the second half of replace_directory).
void commit_directory(const std::string& path);
/// The two-rename replacement used where the file system has no atomic exchange: `path`.spur-tmp becomes
/// `path`.spur-new, `path` becomes `path`.spur-old, `path`.spur-new becomes `path`, `path`.spur-old goes.
void commit_by_renames(const std::string& path);
/// When `path` is missing because a save stopped between those renames, moves `path`.spur-new (else
/// `path`.spur-old) back to `path` and returns where it came from; else returns "". load_state and every
/// save call it first.
std::string recover_directory(const std::string& path);

}  // namespace detail
}  // namespace spur
