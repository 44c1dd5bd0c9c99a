// SPDX-License-Identifier: Apache-2.0
// SetupAnswers: the answers to Accelerate's configuration questions (where, how many, which precision) plus what
// to run, turned into a run configuration and the `spur launch` that runs it. The wizard and `spur config` share it.
#pragma once

#include <QList>
#include <QPair>
#include <QString>
#include <QStringList>

#include <optional>
#include <string>

#include "config/run_config.h"
#include "launch/launch_request.h"
#include "launch/ssh_fanout.h"
#include "setup/launch_target.h"
#include "slurm/slurm_job.h"

namespace spur::app {

/// What this machine has, for the questions' defaults. Probed once per process, on a thread of its own:
/// `nvidia-smi -L` can take seconds (up to 10 s before it is given up), and the Studio's GUI thread never waits
/// for it (it starts the probe at start-up and asks ready() when a wizard opens).
struct DetectedHardware {
  int cpu_cores = 1;
  int gpus = 0;  // from `nvidia-smi -L`; 0 without a driver
  /// Starts the probe if it has not started; returns at once.
  static void start();
  /// The probe's result, waiting for it (starting it first if need be): for the command line.
  static DetectedHardware detect();
  /// The result if the probe has finished; none while it runs (or before start()). Never waits.
  static std::optional<DetectedHardware> ready();
};

struct SetupAnswers {
  using Where = LaunchTarget::Where;  // this machine, SSH hosts, a Slurm job, SageMaker
  Where where = Where::Local;
  // Local, SSH and Slurm.
  std::string distributed_type = "NO";  // NO, MULTI_CPU, MULTI_GPU (SageMaker: NO, DATA_PARALLEL)
  int num_machines = 1;                 // SSH: the number of hosts; Slurm: the number of nodes
  int machine_rank = 0;
  QString main_process_ip;
  int main_process_port = 29500;
  bool same_network = true;
  int processes_per_machine = 1;  // Slurm: tasks per node
  QStringList hosts;              // SSH: [user@]host, the first one is the rendezvous
  bool use_cpu = true;
  std::string gpu_ids = "all";
  std::string mixed_precision = "no";
  int gradient_accumulation_steps = 1;
  // SageMaker (bring your own container).
  std::string region = "us-east-1";
  std::string iam_role_name = "spur_sagemaker_execution_role";
  std::string profile;
  std::string image_uri;
  std::string ec2_instance_type = "ml.p3.2xlarge";
  std::string inputs_file, metrics_file;
  // Slurm (`spur launch --slurm` flags, in the target file beside the configuration): partition, time, account, qos,
  // gres, extra (sbatch options), directory (--slurm_dir as given; empty: spur launch's ./spur-slurm), job_name (kept
  // from a past launch; the wizard does not ask). Its nodes and ntasks_per_node are num_machines and
  // processes_per_machine.
  SlurmRequest slurm;
  // What to run.
  QString program;
  QStringList arguments;
  QString working_directory;
  QList<QPair<QString, QString>> environment;
  // Surviving faults (launch flags, in the target file): --max_restarts, --hang_timeout (0: off).
  int max_restarts = 0;
  int hang_timeout = 0;
  // The run's name in the history (--run_name; empty: the launcher names it).
  QString run_name;
  // The machine `spur launch` runs on, [user@]host[:port] (--on, in the target file; empty: this one): a login node
  // that submits the Slurm job, a machine the SSH hosts are reached from. Not for SageMaker.
  QString launch_on;

