// SPDX-License-Identifier: Apache-2.0
// PendingLaunches: the runs the Studio launched (a detached `spur launch`, which goes on if the Studio closes, or a
// sweep's `spur sweep run`),
// from the launch until the run they record shows in the history, or until their launcher ends without recording
// one (a bad configuration, a program that does not exist), when the end of its output says why. Each launch has a
// log of its own under the given folder (its owner's only), removed once the history has the run's account.
// Threads: one thread (the Studio's GUI thread: starting a process and looking at /proc, no history reads; the
// runs it looks among are those the reader thread read).
#pragma once

#include <QProcessEnvironment>
#include <QString>

#include <vector>

#include <spur/history/records.h>

#include "launch/launch_request.h"
#include "runs/remote_history.h"
#include "sweep/sweep_form.h"

namespace spur::app {

/// `request` (a run's relaunch: its program and folder are on the machine of the history at `address`) as this
/// machine starts it: `spur launch --on HOST[:PORT] --on_dir DIR --history PATH --detach`, with `options`' ssh
/// config and remote spur, run here in the home folder. The run is recorded there; its launcher here prints the
/// run's id ("spur launch: run N (...) runs on HOST, detached"), which is how PendingLaunches settles it.
LaunchRequest launched_from_here(LaunchRequest request, const HistoryAddress& address, const RemoteOptions& options);

class PendingLaunches {
 public:
  /// `history`: where the launches record their runs (SPUR_HISTORY); `log_directory`: where their logs go.
  PendingLaunches(QString history, QString log_directory);

  /// Starts `request`; `newest_run` is the newest run id read from the history now (the run it records comes
  /// after it). Returns why it could not start, or empty.
  QString launch(const LaunchRequest& request, qint64 newest_run,
                 QProcessEnvironment environment = QProcessEnvironment::systemEnvironment());

  /// Starts `sweep` (its controller, detached: sweep_detached); settled when its first run shows (the run tagged
  /// with the sweep's id, which the controller says first), or when the controller ends without one.
  QString launch_sweep(const SweepLaunch& sweep, qint64 newest_run,
                       const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment());

  struct Outcome {
    qint64 run = 0;         // the run the launch recorded; 0: its launcher ended without one
    QString command;        // the launch's command line
    QString output;         // when it ended without a run: the last 15 lines of its output (empty: it said nothing)
    QString there;          // a run started on another machine (a target file's on:): that machine's history, ssh://...
    QString sweep;          // a sweep's launch: its id (its runs are tagged sweep:ID), once its controller said it
    bool is_sweep = false;  // a sweep's launch (launch_sweep)
  };
  /// What became of the launches, given the runs now read (the new ones among them): each launch is reported once,
  /// when its run is among `runs` (created after the launch, by its launcher's pid, on this machine: pids are
  /// reused; for a launch on another machine, launched_from_here, the run its launcher named) or when its launcher
  /// has ended without one: seen ended at two calls in a row, so that a run recorded just before its launcher
  /// ended, after the runs of the first call were read, is found in the second's. A launch of a configuration
  /// whose target file sends it to another machine (on:) records its run in that machine's history: reported as
  /// soon as its launcher names it, with `there` (the caller opens that history).
  std::vector<Outcome> settle(const std::vector<history::Run>& runs);
  bool empty() const { return pending_.empty(); }

 private:
  struct Pending {
    qint64 pid;
    qint64 newest_before;
    QString log;
    QString command;
    bool ended = false;  // seen ended at the last call
    bool sweep = false;  // a sweep's controller, not a launcher
  };
  QString history_;
  QString log_directory_;
  std::vector<Pending> pending_;
};

}  // namespace spur::app
