// SPDX-License-Identifier: Apache-2.0
// ProcessState: who this process is in a run, read from the environment that `spur launch`, torchrun,
// Accelerate or MPI set. No variables at all means a plain single process with no rendezvous.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
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
  /// and keys live under /worker/attempt_<restart_count>.
  bool use_agent_store = false;
  int64_t restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT.
  /// Who set the variables: "spur", "torchrun", "mpi", "env" (set by hand) or "none".
  std::string launcher = "none";

  // What the launcher asks of the training program (the Accelerator's options override these).
  std::optional<Precision> mixed_precision;
  std::optional<bool> use_cpu;
  std::optional<int64_t> gradient_accumulation_steps;
  std::optional<std::chrono::seconds> rendezvous_timeout;
  std::optional<std::chrono::seconds> collective_timeout;

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
