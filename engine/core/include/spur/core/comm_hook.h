// SPDX-License-Identifier: Apache-2.0
// The one rule for DDP's gradient communication hooks, as Accelerate's DistributedDataParallelKwargs(comm_hook=...)
// names them (DDPCommunicationHookType): which names there are, which Spur runs, and with which ZeRO stages. Read by
// the engine (AcceleratorOptions::comm_hook, SPUR_DDP_COMM_HOOK) and `spur launch --ddp_comm_hook`; each caller
// names its own source in front of the reason given here.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace spur {

/// Accelerate's DDPCommunicationHookType values. `fp16` and `bf16` are torch's fp16_compress_hook and
/// bf16_compress_hook: each bucket is cast to the half type, divided by the world size there, summed in it and
/// cast back. PowerSGD's two are named so that they are refused by name (Spur does not run them yet).
enum class CommHook { no, fp16, bf16, power_sgd, batched_power_sgd };

/// The hooks Spur runs, for messages: "no, fp16, bf16".
inline constexpr const char* kCommHookChoices = "no, fp16, bf16";

/// `name` (any case; "none" and "" are "no") as a hook Spur runs; nullopt with the reason in `why` for an unknown
/// name or one Spur does not run ("'x' is not a communication hook: no, fp16, bf16").
std::optional<CommHook> parse_comm_hook(std::string_view name, std::string* why);

/// The hook's Accelerate name ("no", "fp16", ...).
const char* comm_hook_name(CommHook hook);

/// Why `hook` cannot run under ZeRO `zero_stage`, or nullopt when it can: stages 2 and 3 reduce gradients with
/// their own reduce-scatter instead of DDP's buckets, so no DDP hook applies (stage 1 keeps DDP's buckets).
std::optional<std::string> comm_hook_stage_conflict(CommHook hook, int zero_stage);

}  // namespace spur
