// SPDX-License-Identifier: Apache-2.0
// The `spur` sub-commands: each takes its own arguments (after the sub-command's name) and returns the exit
// status. One file per command.
#pragma once

#include <QSet>
#include <QStringList>

#include <optional>

#include "launch/launch_plan.h"
#include "launch/supervisor.h"

namespace spur::app {
class RunConfig;
}
namespace spur::history {
struct Run;
}

namespace spur::cli {

class Arguments;

/// `spur config [default|show|validate]`: write, show and check Accelerate-format run configurations.
int config_command(const QStringList& arguments);
/// `spur merge-weights CHECKPOINT_DIR OUTPUT_DIR`: a sharded checkpoint's weights as one model.safetensors.
int merge_weights_command(const QStringList& arguments);
/// `spur launch [flags] PROGRAM [ARGS...]`: this machine's ranks of a run, supervised.
int launch_command(const QStringList& given);
/// `spur launch --on HOST ...` (cli/launch_on.cpp): `arguments` as given, `config_path` the configuration in effect
/// (empty: none).
int launch_on(const QStringList& arguments, const std::string& config_path);
/// `spur test [launch flags]`: spur-check launched as `spur launch` would launch a program; says whether it works.
int test_command(const QStringList& arguments);
/// `spur sagemaker follow|stop|describe JOB`: a SageMaker training job submitted earlier.
int sagemaker_command(const QStringList& arguments);
/// `spur launch` with a SageMaker configuration: submits the training job and follows it.
int sagemaker_launch(const app::RunConfig& config, const Arguments& args, const QStringList& given);
/// `spur launch --slurm`: submits an sbatch script (one `spur launch` per node) and follows the job.
int slurm_launch(const std::optional<app::RunConfig>& config, const Arguments& args, const QStringList& given,
                 app::LaunchOptions options, int grace);
/// The run's record from the launch flags that describe it: --run_name, --tag (each), --notes, --parent_run.
/// UsageError naming the flag for a bad value.
void take_run_flags(const Arguments& args, history::Run& run);
/// The launch's record in the run history for the launch supervisor (--run_name, --tag, --notes, --parent_run;
/// `default_name` when no --run_name), with `command` as the words a relaunch gives `spur launch`; none with
/// --no_history (the remote half of an SSH launch: the local side records) or --dry_run.
app::SupervisorOptions record_options(const Arguments& args, const QStringList& command, const QString& target,
                                      const QString& hosts, const std::string& config_yaml,
                                      const QString& stream_key = {}, const QString& default_name = {});
/// `spur slurm follow|stop|describe JOB`.
int slurm_command(const QStringList& arguments);
/// `spur runs list|show|export|config|logs|rm|tag|note`: the run history.
int runs_command(const QStringList& arguments);
/// `spur sweep run|list|show|stop|resume`: many runs from one W&B sweep file.
int sweep_command(const QStringList& arguments);
/// `spur env`: what a bug report needs (versions, compiler, CPU/GPU, BLAS).
int env_command(const QStringList& arguments);
/// `spur shard-plan`: each rank's batches for a data set, by Accelerate's sharding rules.
int shard_plan_command(const QStringList& arguments);

}  // namespace spur::cli
