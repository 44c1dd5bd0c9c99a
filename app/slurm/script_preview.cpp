// SPDX-License-Identifier: Apache-2.0
// The sbatch script preview; see script_preview.h.
#include "slurm/script_preview.h"

#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryFile>
#include <QTimer>

#include "launch/detached_launch.h"

namespace spur::app {

SlurmScriptPreview::SlurmScriptPreview(QObject* parent, QString spur)
    : QObject(parent), spur_(spur.isEmpty() ? spur_program() : std::move(spur)) {}

SlurmScriptPreview::~SlurmScriptPreview() {
  if (process_) {
    process_->disconnect(this);
    process_->kill();
    process_->waitForFinished(1000);
  }
}

bool SlurmScriptPreview::busy() const { return process_ != nullptr; }

void SlurmScriptPreview::ask(const LaunchRequest& request, const QString& config_yaml) {
  if (process_) {
    // Dropped without waiting (the caller's thread paints): it goes once it has ended.
    QProcess* old = process_;
    process_ = nullptr;
    old->disconnect(this);
    connect(old, &QProcess::finished, old, &QObject::deleteLater);
    connect(old, &QProcess::errorOccurred, old, [old](QProcess::ProcessError error) {
      if (error == QProcess::FailedToStart) old->deleteLater();
    });
    old->kill();
  }
  timed_out_ = false;
  if (!request.flags.contains("--slurm")) {
    emit answered({}, "not a Slurm launch (no --slurm)");
    return;
  }
  // A new file for each question: the one a killed dry run was reading stays its own until it is gone.
  config_ = std::make_unique<QTemporaryFile>(QDir::temp().filePath("spur-preview-XXXXXX.yaml"));
  if (!config_->open() || config_->write(config_yaml.toUtf8()) < 0 || !config_->flush()) {
    emit answered({}, "cannot write a temporary configuration: " + config_->errorString());
    return;
  }
  LaunchRequest dry = request;
  dry.config_file = config_->fileName();
  dry.flags << "--dry_run";
  if (dry.program.isEmpty()) dry.program = "PROGRAM";
  QString directory = request.working_directory;
  if (directory.isEmpty() || !QFileInfo(directory).isDir()) directory = QDir::currentPath();

  process_ = new QProcess(this);
  process_->setWorkingDirectory(directory);
  process_->setStandardInputFile(QProcess::nullDevice());
  connect(process_, &QProcess::finished, this, &SlurmScriptPreview::finish);
  connect(process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError error) {
    if (error == QProcess::FailedToStart) finish();
  });
  // A dry run writes nothing and asks Slurm nothing: it answers in well under a second. Ten is a hang.
  QTimer::singleShot(10000, process_, [this, process = process_] {
    if (process != process_) return;
    timed_out_ = true;
    process->kill();
  });
  // The run's --env values go in the dry run's environment, not its argument list (which anyone here can read).
  QStringList arguments = dry.spur_arguments();
  QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
  move_env_values(arguments, environment);
  process_->setProcessEnvironment(environment);
  process_->start(spur_, arguments);
}

void SlurmScriptPreview::finish() {
  QProcess* process = process_;
  if (!process) return;
  process_ = nullptr;
  process->deleteLater();
  const QString output = QString::fromUtf8(process->readAllStandardOutput());
  const QString errors = QString::fromUtf8(process->readAllStandardError()).trimmed();
  if (process->error() == QProcess::FailedToStart) {
    emit answered({}, "cannot run " + spur_ + " (" + process->errorString() + "): install Spur, or set SPUR_PROGRAM");
  } else if (timed_out_) {
    emit answered({}, spur_ + " launch --dry_run did not answer within 10 s");
  } else if (process->exitStatus() != QProcess::NormalExit) {
    emit answered({}, spur_ + " launch --dry_run crashed: " + (errors.isEmpty() ? process->errorString() : errors));
  } else if (process->exitCode() != 0) {
    emit answered({}, errors.isEmpty() ? QString("spur launch --dry_run failed (exit code %1)").arg(process->exitCode())
                                       : errors);
  } else {
    // The dry run's first line says where the script would be written ("Slurm job ...: ... (written to ...):");
    // the script itself names its folder, and a copy of it should be only the script.
    const qsizetype first_line = output.startsWith("Slurm job ") ? output.indexOf('\n') : -1;
    emit answered(first_line >= 0 ? output.mid(first_line + 1) : output, {});
  }
}

}  // namespace spur::app
