// SPDX-License-Identifier: Apache-2.0
// LaunchTarget: where and how a configuration's runs are launched (this machine, SSH hosts, a Slurm job, a
// SageMaker job) and the launch settings that go with it, in Spur's target file beside the configuration.
//
// Accelerate's loader refuses keys it does not know, so what Accelerate's file cannot say lives in a second file
// whose name the configuration's leads to: `run.yaml` -> `run.spur.yaml` (`run.json` -> `run.spur.yaml`). The wizard
// and `spur config` write both; `spur launch --config_file run.yaml` reads both, so the file alone launches what the
// Studio's Launch launches. The target file's keys are `spur launch`'s flags, written as YAML:
//
//   target: slurm              # local | ssh | slurm | sagemaker. Default: local
//   nodes: 2                   # Slurm: nodes, ntasks_per_node, partition, time, account, qos, gres, slurm_args,
//   partition: gpu             #   slurm_dir, job_name
//   hosts: [gpu1, gpu2]        # SSH: hosts (a list or "a,b"), hostfile, ssh_config, remote_spur, connect_timeout
//   on: login1                 # this machine, SSH, Slurm: the machine spur launch runs on, detached ([user@]host
//                              #   [:port], spur launch --on; a laptop submitting through a login node), on_dir
//   env: {NCCL_DEBUG: INFO}    # every target: env (a value-less name takes the launching shell's value),
//   max_restarts: 1            #   gradient_accumulation_steps, max_restarts, hang_timeout, grace_period,
//                              #   system_metrics_interval, num_cpu_threads_per_process
//                              # SageMaker: job_name, poll_interval, aws_endpoint_url, detach
//
// Relative paths (hostfile, ssh_config) are relative to the target file's folder. A flag on the command line wins
// over the same key in the file; --hosts, --hostfile or --slurm on the command line replace the file's target.
#pragma once

#include <QSet>
#include <QString>
#include <QStringList>

#include <optional>

namespace spur::app {

struct LaunchTarget {
  enum class Where { Local, Ssh, Slurm, SageMaker };
  Where where = Where::Local;
  /// The settings as `spur launch` flags ("--hosts", "a,b", "--env", "K=v", ...), without the target's own switch
  /// (--slurm): launch_flags() adds it.
  QStringList flags;

  /// The target file that belongs to a configuration: the same folder and name, with ".spur.yaml" for the suffix.
  static QString path_for(const QString& config_path);
  /// The target file beside `config_path`, when there is one. ConfigError naming file, line and key when it is bad.
  static std::optional<LaunchTarget> load_for(const QString& config_path);
  /// Reads a target file's text; `name` is what errors call it, `folder` what relative paths are relative to.
  /// Throws ConfigError naming name:line: key for an unknown key, a key of another target, a bad value.
  static LaunchTarget parse(const QString& text, const QString& name, const QString& folder);

  /// The target file's text (comments say which configuration it belongs to and what reads it).
  QString to_yaml(const QString& config_path) const;
  /// Writes it beside `config_path`, privately (its env values may be secrets), or removes an old one when there is
  /// nothing to say (this machine, no settings). Throws ConfigError naming the file.
  void save_for(const QString& config_path) const;
  /// Nothing beyond a local launch with spur launch's defaults.
  bool empty() const { return where == Where::Local && flags.isEmpty(); }
  /// A flag's value among `flags` ("on" -> "login1"), when there.
  std::optional<QString> value(const QString& name) const;
  /// `flags` without those named (e.g. {"on", "on_dir"}: the copy that travels to the machine it names).
  void remove(const QSet<QString>& names);
  /// The flags to launch with: --slurm for a Slurm target, then `flags`.
  QStringList launch_flags() const;
  /// One line for people: "SSH to gpu1, gpu2", "a Slurm job: 2 node(s) x 4 task(s), partition gpu", ...
  QString describe() const;
};

QString where_name(LaunchTarget::Where where);

/// `spur launch`'s flags with a target file's: the command line's flags (`given`, program excluded) win over the
/// file's same flag (for --env, the same variable); --hosts, --hostfile or --slurm given replace the file's
/// target (its hosts, hostfile, Slurm settings). Returns the file's remaining flags, then `given`.
QStringList merge_launch_flags(const LaunchTarget& target, const QStringList& given);

}  // namespace spur::app
