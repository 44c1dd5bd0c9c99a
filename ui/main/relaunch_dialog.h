// SPDX-License-Identifier: GPL-3.0-or-later
// RelaunchDialog: what Run > Relaunch asks before it launches a past run again: which run, the directory and the
// command that will run, and the new run's name to edit (the request already names it: the next free " (N)");
// and relaunch_request(), what launches a run of the table again.
// Threads: the GUI thread only. Both work from the runs already read (the table's model) and read nothing
// themselves.
#pragma once

#include <QDialog>
#include <QString>

#include "launch/launch_request.h"

class QLineEdit;

namespace spur::app {
class RunsModel;
}

namespace spur::studio {

/// What relaunches run `run` of `runs` as `name` (empty: the next free " (N)" of its name, past the names of the
/// runs in `runs`), into `request`, its configuration to be saved in `config_file`; an error instead when it cannot
/// be launched again.
QString relaunch_request(const app::RunsModel& runs, qint64 run, const QString& name, const QString& config_file,
                         app::LaunchRequest& request);

class RelaunchDialog : public QDialog {
  Q_OBJECT

 public:
  /// Asks about `request`, which launches run `run` (named `run_name` in the history) again. Object names:
  /// "relaunch_dialog", its fields "relaunch_command" (read-only) and "relaunch_name".
  RelaunchDialog(qint64 run, const QString& run_name, app::LaunchRequest request, QWidget* parent = nullptr);

  /// The request, with the name as edited (left blank: the name it had).
  app::LaunchRequest request() const;

 private:
  app::LaunchRequest request_;
  qsizetype name_at_;  // where the value of --run_name is in request_.flags; 0: not named
  QLineEdit* name_;
};

}  // namespace spur::studio
