// SPDX-License-Identifier: Apache-2.0
// Reads torchrun's, Accelerate's, MPI's and Spur's variables into a ProcessState; every malformed value is an
// error naming the variable, because a wrong rank or world size otherwise shows up as a hang much later.
#include <spur/state.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <spur/error.h>
#include <spur/options.h>

#include <spur/core/comm_hook.h>
#include <spur/core/zero_stage.h>

namespace spur {
namespace {

std::optional<std::string> lookup_any(const ProcessState::Lookup& lookup, std::initializer_list<const char*> names,
                                      std::string* found_name = nullptr) {
  for (const char* name : names) {
    if (auto value = lookup(name); value && !value->empty()) {
      if (found_name) *found_name = name;
      return value;
    }
  }
  return std::nullopt;
}

int64_t parse_integer(const std::string& name, const std::string& text, int64_t minimum, int64_t maximum) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end) {
    throw Error("environment variable " + name + "='" + text + "' is not an integer");
  }
  if (value < minimum || value > maximum) {
    throw Error("environment variable " + name + "=" + text + " is out of range [" + std::to_string(minimum) + ", " +
                std::to_string(maximum) + "]");
  }
  return value;
}

std::optional<int64_t> integer_var(const ProcessState::Lookup& lookup, std::initializer_list<const char*> names,
                                   int64_t minimum, int64_t maximum = INT64_MAX) {
  std::string name;
  auto text = lookup_any(lookup, names, &name);
  if (!text) return std::nullopt;
  return parse_integer(name, *text, minimum, maximum);
}

// Accelerate's str_to_bool spellings.
std::optional<bool> bool_var(const ProcessState::Lookup& lookup, std::initializer_list<const char*> names) {
  std::string name;
  auto text = lookup_any(lookup, names, &name);
  if (!text) return std::nullopt;
  std::string lower = *text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"1", "true", "t", "yes", "y", "on"}) {
    if (lower == yes) return true;
  }
  for (const char* no : {"0", "false", "f", "no", "n", "off"}) {
    if (lower == no) return false;
  }
  throw Error("environment variable " + name + "='" + *text + "' is not a boolean (use true or false)");
}

std::optional<std::chrono::seconds> seconds_var(const ProcessState::Lookup& lookup, const char* name) {
  if (auto value = integer_var(lookup, {name}, 1, kMaxTimeoutSeconds)) return std::chrono::seconds(*value);
  return std::nullopt;
}

