// SPDX-License-Identifier: Apache-2.0
// SlurmScriptPreview: the sbatch script a launch request would submit, as `spur launch --slurm --dry_run` prints
// it, so that what the Studio shows is what the command line submits (one implementation: the launcher's own).
// Threads: create and call it on one thread with an event loop (the Studio's GUI thread); the dry run is a child
// process, so that thread never waits for it, and the answer arrives as a signal on it.
#pragma once

#include <QObject>
#include <QString>

#include <memory>

#include "launch/launch_request.h"

class QProcess;
class QTemporaryFile;

namespace spur::app {

class SlurmScriptPreview : public QObject {
  Q_OBJECT

 public:
  /// `spur`: the program to ask. Default: spur_program() (launch/detached_launch.h).
  explicit SlurmScriptPreview(QObject* parent = nullptr, QString spur = {});
  ~SlurmScriptPreview() override;

  /// Asks for the script of `request` (its flags must hold --slurm) with `config_yaml` as its configuration, written
  /// to a temporary file only its owner can read. An earlier question not yet answered is dropped (its process
  /// killed): only the latest is answered.
  void ask(const LaunchRequest& request, const QString& config_yaml);
  /// Whether a question is being worked on.
  bool busy() const;

 signals:
  /// The script as the dry run printed it (from its "#!" line), or why there is none: the launcher's own error,
  /// naming the flag or value at fault.
  void answered(const QString& script, const QString& error);

 private:
  void finish();

  QString spur_;
  std::unique_ptr<QTemporaryFile> config_;
  QProcess* process_ = nullptr;
  bool timed_out_ = false;  // the question's process was killed for taking too long
};

}  // namespace spur::app
