// SPDX-License-Identifier: Apache-2.0
// DDP's communication hooks by name, and where they apply (comm_hook.h).
#include <spur/core/comm_hook.h>

#include <algorithm>
#include <cctype>

namespace spur {

std::optional<CommHook> parse_comm_hook(std::string_view name, std::string* why) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower.empty() || lower == "no" || lower == "none") return CommHook::no;
  if (lower == "fp16") return CommHook::fp16;
  if (lower == "bf16") return CommHook::bf16;
  if (why) {
    if (lower == "power_sgd" || lower == "batched_power_sgd") {
      *why = "'" + std::string(name) + "' (PowerSGD) is Accelerate's but Spur does not run it yet: " + kCommHookChoices;
    } else {
      *why = "'" + std::string(name) + "' is not a communication hook: " + kCommHookChoices;
    }
  }
  return std::nullopt;
}

const char* comm_hook_name(CommHook hook) {
  switch (hook) {
    case CommHook::no:
      return "no";
    case CommHook::fp16:
      return "fp16";
    case CommHook::bf16:
      return "bf16";
    case CommHook::power_sgd:
      return "power_sgd";
    case CommHook::batched_power_sgd:
      break;
  }
  return "batched_power_sgd";
}

std::optional<std::string> comm_hook_stage_conflict(CommHook hook, int zero_stage) {
  if (hook == CommHook::no || zero_stage < 2) return std::nullopt;
  return std::string("the ") + comm_hook_name(hook) +
         " communication hook compresses DDP's gradient buckets, and ZeRO stage " + std::to_string(zero_stage) +
         " reduces gradients without them (its own reduce-scatter): use the hook with stage 0 or 1, or drop it";
}

}  // namespace spur