// ZeRO's stage from Spur's variable or from what `accelerate launch` sets for DeepSpeed and FSDP.
void read_sharding(const ProcessState::Lookup& lookup, ProcessState& state) {
  auto ignore_unless = [&](const char* name, std::initializer_list<const char*> harmless, const std::string& why) {
    auto value = lookup(name);
    if (!value || value->empty()) return;
    std::string lower = *value;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (const char* ok : harmless) {
      if (lower == ok) return;
    }
    state.ignored_sharding_settings.push_back(std::string(name) + "=" + *value + ": " + why);
  };
  if (auto stage = integer_var(lookup, {"SPUR_ZERO_STAGE"}, 0, 3)) {
    state.zero_stage = stage;
    state.zero_stage_source = "SPUR_ZERO_STAGE=" + std::to_string(*stage);
    return;
  }
  if (bool_var(lookup, {"ACCELERATE_USE_DEEPSPEED"}).value_or(false)) {
    state.zero_stage = integer_var(lookup, {"ACCELERATE_DEEPSPEED_ZERO_STAGE"}, 0, 3).value_or(kDeepSpeedDefaultStage);
    state.zero_stage_source = "ACCELERATE_DEEPSPEED_ZERO_STAGE=" + std::to_string(*state.zero_stage);
    ignore_unless("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", {"none"},
                  "not honoured: the optimizer state stays on the training device");
    ignore_unless("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", {"none"},
                  "not honoured: the parameters stay on the training device");
    ignore_unless("ACCELERATE_DEEPSPEED_CONFIG_FILE", {}, "not read: Spur takes the stage from zero_stage only");
    ignore_unless("ACCELERATE_DEEPSPEED_ZERO3_INIT", {"false", "0"}, "not honoured (stage 3 only)");
    return;
  }
  if (bool_var(lookup, {"ACCELERATE_USE_FSDP"}).value_or(false) &&
      lookup_any(lookup, {"FSDP_VERSION"}).value_or("1") == "2") {
    // FSDP2: resharding the parameters after forward (the default) is FULL_SHARD; keeping them, SHARD_GRAD_OP.
    const bool reshard = bool_var(lookup, {"FSDP_RESHARD_AFTER_FORWARD"}).value_or(true);
    state.zero_stage = fsdp_reshard_stage(reshard ? "true" : "false");
    state.zero_stage_source = std::string("FSDP_RESHARD_AFTER_FORWARD=") + (reshard ? "true" : "false");
    ignore_unless("FSDP_OFFLOAD_PARAMS", {"false", "0"}, "not honoured: the parameters stay on the training device");
    ignore_unless("FSDP_ACTIVATION_CHECKPOINTING", {"false", "0"}, "not honoured: activations are kept");
    return;
  }
  if (bool_var(lookup, {"ACCELERATE_USE_FSDP"}).value_or(false)) {
    // Accelerate passes the strategy's name or its number (1-5); FULL_SHARD is FSDP's default.
    const std::string text = lookup_any(lookup, {"FSDP_SHARDING_STRATEGY"}).value_or("FULL_SHARD");
    const auto stage = fsdp_strategy_stage(text);
    if (stage && *stage < 0) {
      throw Error("environment variable FSDP_SHARDING_STRATEGY=" + text +
                  ": hybrid sharding (sharded within a machine, replicated across machines) is not implemented; "
                  "use SHARD_GRAD_OP (ZeRO stage 2) or NO_SHARD");
    }
    if (!stage) {
      throw Error("environment variable FSDP_SHARDING_STRATEGY='" + text +
                  "' is not an FSDP sharding strategy: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD or "
                  "HYBRID_SHARD_ZERO2 (or 1-5)");
    }
    state.zero_stage = *stage;
    state.zero_stage_source = "FSDP_SHARDING_STRATEGY=" + text;
    ignore_unless("FSDP_OFFLOAD_PARAMS", {"false", "0"}, "not honoured: the parameters stay on the training device");
    ignore_unless("FSDP_ACTIVATION_CHECKPOINTING", {"false", "0"}, "not honoured: activations are kept");
  }
}

// FSDP's state_dict_type: FSDP_STATE_DICT_TYPE (what `accelerate launch` and `spur launch` set), else
// Accelerate's default for FSDP2 (SHARDED_STATE_DICT) when the launcher asked for it.
void read_state_dict_type(const ProcessState::Lookup& lookup, ProcessState& state) {
  if (auto text = lookup_any(lookup, {"FSDP_STATE_DICT_TYPE"}); text && !text->empty()) {
    const auto type = fsdp_state_dict_type(*text);
    if (!type || *type == "LOCAL_STATE_DICT") {
      throw Error("environment variable FSDP_STATE_DICT_TYPE='" + *text +
                  (type ? "': LOCAL_STATE_DICT (FSDP1's flat parameters) is not written by Spur"
                        : "' is not a state dict type") +
                  ": FULL_STATE_DICT or SHARDED_STATE_DICT");
    }
    state.state_dict_type = *type;
    return;
  }
  if (bool_var(lookup, {"ACCELERATE_USE_FSDP"}).value_or(false) &&
      lookup_any(lookup, {"FSDP_VERSION"}).value_or("1") == "2") {
    state.state_dict_type = "SHARDED_STATE_DICT";
  }
}

// DDP's communication hook: SPUR_DDP_COMM_HOOK (what `spur launch --ddp_comm_hook` sets), by Accelerate's name.
void read_comm_hook(const ProcessState::Lookup& lookup, ProcessState& state) {
  auto text = lookup_any(lookup, {"SPUR_DDP_COMM_HOOK"});
  if (!text || text->empty()) return;
  std::string why;
  const auto hook = parse_comm_hook(*text, &why);
  if (!hook) throw Error("environment variable SPUR_DDP_COMM_HOOK=" + why);
  state.comm_hook = comm_hook_name(*hook);
}

