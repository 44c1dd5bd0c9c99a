// SPDX-License-Identifier: Apache-2.0
// Accelerate's sharding settings as a ZeRO stage (zero_stage.h).
#include <spur/core/zero_stage.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace spur {
namespace {

std::string upper(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(), [](unsigned char c) { return std::toupper(c); });
  return result;
}

}  // namespace

std::optional<int> fsdp_strategy_stage(std::string_view strategy) {
  const std::string name = upper(strategy);
  if (name == "FULL_SHARD" || name == "1") return 3;
  if (name == "SHARD_GRAD_OP" || name == "2") return 2;
  if (name == "NO_SHARD" || name == "3") return 0;
  if (name == "HYBRID_SHARD" || name == "4" || name == "HYBRID_SHARD_ZERO2" || name == "5") return -1;
  return std::nullopt;
}

std::optional<int> fsdp_reshard_stage(std::string_view reshard_after_forward) {
  const std::string value = upper(reshard_after_forward);
  if (value == "TRUE") return 3;
  if (value == "FALSE") return 2;
  return std::nullopt;
}

std::optional<std::string> fsdp_state_dict_type(std::string_view type) {
  const std::string name = upper(type);
  if (name == "FULL_STATE_DICT" || name == "1") return "FULL_STATE_DICT";
  if (name == "LOCAL_STATE_DICT" || name == "2") return "LOCAL_STATE_DICT";
  if (name == "SHARDED_STATE_DICT" || name == "3") return "SHARDED_STATE_DICT";
  return std::nullopt;
}

}  // namespace spur
