// SPDX-License-Identifier: Apache-2.0
// The one rule that turns Accelerate's ways of asking for sharding into a ZeRO stage (0: plain data parallel,
// 1: optimizer state sharded, 2: and gradients, 3: and parameters). Read by the engine (ACCELERATE_USE_DEEPSPEED,
// ACCELERATE_USE_FSDP and their variables), the configuration file (deepspeed_config, fsdp_config) and
// `spur launch`'s flags (--zero_stage, --fsdp_sharding_strategy, --fsdp_reshard_after_forward); each names its own
// source in its errors.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace spur {

/// DeepSpeed's stage when none is given (DeepSpeedPlugin's default).
inline constexpr int kDeepSpeedDefaultStage = 2;

/// FSDP's sharding strategy, by name (any case) or Accelerate's number: FULL_SHARD (1) 3, SHARD_GRAD_OP (2) 2,
/// NO_SHARD (3) 0; HYBRID_SHARD (4) and HYBRID_SHARD_ZERO2 (5) -1 (sharded within a machine, replicated across:
/// not implemented); nullopt for anything else.
std::optional<int> fsdp_strategy_stage(std::string_view strategy);

/// FSDP2's fsdp_reshard_after_forward (fsdp_version 2): "true" (any case; resharding, FULL_SHARD) 3, "false"
/// (keeping the parameters, SHARD_GRAD_OP) 2; nullopt for anything else.
std::optional<int> fsdp_reshard_stage(std::string_view reshard_after_forward);

/// FSDP's state_dict_type, by name (any case) or torch's StateDictType number: FULL_STATE_DICT (1) "FULL_STATE_DICT",
/// SHARDED_STATE_DICT (3) "SHARDED_STATE_DICT"; LOCAL_STATE_DICT (2) "LOCAL_STATE_DICT" (FSDP1's flat parameters,
/// which Spur does not write: callers refuse it by name); nullopt for anything else. Accelerate's default is
/// FULL_STATE_DICT for FSDP1 and SHARDED_STATE_DICT for FSDP2 (fsdp_version 2).
std::optional<std::string> fsdp_state_dict_type(std::string_view type);

}  // namespace spur