// Slurm's compressed host list ("node[07-09,12],gpu1", "rack[1-2]-n[3-4]"): its first host ("node07", "rack1-n3").
std::string first_slurm_host(const std::string& list) {
  std::string host;
  int depth = 0;
  bool first_in_brackets = true;
  for (const char c : list) {
    if (depth == 0 && c == ',') break;
    if (c == '[') {
      ++depth;
      first_in_brackets = true;
    } else if (c == ']') {
      --depth;
    } else if (depth > 0) {
      // Inside brackets only the first range's first number counts.
      if (c == ',' || c == '-') first_in_brackets = false;
      else if (first_in_brackets) host += c;
    } else {
      host += c;
    }
  }
  return host;
}

// Slurm's tasks per node ("2(x3),1": three nodes with 2, then one with 1): the count on node `node`.
std::optional<int64_t> slurm_tasks_on_node(const std::string& text, int64_t node) {
  int64_t index = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, end - at);
    at = end + 1;
    int64_t count = 0, repeat = 1;
    if (std::sscanf(part.c_str(), "%" SCNd64 "(x%" SCNd64 ")", &count, &repeat) < 1 || count < 1 || repeat < 1) {
      return std::nullopt;
    }
    if (node < index + repeat) return count;
    index += repeat;
  }
  return std::nullopt;
}

}  // namespace

ProcessState ProcessState::from_environment() {
  return from_environment([](std::string_view name) -> std::optional<std::string> {
    if (const char* value = std::getenv(std::string(name).c_str())) return std::string(value);
    return std::nullopt;
  });
}

