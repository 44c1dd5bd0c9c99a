// SPDX-License-Identifier: Apache-2.0
// ProcessState: who this process is in a run, read from the environment that `spur launch`, torchrun,
// Accelerate or MPI set. No variables at all means a plain single process with no rendezvous.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include <spur/options.h>

namespace spur {

struct ProcessState {
  int64_t rank = 0;              ///< RANK: index over all processes of the run.
  int64_t world_size = 1;        ///< WORLD_SIZE: processes over all machines.
  int64_t local_rank = 0;        ///< LOCAL_RANK: index on this machine.
  int64_t local_world_size = 1;  ///< LOCAL_WORLD_SIZE: processes on this machine.
  int64_t node_rank = 0;         ///< GROUP_RANK: this machine's index.
  std::string master_addr;       ///< MASTER_ADDR: host of the rendezvous store.
  int master_port = 0;           ///< MASTER_PORT.
  /// TORCHELASTIC_USE_AGENT_STORE: torchrun's agent already hosts the store, so every rank is a client
  /// and keys live under `/worker/attempt_<restart_count>`.
  bool use_agent_store = false;
  /// SPUR_RESTART_COUNT or TORCHELASTIC_RESTART_COUNT: how often the launcher restarted the ranks
  /// (`spur launch --max_restarts`, torchrun's `--max_restarts`); 0 on the first attempt.
  int64_t restart_count = 0;
  /// Who set the variables: "spur", "torchrun", "mpi", "slurm" (a task of `srun`: SLURM_PROCID,
  /// SLURM_STEP_NUM_TASKS, SLURM_LOCALID, SLURM_NODEID; the store on the step's first node, its port from the
  /// job id unless MASTER_PORT is set), "env" (set by hand) or "none".
  std::string launcher = "none";

  // What the launcher asks of the training program (the Accelerator's options override these).
  std::optional<Precision> mixed_precision;
  std::optional<bool> use_cpu;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<std::chrono::seconds> rendezvous_timeout;
  std::optional<std::chrono::seconds> collective_timeout;
  /// ZeRO stage (0: plain DDP, 1: optimizer state sharded, 2: gradients too, 3: parameters too): SPUR_ZERO_STAGE,
  /// else Accelerate's ACCELERATE_USE_DEEPSPEED + ACCELERATE_DEEPSPEED_ZERO_STAGE (default 2), else
  /// ACCELERATE_USE_FSDP + FSDP_SHARDING_STRATEGY (SHARD_GRAD_OP: 2, NO_SHARD: 0, FULL_SHARD, the default: 3) or,
  /// with FSDP_VERSION=2, FSDP_RESHARD_AFTER_FORWARD (true, the default: 3, false: 2).
  std::optional<int64_t> zero_stage;
  /// Where zero_stage came from ("SPUR_ZERO_STAGE", "FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP"...), for messages.
  std::string zero_stage_source;
  /// FSDP's state_dict_type: "FULL_STATE_DICT" or "SHARDED_STATE_DICT" (FSDP_STATE_DICT_TYPE; Accelerate's default
  /// for FSDP2, SHARDED_STATE_DICT, when ACCELERATE_USE_FSDP and FSDP_VERSION=2 say FSDP2 without one).
  std::optional<std::string> state_dict_type;
  /// DDP's gradient communication hook, by Accelerate's name ("no", "fp16", "bf16"): SPUR_DDP_COMM_HOOK.
  std::optional<std::string> comm_hook;
  /// DeepSpeed and FSDP settings the launcher passed that Spur does not honour, each by name and value (the main
  /// process warns once).
  std::vector<std::string> ignored_sharding_settings;

  bool distributed() const { return world_size > 1; }
  bool is_main_process() const { return rank == 0; }
  bool is_local_main_process() const { return local_rank == 0; }

  /// Reads the process environment. Throws spur::Error naming the variable at fault.
  static ProcessState from_environment();

  using Lookup = std::function<std::optional<std::string>(std::string_view name)>;
  /// Same, reading variables through `lookup` (for tests and for the launcher's dry runs).
  static ProcessState from_environment(const Lookup& lookup);
};

}  // namespace spur