  /// Defaults for this machine: several CPU processes on a CPU-only machine, one per GPU otherwise.
  static SetupAnswers defaults(const DetectedHardware& hardware);
  /// The answers a configuration file gives (what to run stays as in `base`), with its target file's (hosts, Slurm
  /// settings, environment...) when there is one: `target`.
  static SetupAnswers from_config(const RunConfig& config, SetupAnswers base, const LaunchTarget* target = nullptr);
  /// The configuration to save; ConfigError naming the key when the answers do not make a valid one. Over
  /// `base` (an opened file of the same compute environment), whose other keys (FSDP, DeepSpeed...) are kept.
  RunConfig to_config(const std::string& name = "wizard", const RunConfig* base = nullptr) const;
  /// What to run, as a past launch ran it: program, arguments, directory, and the flags the questions cover
  /// (--hosts: SSH; --slurm and its settings: Slurm; --env; --gradient_accumulation_steps; not --run_name: a new
  /// run is named anew).
  void take_launch(const LaunchRequest& request);
  /// Where the run happens and the launch settings the questions cover (hosts or Slurm settings, gradient
  /// accumulation, environment, restarts, hang timeout): what the target file beside the configuration holds.
  LaunchTarget target() const;
  /// The answers a target file gives (replacing the target and settings a past launch gave).
  void take_target(const LaunchTarget& target);
  /// The launch of `config_file`. Default (`with_target` false): the configuration's target file, saved beside it
  /// (to_config's file, target().save_for), holds the settings, so the request is the one a person types headless
  /// (--config_file F, the run's name, the program); true: target().launch_flags() too, for a configuration that
  /// has no target file (a temporary copy).
  LaunchRequest launch_request(const QString& config_file, bool with_target = false) const;

 private:
  static SetupAnswers from_file(const RunConfig& config, SetupAnswers base);
  void take_flags(const QStringList& flags);
};

/// A field check (below).
using QStringCheck = QString (*)(const QString&);

// Field checks: empty when the text is acceptable, else what is wrong with it (shown at the field).
// check_host (a [user@]host for ssh): launch/ssh_fanout.h, shared with `spur launch --hosts`.
/// A list separated by commas or spaces; names the first bad host.
QString check_host_list(const QString& hosts);
QStringList split_host_list(const QString& hosts);
QString check_port(const QString& port);
QString check_gpu_ids(const QString& ids);
/// The LibTorch version this build's engine is compiled against ("2.15.0", "1.13.0"; empty when not known).
QString engine_torch_version();
/// Mixed precision `precision` ("no", "fp16", "bf16") where the processes compute on CPUs (`on_cpu`): fp16 needs
/// a LibTorch whose CPU autocast runs float16 (2.2 and later; torch_features.h), which the engine checks only
/// when the run starts.
QString check_mixed_precision(const QString& precision, bool on_cpu);
/// An executable file (relative to `working_directory`, or on PATH for a bare name).
QString check_program(const QString& program, const QString& working_directory);
QString check_directory(const QString& directory);
/// NAME=VALUE per line (blank lines skipped); names the line at fault.
QString check_environment(const QString& lines);
QList<QPair<QString, QString>> parse_environment(const QString& lines);
QString check_region(const QString& region);
QString check_instance_type(const QString& type);
QString check_image_uri(const QString& uri);
/// Slurm settings, judged as `spur launch --slurm` judges them (app::check_request): partitions (a comma-separated
/// list); an account or QOS name; a time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS); a GRES list;
/// more sbatch options ("--exclusive --mem=0"). Empty is fine for each (Slurm's defaults).
QString check_slurm_partition(const QString& partition);
QString check_slurm_name(const QString& name);
QString check_slurm_time(const QString& time);
QString check_slurm_gres(const QString& gres);
QString check_slurm_options(const QString& options);
/// A folder for the jobs' files (--slurm_dir): one #SBATCH lines can carry (no space, quote, $ or %). Empty is
/// spur launch's default, spur-slurm in `working_directory` (when given): that one is judged, and said to be the
/// default. Worded for a form ("choose a folder"), not for the command line.
QString check_slurm_directory(const QString& directory, const QString& working_directory = {});
/// The machine `spur launch` runs on (--on, the target file's on:): [user@]host[:port]; empty is fine (this one).
QString check_launch_machine(const QString& machine);
/// `path` when no file is there, else the first free "NAME-2.EXT", "NAME-3.EXT"... beside it: what a new
/// configuration is offered to be saved as (it was offered the last one's name, and Finish replaced it).
QString unused_file_name(const QString& path);

}  // namespace spur::app