ProcessState ProcessState::from_environment(const Lookup& lookup) {
  ProcessState state;

  // Torchrun / Spur / by hand: RANK and WORLD_SIZE. MPI launchers name them differently (CPU runs only).
  std::string rank_name = "RANK";
  std::string size_name = "WORLD_SIZE";
  auto rank_text = lookup_any(lookup, {"RANK"});
  auto size_text = lookup_any(lookup, {"WORLD_SIZE"});
  bool mpi = false;
  bool slurm = false;
  if (!rank_text && !size_text) {
    rank_text =
        lookup_any(lookup, {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"}, &rank_name);
    size_text = lookup_any(lookup, {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"}, &size_name);
    mpi = rank_text.has_value() && size_text.has_value();
    if (!mpi) {
      rank_text.reset();
      size_text.reset();
    }
  }
  if (!rank_text && !size_text) {
    // A task of an srun step (`srun my_program`): Slurm's own variables, after MPI's (mpirun inside an allocation
    // inherits its daemon's step). A batch script's own process has SLURM_PROCID but no step: one plain process,
    // as is a program started in the shell of a one-task `srun --pty bash`.
    rank_text = lookup_any(lookup, {"SLURM_PROCID"}, &rank_name);
    size_text = lookup_any(lookup, {"SLURM_STEP_NUM_TASKS"}, &size_name);
    slurm = rank_text.has_value() && size_text.has_value();
    if (!slurm) {
      rank_text.reset();
      size_text.reset();
    }
  }
  if (rank_text.has_value() != size_text.has_value()) {
    throw Error(std::string(rank_text ? rank_name : size_name) + " is set but " + (rank_text ? size_name : rank_name) +
                " is not: start the ranks with `spur launch` or torchrun, or set RANK, WORLD_SIZE, MASTER_ADDR "
                "and MASTER_PORT together");
  }
  if (size_text) {
    state.world_size = parse_integer(size_name, *size_text, 1, 1 << 24);
    state.rank = parse_integer(rank_name, *rank_text, 0, state.world_size - 1);
  }

  if (slurm) {
    std::string name_found;
    state.node_rank = integer_var(lookup, {"SLURM_NODEID"}, 0).value_or(0);
    const auto per_node = lookup_any(lookup, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &name_found);
    std::optional<int64_t> here;
    if (per_node) {
      here = slurm_tasks_on_node(*per_node, state.node_rank);
      if (!here) {
        throw Error("environment variable " + name_found + "='" + *per_node +
                    "' is not Slurm's tasks per node (like 2(x3),1) for node " + std::to_string(state.node_rank));
      }
    }
    state.local_world_size = here.value_or(state.world_size);
    state.local_rank = integer_var(lookup, {"SLURM_LOCALID"}, 0, state.local_world_size - 1)
                           .value_or(state.rank % state.local_world_size);
  } else {
    state.local_world_size =
        integer_var(lookup, {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}, 1, state.world_size)
            .value_or(state.world_size);
    state.local_rank = integer_var(lookup, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}, 0,
                                   state.local_world_size - 1)
                           .value_or(state.rank % state.local_world_size);
    state.node_rank = integer_var(lookup, {"GROUP_RANK"}, 0).value_or(state.rank / state.local_world_size);
  }

  if (auto addr = lookup_any(lookup, {"MASTER_ADDR"})) state.master_addr = *addr;
  if (auto port = integer_var(lookup, {"MASTER_PORT"}, 1, 65535)) state.master_port = static_cast<int>(*port);
  if (slurm && state.master_addr.empty()) {
    // The step's first node hosts the store (scontrol show hostnames would say the same).
    if (auto nodes = lookup_any(lookup, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})) {
      state.master_addr = first_slurm_host(*nodes);
    }
  }
  if (slurm && state.master_port == 0) {
    // Every task derives the same port from the job and step, as PyTorch Lightning does from the job;
    // MASTER_PORT overrides it.
    if (auto job = integer_var(lookup, {"SLURM_JOB_ID", "SLURM_JOBID"}, 0)) {
      const int64_t step = integer_var(lookup, {"SLURM_STEP_ID"}, 0).value_or(0);
      state.master_port = static_cast<int>(15000 + (*job * 7919 + step * 104729) % 20000);
    }
  }
  if (state.distributed()) {
    if (state.master_addr.empty()) {
      throw Error("WORLD_SIZE=" + std::to_string(state.world_size) +
                  " but MASTER_ADDR is not set: it names the host of rank 0 (e.g. 127.0.0.1)");
    }
    if (state.master_port == 0) {
      throw Error("WORLD_SIZE=" + std::to_string(state.world_size) +
                  " but MASTER_PORT is not set: it names rank 0's rendezvous port (e.g. 29500)");
    }
  }

  if (auto agent = bool_var(lookup, {"TORCHELASTIC_USE_AGENT_STORE"})) state.use_agent_store = *agent;
  state.restart_count = integer_var(lookup, {"SPUR_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT"}, 0).value_or(0);

  if (lookup_any(lookup, {"SPUR_LAUNCHER"})) {
    state.launcher = "spur";
  } else if (lookup_any(lookup, {"TORCHELASTIC_RUN_ID"})) {
    state.launcher = "torchrun";
  } else if (mpi) {
    state.launcher = "mpi";
  } else if (slurm) {
    state.launcher = "slurm";
  } else if (size_text) {
    state.launcher = "env";
  }

  std::string name;
  if (auto text = lookup_any(lookup, {"SPUR_MIXED_PRECISION", "ACCELERATE_MIXED_PRECISION"}, &name)) {
    state.mixed_precision = parse_precision(*text);
    if (!state.mixed_precision) {
      throw Error("environment variable " + name + "='" + *text +
                  "' is not a mixed precision Spur runs: use no, "
                  "fp16 or bf16");
    }
  }
  state.use_cpu = bool_var(lookup, {"SPUR_USE_CPU", "ACCELERATE_USE_CPU"});
  state.gradient_accumulation_steps =
      integer_var(lookup, {"SPUR_GRADIENT_ACCUMULATION_STEPS", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS"}, 1);
  state.rendezvous_timeout = seconds_var(lookup, "SPUR_RENDEZVOUS_TIMEOUT");
  state.collective_timeout = seconds_var(lookup, "SPUR_COLLECTIVE_TIMEOUT");
  read_sharding(lookup, state);
  read_state_dict_type(lookup, state);
  read_comm_hook(lookup, state);
  return state;
}

}  // namespace spur
