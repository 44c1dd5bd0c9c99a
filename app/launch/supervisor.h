// SPDX-License-Identifier: Apache-2.0
// Supervisor: one launch from its record in the run history to the report at its end, the same for every target.
// It creates the run's record (RunRecorder), holds signals while ranks run here, starts the ranks again after a
// failure (torchrun's --max_restarts), wires every line, message and system sample into the record, and ends with
// "recorded as run N" or a warning naming what the record misses. The local and SSH launches run their ranks
// through run(); the Slurm and SageMaker launches follow their job with line_hook() and poll_hook(). The `spur`
// commands in cli/ only turn flags into the plan and the options here.
//
// Threads: everything is called on the launcher's main thread (the recorder's writer thread is its own).
#pragma once

#include <QProcessEnvironment>
#include <QString>
#include <QStringList>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spur/history/records.h>

#include "launch/launch_plan.h"
#include "launch/local_launcher.h"

class QTextStream;

namespace spur::app {

class HeldSignals;
class RunRecorder;

struct SupervisorOptions {
  /// The run's record in the history. None: not recorded here (--no_history, a dry run, a SageMaker container, one
  /// machine of an SSH or Slurm run, whose launcher records elsewhere). Default: none.
  std::optional<history::Run> record;
  /// The `spur launch` arguments the record keeps as its command (with `cd` to this directory first), secrets'
  /// values redacted (launch/secrets.h): what a relaunch runs again. Default: none.
  QStringList command;
  /// The history file. Default: empty, history::default_history_path().
  std::string history_path;
  /// The launch's record key: only lines carrying it are records (stream_line.h); the rest is console text.
  /// Default: none.
  QString stream_key;
  /// Whether SIGINT, SIGTERM and SIGHUP are held (launch/signals.h) from now to the end: for ranks supervised
  /// here. A follower of a Slurm or SageMaker job counts them itself, so false there. Default: true.
  bool hold_signals = true;
  /// What the messages start with. Default: "spur launch".
  QString who = "spur launch";
  /// Files recorded with the run at the start (the configuration launched with). Default: none.
  std::vector<history::RunFile> files;
};

/// How supervised ranks ended.
struct Supervised {
  int code = 0;
  bool stopped = false;  // by the user: Ctrl-C, SIGTERM, SIGHUP
  QString failure;       // what failed, for the record ("after 2 restart(s): rank 1 ...")
  int restarts = 0;
};

class Supervisor {
 public:
  Supervisor(SupervisorOptions options, QTextStream& out, QTextStream& err);
  /// Finishes the record as failed if finish() was not called (an exception on the way).
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Whether the launch is being recorded (a history that cannot be written was warned about, and is not).
  bool recording() const;
  /// What the ranks need to record into the run themselves (SPUR_HISTORY, SPUR_RUN_ID); empty without a record.
  QProcessEnvironment environment() const;

  /// Runs `prepare(attempt)`'s plan (attempt 0 first) under `supervision` until it succeeds, is stopped, or failed
  /// `max_restarts` + 1 times; each attempt's ranks get SPUR_RESTART_COUNT and TORCHELASTIC_RESTART_COUNT. Into the
  /// record go each rank's lines (a machine's, by its label, when supervision.remote_children), the launcher's
  /// messages (one console line per line), and, unless supervision.on_sample is given, the system samples as
  /// system/ series whose steps count seconds since this supervisor was made.
  Supervised run(const std::function<LaunchPlan(int attempt)>& prepare, SupervisionOptions supervision,
                 int max_restarts);

  /// For a follower (Slurm, SageMaker): records a line of `host`; true when it was a record, kept off the console.
  std::function<bool(const QString& host, const QString& line)> line_hook();
  /// For a follower: writes what is queued after each of its polls.
  std::function<void()> poll_hook();
  /// Says `message` on the error stream and records it, one console line per line.
  void say(const QString& message);
  /// Records the end: finished (code 0), stopped, or failed with `detail`; then says where the record is ("recorded
  /// as run N (spur runs show N)") or warns what it misses. Returns `code`.
  int finish(int code, bool stopped, const QString& detail = {});

 private:
  /// The launcher's own message into the record, one console line per line (this machine's, rank -1).
  void record_message(const QString& message);

  SupervisorOptions options_;
  QTextStream& out_;
  QTextStream& err_;
  QString host_;                           // this machine's name, as the record's lines carry it
  std::unique_ptr<HeldSignals> held_;      // made before the recorder, so it outlives it
  std::unique_ptr<RunRecorder> recorder_;  // none without a record
  double since_ = 0;                       // the launch's start (wall seconds): the system/ series' clock
  bool finished_ = false;
};

/// One machine of an SSH or Slurm run, whose launcher records elsewhere: its system samples as the trackers' metric
/// records on `out`, carrying `stream_key`, steps counted in seconds from `since` (the run's start on the recording
/// machine); GPUs named by machine ("system/machine1/gpu0/power_w": each machine has a gpu0).
std::function<void(const std::vector<SystemValue>&)> samples_on_output(QTextStream& out, const QString& stream_key,
                                                                       int machine_rank, double since);

}  // namespace spur::app
