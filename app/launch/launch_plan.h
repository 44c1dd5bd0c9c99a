// SPDX-License-Identifier: Apache-2.0
// LaunchPlan: who runs what, where, with which environment, worked out from a run configuration, the launch
// flags and the program. A pure function of its inputs: `spur launch --dry_run` prints it, the launchers run it.
#pragma once

#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

#include "config/run_config.h"

namespace spur::app {

/// A launch that cannot work as asked; the message says which flag or key and why.
class LaunchError : public std::runtime_error {
 public:
  explicit LaunchError(const QString& message) : std::runtime_error(message.toStdString()) {}
};

/// Accelerate's launch flags; each set one overrides the configuration file's value.
struct LaunchOptions {
  std::optional<int> num_processes;  // total over all machines
  std::optional<int> num_machines;
  std::optional<int> machine_rank;
  std::optional<QString> main_process_ip;
  std::optional<int> main_process_port;
  std::optional<QString> mixed_precision;
  bool cpu = false;
  std::optional<QString> gpu_ids;
  std::optional<int> gradient_accumulation_steps;
  std::optional<int> num_cpu_threads_per_process;
  /// ZeRO stage from `--use_deepspeed [--zero_stage N]` or `--use_fsdp [--fsdp_sharding_strategy S]`.
  std::optional<int> zero_stage;
  /// `--fsdp_state_dict_type`: FULL_STATE_DICT or SHARDED_STATE_DICT (how ZeRO stage 3 checkpoints the weights).
  std::optional<QString> state_dict_type;
  /// `--ddp_comm_hook`: DDP's gradient communication hook by Accelerate's name (no, fp16, bf16).
  std::optional<QString> comm_hook;
  /// `--env NAME=VALUE`: set for every rank (over the launcher's own environment).
  QList<QPair<QString, QString>> environment;
};

/// Parses `--env`'s `NAME=VALUE`, or `NAME` alone for this environment's value; LaunchError naming the text when
/// NAME is not a valid variable name, is one the launcher sets for each rank, or (alone) is not set here.
QPair<QString, QString> parse_environment_assignment(const QString& text);

struct RankSpec {
  int rank = 0;
  int local_rank = 0;
  /// What its output lines are prefixed with: "rank<N>" for a rank, the host for an SSH fan-out's child.
  QString label;
  QString program;
  QStringList arguments;
  /// What the launcher adds to (or sets in) the environment it runs with.
  QProcessEnvironment environment;
  /// Written to its standard input once it started (with SupervisionOptions::Stdin::Pipe): the SSH fan-out's
  /// environment block, so that no value is ever in an argument list.
  QByteArray input;
};

/// The most processes one machine's launcher starts: more is a mistake (a total meant for many machines given
/// for one), and each rank costs the launcher its environment and pipes.
inline constexpr int kMaxProcessesPerMachine = 4096;

struct LaunchPlan {
  int world_size = 1;
  int num_machines = 1;
  int machine_rank = 0;
  int local_world_size = 1;
  QString master_addr;
  int master_port = 0;
  QString mixed_precision = "no";
  bool use_cpu = false;
  int zero_stage = 0;           // SPUR_ZERO_STAGE for every rank when above 0
  QString state_dict_type;      // FSDP_STATE_DICT_TYPE for every rank when set
  QString comm_hook;            // SPUR_DDP_COMM_HOOK for every rank when --ddp_comm_hook was given
  std::vector<RankSpec> ranks;  // this machine's ranks
  QStringList notes;            // config keys Spur does not act on, and other things worth saying
  /// Human-readable: each rank's command and the variables the launcher sets.
  QString describe() const;
};

struct MachineFacts {
  int cpu_cores = 1;
  /// Picks a free TCP port (binding port 0).
  std::function<int()> free_port;
  /// The launcher's own environment (OMP_NUM_THREADS set there is respected).
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  /// Check that the program runs here (false when it runs on other machines).
  bool resolve_program = true;
};

/// Throws LaunchError naming the flag or key at fault.
LaunchPlan make_plan(const std::optional<RunConfig>& config, const LaunchOptions& options, const QString& program,
                     const QStringList& arguments, const MachineFacts& machine);

/// The configuration that relaunches this plan as it ran: the file's keys (if any) with the flags' values
/// written in (processes, machines, precision, CPU, rendezvous address). Saved with the run in the history.
RunConfig effective_config(const std::optional<RunConfig>& config, const LaunchPlan& plan);

}  // namespace spur::app
