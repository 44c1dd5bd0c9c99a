// SPDX-License-Identifier: Apache-2.0
// A sweep's record and its controller. The record (SweepState) is a JSON file per sweep beside the run history
// (<history folder>/sweeps/<id>.json, written whole or not at all), so `spur sweep list/show/stop/resume` read it
// from any shell. The controller (run_sweep) launches each run as `spur launch [launch flags] COMMAND` with the
// sweep's tags, `parallel` at a time, follows their exit, applies Hyperband to the metric in the history, and on
// SIGINT/SIGTERM (Ctrl-C, or `spur sweep stop`) stops every run it started and leaves the rest for `resume`.
//
// Threads: run_sweep runs on the calling (main) thread with its own event loop; QProcess children only.
#pragma once

#include <QString>
#include <QStringList>
#include <QTextStream>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sweep/sweep_spec.h"

namespace spur::app {

struct SweepRunState {
  int index = 0;  // 1-based, the order the sweep launches in
  SweepPoint point;
  std::string status = "pending";  // pending, running, finished, failed, stopped (by Ctrl-C: resume relaunches
                                   // it), early_terminated (by Hyperband)
  int64_t run_id = 0;              // the run in the history (0: not known yet)
  std::optional<int> exit_code;
};

struct SweepState {
  std::string id;  // 8 letters and digits, as W&B's sweep ids
  std::string name;
  std::string file;  // the sweep file as given
  std::string text;  // its text when the sweep began (resume runs this, not the file as it is now)
  std::string method;
  uint64_t seed = 0;
  int parallel = 1;
  QStringList launch_flags;        // given to every `spur launch` before the command
  std::string status = "running";  // running, finished, stopped, failed
  int64_t pid = 0;                 // the controller, while running
  int64_t pid_start = 0;           // its start time (/proc/PID/stat): a pid used again is not taken for it
  std::string host;                // the machine it runs on
  double created = 0;
  std::vector<SweepRunState> runs;

  /// Counts of runs by status.
  int count(const std::string& which) const;
};

/// The folder of the sweep records: beside the run history ($SPUR_HISTORY's folder, else the default's).
std::string sweeps_folder();
/// Writes the record whole (a temporary file, then rename). SweepError naming the file when it cannot.
void save_sweep(const SweepState& state);
/// The record of sweep `id` (or the only one whose id starts with it). SweepError when there is none.
SweepState load_sweep(const std::string& id);
/// Every record, newest first; a record that cannot be read is left out and said in `problems`.
std::vector<SweepState> list_sweeps(std::vector<std::string>* problems = nullptr);
/// A new sweep id.
std::string new_sweep_id();
/// Whether the controller recorded in `state` is alive on this machine (the same process: its pid and start time).
bool controller_alive(const SweepState& state);

/// Runs the sweep's pending runs: `spur_program` is the `spur` to launch them with. One controller per sweep (a lock
/// file beside its record; SweepError when another holds it). Returns the exit status: 0 when some run finished, 1
/// when every run failed (or the first three did, as W&B's agent stops), 130 when stopped by a signal (a second
/// signal sends the runs SIGTERM).
int run_sweep(SweepState& state, const SweepSpec& spec, const QString& spur_program, QTextStream& out,
              QTextStream& err);

}  // namespace spur::app
