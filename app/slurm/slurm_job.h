// SPDX-License-Identifier: Apache-2.0
// Slurm as a launch target: the sbatch script `spur launch --slurm` submits (one `spur launch` per node, started
// by srun, each running its node's ranks like the remote half of an SSH launch), the Slurm commands it runs
// (sbatch, squeue, scontrol, scancel: Slurm's own clients, with the user's SLURM_CONF), and the follower that
// streams every node's output ([node] [rankN] ...) and works out how the job ended: the failing rank's own exit
// code, not srun's 143 for the ranks it killed. Threads: everything here runs on the caller's thread.
#pragma once

#include <QString>
#include <QStringList>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

class QTextStream;

namespace spur::app {

/// A Slurm command that failed or is missing; the message names the command and quotes Slurm's answer.
class SlurmError : public std::runtime_error {
 public:
  explicit SlurmError(const QString& message) : std::runtime_error(message.toStdString()) {}
};

/// What the job asks Slurm for: `spur launch --slurm`'s flags.
struct SlurmRequest {
  QString job_name;         // --job_name; Default: "spur-" + the program's name
  QString partition;        // --partition; Default: the cluster's default partition
  int nodes = 1;            // --nodes; Default: the configuration's num_machines, else 1
  int ntasks_per_node = 1;  // --ntasks_per_node: ranks per node; Default: the configuration's processes per machine
  QString time;             // --time (Slurm's formats: "30", "1:00:00", "2-00:00:00"); Default: the partition's
  QString account;          // --account
  QString qos;              // --qos
  QString gres;             // --gres (e.g. "gpu:4": per node)
  QStringList extra;        // --slurm_args "...": more #SBATCH options, each "--name" or "--name=value"
  /// Where the script, each node's output and exit code go: visible from every node. (The ranks start where
  /// sbatch runs: this process's directory.)
  QString directory;
};

/// Spur's Slurm settings file (Accelerate's loader refuses keys it does not know, so they live beside its
/// configuration): `$XDG_CONFIG_HOME/spur/slurm.yaml` unless `--slurm_config F`. Keys: partition, nodes,
/// ntasks_per_node, time, account, qos, gres, slurm_args, slurm_dir, job_name; each a plain scalar.
QString default_slurm_file();
/// Reads `path` over `request` (a missing default file changes nothing). SlurmError naming file:line and key for
/// an unknown key, a value that is not a plain scalar, or a count that is not a positive integer.
/// `slurm_dir` lands in `request.directory` as given (the caller places the job's own folder under it).
SlurmRequest read_slurm_file(const QString& path, SlurmRequest request);
/// The settings as `spur launch` flags (--partition P ...), for the run's recorded command line.
QStringList slurm_flags(const SlurmRequest& request);
/// The settings as the file holds them (what `spur runs config ID --slurm` prints; `directory` as slurm_dir).
QString slurm_yaml(const SlurmRequest& request);

/// The batch script for `request`: one task per node runs `node_command` (a `spur launch` for that node whose
/// arguments may hold "@MACHINE_RANK@", "@MASTER_ADDR@" (the first node) and "@MASTER_PORT@" (derived from the
/// job id and the attempt), filled in per node), its output appended to DIRECTORY/node-<name>.out and its exit
/// code in DIRECTORY/node-<name>.exit. A failed srun step runs again up to `max_restarts` times, with
/// SPUR_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT set for it.
QString sbatch_script(const SlurmRequest& request, const QStringList& node_command, int max_restarts = 0);
/// What job.sh reads from the job's folder before it starts the nodes (and then removes): the run's --env variables
/// as shell assignments, each value single-quoted byte for byte. Written 0600 beside job.sh, never into it.
QByteArray environment_file(const QList<QPair<QString, QString>>& environment);

/// Checks what can be checked before submitting: each --slurm_args word is an option, the names are sane.
/// Throws SlurmError naming the value.
void check_request(const SlurmRequest& request);
/// --slurm_args' text as sbatch options: split at any run of white space (spaces, tabs, line breaks), as the
/// #SBATCH lines they become are read.
QStringList split_slurm_args(const QString& text);

/// Slurm's client commands: from $SPUR_SLURM_BIN (a directory) if set, else PATH.
class SlurmCli {
 public:
  /// Throws SlurmError naming the command when it is not installed.
  QString program(const QString& name) const;
  /// Runs `name arguments`; returns its standard output, or throws SlurmError with its own error text.
  QString run(const QString& name, const QStringList& arguments, int timeout_ms = 60000) const;
};

/// `sbatch --parsable script`: the job id. Throws SlurmError with sbatch's reason when Slurm refuses the job.
QString submit(const SlurmCli& slurm, const QString& script_path);

/// `scontrol show job -o ID` as key=value pairs (JobState, ExitCode, NodeList, StdOut...); empty once Slurm has
/// forgotten the job.
std::map<QString, QString> job_fields(const SlurmCli& slurm, const QString& job);

/// How a job ended, from the nodes' exit codes (node name -> code) and Slurm's JobState: the first node whose
/// code is its own (not 0, and not 143: srun's SIGTERM to the survivors) gives the exit code.
struct SlurmOutcome {
  int exit_code = 0;
  QString status;  // finished, failed, stopped
  QString detail;  // the failure, as the history records it
};
SlurmOutcome job_outcome(const std::map<QString, int>& node_codes, const QString& job_state,
                         const std::map<QString, QString>& node_failures);

struct SlurmFollowOptions {
  /// Between squeue calls. Default: 1 s.
  std::chrono::milliseconds poll{1000};
  /// What status lines start with ("spur launch", "spur slurm").
  QString who = "spur";
  /// Sees every output line of every node (node name, line); returning true keeps it off the console.
  std::function<bool(const QString& node, const QString& line)> on_line;
  /// Called after each poll (the run history flushes there).
  std::function<void()> after_poll;
};

/// Follows job `job`, whose files are in `directory`, to its end: state changes, every node's output as
/// "[node] [rankN] ..." lines; Ctrl-C or SIGTERM cancels the job (scancel) and a second one leaves it.
class SlurmFollower {
 public:
  SlurmFollower(const SlurmCli& slurm, QString job, QString directory, SlurmFollowOptions options, QTextStream& out,
                QTextStream& err);
  /// 0 when every node finished; the failing rank's code; 128 + signal when cancelled from here.
  int run();
  const SlurmOutcome& outcome() const { return outcome_; }

 private:
  void drain(bool final);

  const SlurmCli& slurm_;
  QString job_, directory_;
  SlurmFollowOptions options_;
  QTextStream& out_;
  QTextStream& err_;
  struct Tail {
    qint64 offset = 0;
    QByteArray partial;
  };
  std::map<QString, Tail> tails_;             // file name -> how far it was read
  std::map<QString, QString> node_failures_;  // node -> its launcher's failure line
  SlurmOutcome outcome_;
};

}  // namespace spur::app
