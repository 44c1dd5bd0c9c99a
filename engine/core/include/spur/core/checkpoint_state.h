// SPDX-License-Identifier: Apache-2.0
// spur_state.json, the manifest of a state directory (Accelerator::save_state / load_state), read and written
// without LibTorch so that tests/fuzz can fuzz it: the world size and counts of what was prepared, each data
// loader's position, the accumulation counters, and every file of the checkpoint with its size and hash.
// parse_checkpoint_state() checks the whole file before load_state restores anything: every key present with its
// type and range, and every listed file a plain name in the checkpoint's own folder. Errors are spur::Error naming
// the key at fault; the caller adds the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spur::detail {

struct CheckpointLoader {
  int64_t epoch = 0;             // the epoch to resume in (>= 0)
  int64_t position = 0;          // batches of it already handed out (>= 0)
  bool stream = false;           // an iterable (stream) loader, not a map-style one
  int64_t dataset_size = -1;     // map-style: the data set's length; streams: -1
  std::optional<uint64_t> seed;  // the loader's shuffling seed, when it had one
  bool operator==(const CheckpointLoader&) const = default;
};

struct CheckpointFile {
  int64_t size = 0;   // bytes
  uint64_t hash = 0;  // file_digest() of its bytes, written as 16 hex digits
  bool operator==(const CheckpointFile&) const = default;
};

struct CheckpointState {
  static constexpr int64_t kFormat = 1;
  int64_t format = kFormat;
  std::string spur_version;
  int64_t world_size = 1;  // processes that saved it (>= 1)
  int64_t models = 0;      // model files model.safetensors, model_1.safetensors, ... (>= 0)
  int64_t optimizers = 0;
  int64_t zero_stage = 0;  // 0 (whole optimizer state), 1, 2 or 3 (sharded per rank)
  int64_t schedulers = 0;
  int64_t custom_objects = 0;
  int64_t accumulation_step = 0;  // GradientState::step at the save (>= 0)
  bool step_was_skipped = false;
  std::vector<CheckpointLoader> loaders;
  std::vector<std::pair<std::string, CheckpointFile>> files;  // in the order written; names unique

  /// The listed file `name`, or nullptr.
  const CheckpointFile* file(const std::string& name) const;
  bool operator==(const CheckpointState&) const = default;
};

/// Reads spur_state.json's text. Refuses another format, a missing or mistyped key, a value out of range, a file
/// listed twice or named with a path, "." / "..", or a control character.
CheckpointState parse_checkpoint_state(const std::string& text);

/// The file's text (one line of JSON and a newline); parse_checkpoint_state() reads back what it was given.
std::string write_checkpoint_state(const CheckpointState& state);

/// 16 lower-case hex digits, as the manifest writes a file's hash.
std::string hash_text(uint64_t hash);

/// Prepared model i's weights, whole: model.safetensors, model_1.safetensors...
std::string checkpoint_model_file(size_t i);
/// Rank `rank`'s part of prepared model i's weights (SHARDED_STATE_DICT under ZeRO stage 3):
/// model_rank0.safetensors, model_1_rank0.safetensors... (checkpoint_merge.h describes what they hold).
std::string checkpoint_model_shard_file(size_t i, int64_t rank);

}  // namespace spur::detail
