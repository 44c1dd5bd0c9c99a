// SPDX-License-Identifier: Apache-2.0
// Sharded checkpoints (FSDP's SHARDED_STATE_DICT under ZeRO stage 3) and their merge into whole weights, without
// LibTorch (the `spur merge-weights` command runs it; Accelerate's is `accelerate merge-weights`).
//
// save_state writes model i's weights as one file per rank, checkpoint_model_shard_file(i, rank) (model_rank0.
// safetensors...): the rank's own range of each sharded parameter, stored 1-D under the parameter's name, and listed
// in the metadata key "spur.slices" as {name: [offset, shape]} (offset: elements into the whole tensor flattened;
// shape: the whole tensor's). Tensors a file holds that are not listed there are whole: the buffers and the
// parameters nothing shards, written by rank 0 only, whose file also carries "spur.aliases" (tied names, as the
// whole model.safetensors does). "spur.shard" is "RANK/WORLD". Merged, the ranges of every parameter cover it
// exactly once, and the result is byte for byte the model.safetensors a FULL_STATE_DICT save writes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace spur::detail {

struct ShardSlice {
  int64_t offset = 0;          // elements into the whole tensor, flattened
  std::vector<int64_t> shape;  // the whole tensor's
};

struct ShardFileInfo {
  int64_t rank = 0;
  int64_t world = 1;
  std::map<std::string, ShardSlice> slices;  // by tensor name
  std::optional<std::string> aliases;        // rank 0's "spur.aliases"
};

/// The metadata save_state writes into rank `info.rank`'s shard file (with "format": "pt").
std::map<std::string, std::string> shard_file_metadata(const ShardFileInfo& info);
/// Reads it back. Throws spur::Error naming the key at fault (the caller adds the file).
ShardFileInfo parse_shard_file_metadata(const std::map<std::string, std::string>& metadata);

/// Merges the sharded weights of the checkpoint in `checkpoint_dir` (the folder save_state wrote, with its
/// spur_state.json) into `output_dir`/model.safetensors (model_1.safetensors... for further models), each written
/// to a temporary name and renamed into place. Every rank's file is checked against the manifest's size and hash
/// first. Returns the paths written. Throws spur::Error naming the checkpoint, file or tensor at fault: a checkpoint
/// that holds whole weights already, a missing or altered rank file, ranges that overlap or leave a gap.
std::vector<std::string> merge_sharded_checkpoint(const std::string& checkpoint_dir, const std::string& output_dir);

}  // namespace spur::detail
