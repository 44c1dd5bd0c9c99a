// SPDX-License-Identifier: Apache-2.0
// SSH fan-out: from a host list (--hosts a,b or a DeepSpeed-style hostfile), one `spur launch --machine_rank i`
// per host through the system OpenSSH client (BatchMode, the user's keys and ssh config), every argument quoted.
#pragma once

#include <QString>
#include <QStringList>

#include <vector>

#include "launch/launch_plan.h"

namespace spur::app {

struct Host {
  QString name;
  int processes = 0;  // slots=N; 0: not given (the process count is split evenly)
};

/// Empty when `host` is `[user@]name` with a DNS name, an IPv4 or an IPv6 address (ssh's own syntax); otherwise
/// why not. Nothing that could reach ssh as an option (a leading '-') or a shell word passes.
QString check_host(const QString& host);

/// "a,b,c" -> hosts. Throws LaunchError for an empty, malformed (check_host) or duplicate name.
std::vector<Host> parse_host_list(const QString& list);
/// DeepSpeed's hostfile: "host slots=N" per line, # comments; a malformed or duplicate host is an error naming
/// the line.
std::vector<Host> read_hostfile(const QString& path);

struct SshOptions {
  QString ssh = "ssh";           // the client
  QString config_file;           // -F, when not the user's default
  int connect_timeout = 10;      // seconds, for the pre-flight and the launch
  QString remote_spur;           // the spur command on the hosts (default: this one's path)
  QString remote_directory;      // where the ranks start (default: this directory)
  bool progress_stream = false;  // the remote launchers stream their ranks' progress (hang detection here)
  int system_interval = 0;       // seconds: the remote launchers stream their system/ samples (0: none)
  double system_since = 0;       // their steps count seconds since this wall time (the run's start)
};

/// The ssh argument vector that runs `remote_command` (one shell string) on `host`. Options end with "--", so
/// the host can never be read as one.
QStringList ssh_arguments(const SshOptions& options, const QString& host, const QString& remote_command);

/// The machines of an SSH launch into `options`: num_machines (the hosts, checked against a --num_machines given),
/// machine_rank 0, and num_processes from the hosts' slots (every host the same; checked against a --num_processes
/// given), else one per host unless `config_gives_processes` or --num_processes says otherwise. LaunchError names
/// what disagrees.
void take_hosts(const std::vector<Host>& hosts, LaunchOptions& options, bool config_gives_processes);

/// Checks that every host answers over SSH (`ssh host true`, in parallel, BatchMode). Throws LaunchError naming
/// each host that does not, with ssh's own reason (refused, timed out, permission denied).
void preflight(const SshOptions& options, const std::vector<Host>& hosts);
/// After a failed run: the hosts that no longer answer over SSH (preflight with at most 5 s to connect), one per
/// line with ssh's reason, or empty when all answer. A rank's collective failing says only that a peer went quiet;
/// a host that went down, or whose network was cut, is the likely cause.
QString unreachable_hosts(const SshOptions& options, const std::vector<Host>& hosts);

/// How machine_launch_arguments passes `--env`'s variables: never their values in an argument list (anyone on
/// either machine could read them with `ps`), but on the remote launcher's standard input (SSH), or by name only,
/// each machine's launcher taking the values from its own environment (Slurm: the job exports them from a private
/// file it removes).
enum class EnvironmentPassing { on_stdin, by_name };

/// `spur launch` for one machine of `plan` (its ranks only, every setting as a flag, no configuration file or
/// history of its own, its ranks stopped when its standard input closes): what the SSH fan-out runs on each host
/// and `spur launch --slurm` on each node. `machine_rank` and `master_addr` are passed as given (a placeholder
/// the caller fills in, for Slurm).
QStringList machine_launch_arguments(const QString& spur, const LaunchPlan& plan, const LaunchOptions& launch,
                                     const QString& program, const QStringList& arguments, int grace_seconds,
                                     const QString& machine_rank, const QString& master_addr, bool progress_stream,
                                     EnvironmentPassing passing, int system_interval = 0, double system_since = 0);

/// The block the SSH fan-out writes to each remote `spur launch --env_on_stdin`: a "spur-env 1" line, one
/// "NAME=<base64 of the value's bytes>" line per variable, then "end".
QByteArray environment_block(const QList<QPair<QString, QString>>& environment);
/// Reads that block from `fd` (the standard input), a byte at a time so that nothing after it is consumed. Throws
/// LaunchError when it is malformed or has not ended within `timeout`.
QList<QPair<QString, QString>> read_environment_block(int fd, int timeout_ms);

/// One child per host: ssh running `spur launch` for that machine rank with every setting passed explicitly
/// (the hosts' own default configurations do not matter), stopping its ranks if the connection drops.
std::vector<RankSpec> fanout_children(const SshOptions& options, const std::vector<Host>& hosts, const LaunchPlan& plan,
                                      const LaunchOptions& launch, const QString& program, const QStringList& arguments,
                                      int grace_seconds);

}  // namespace spur::app
