// SPDX-License-Identifier: Apache-2.0
// Starting `spur launch` so that it outlives the program that asked (the Studio may close, the run goes on and is
// found again in the history). The launcher itself does all the work; runs/run_status.h stops a run.
#pragma once

#include <QProcessEnvironment>
#include <QString>

#include "launch/launch_request.h"

namespace spur::app {

struct DetachedLaunch {
  qint64 pid = 0;  // the launcher's: the run it records carries this pid
  QString error;   // why it did not start; empty when it did
};

/// The `spur` program: $SPUR_PROGRAM, else next to the running executable (a build tree or an installation), else on
/// PATH.
QString spur_program();
/// How a person types that program in a shell: "spur" when `spur` on PATH is the same file, else its full path (a
/// build tree's program, before it is installed or linked onto PATH).
QString spur_command(const QString& spur = spur_program());
/// `spur` arguments with each `--env NAME=VALUE` made `--env NAME` and its value put into `environment`, the
/// environment the program is started with: its argument list, which anyone on this machine can read, names the
/// variables only (`spur launch --env NAME` takes the value from its environment). Stops at "--".
void move_env_values(QStringList& arguments, QProcessEnvironment& environment);
/// Starts `spur launch` for `request` in a session of its own (a Ctrl-C meant for the caller's terminal does not
/// reach it). What the launcher says on stderr (a bad configuration, a failed rank) is appended to `log_file`.
DetachedLaunch launch_detached(const LaunchRequest& request, const QString& log_file,
                               const QProcessEnvironment& environment = QProcessEnvironment::systemEnvironment(),
                               const QString& spur = spur_program());
/// Starts `spur ARGUMENTS` (any spur command) in a session of its own, as launch_detached starts a launch, in
/// `working_directory` (empty: the caller's). Each `--env NAME=VALUE` is moved as move_env_values moves it, and in a
/// `spur sweep` command also those after its "--" (the flags of every launch). Its stderr, and its stdout when
/// `output_too`, are appended to `log_file`.
DetachedLaunch start_detached(QStringList arguments, const QString& working_directory, const QString& log_file,
                              const QProcessEnvironment& environment, const QString& spur, bool output_too);
/// Whether a process with this pid exists on this machine.
bool process_alive(qint64 pid);

}  // namespace spur::app
