// SPDX-License-Identifier: Apache-2.0
// Detached launches; see detached_launch.h.
#include "launch/detached_launch.h"

#include <signal.h>
#include <unistd.h>

#include <QFile>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>

#include <cerrno>
#include <cstring>

#include "config/run_config.h"
#include "launch/companion.h"

namespace spur::app {
QString spur_program() {
  const QString found = find_companion("SPUR_PROGRAM", {"spur"}, "spur");
  return found.isEmpty() ? QString("spur") : found;  // launch_detached says it cannot be found
}

QString spur_command(const QString& spur) {
  const QString resolved = spur.contains('/') ? spur : QStandardPaths::findExecutable(spur);
  const QString on_path = QStandardPaths::findExecutable("spur");
  if (resolved.isEmpty() ||
      (!on_path.isEmpty() && QFileInfo(on_path).canonicalFilePath() == QFileInfo(resolved).canonicalFilePath())) {
    return "spur";
  }
  return QFileInfo(resolved).absoluteFilePath();
}

void move_env_values(QStringList& arguments, QProcessEnvironment& environment) {
  for (qsizetype i = 0; i < arguments.size(); ++i) {
    QString& word = arguments[i];
    if (word == "--") break;
    QString* assignment = nullptr;
    QString prefix;
    if (word == "--env" && i + 1 < arguments.size()) {
      assignment = &arguments[++i];
    } else if (word.startsWith("--env=")) {
      assignment = &word;
      prefix = "--env=";
    }
    if (!assignment) continue;
    const QString text = assignment->mid(prefix.size());
    const qsizetype eq = text.indexOf('=');
    if (eq <= 0) continue;
    environment.insert(text.left(eq), text.mid(eq + 1));
    *assignment = prefix + text.left(eq);
  }
}

DetachedLaunch start_detached(QStringList arguments, const QString& working_directory, const QString& log_file,
                              const QProcessEnvironment& environment, const QString& spur, bool output_too) {
  DetachedLaunch result;
  if (!working_directory.isEmpty() && !QFileInfo(working_directory).isDir()) {
    result.error = "the working directory " + working_directory + " does not exist";
    return result;
  }
  const QString resolved = spur.contains('/') ? spur : QStandardPaths::findExecutable(spur);
  if (resolved.isEmpty() || !QFileInfo(resolved).isExecutable()) {
    result.error = "cannot find the spur command (" + spur + "): install Spur, or set SPUR_PROGRAM";
    return result;
  }
  if (!log_file.isEmpty()) {
    // The launcher's account can quote configurations and commands: the log, and the folders made for it, are its
    // owner's only (issue 12).
    if (!QFileInfo::exists(log_file)) {
      try {
        write_private_file(log_file.toStdString(), {});
      } catch (const ConfigError& e) {
        result.error = QString::fromUtf8(e.what());
        return result;
      }
    }
    QFile::setPermissions(log_file, QFileDevice::ReadOwner | QFileDevice::WriteOwner);
  }
  QProcess process;
  // `--env NAME=VALUE` would put the value in the launcher's argument list, which anyone on this machine can read:
  // the value goes into its environment instead, and the flag names the variable only. A sweep's launch flags come
  // after its "--": moved there too.
  QProcessEnvironment launcher_environment = environment;
  move_env_values(arguments, launcher_environment);
  if (arguments.value(0) == "sweep") {
    if (const qsizetype dash = arguments.indexOf("--"); dash >= 0) {
      QStringList flags = arguments.mid(dash + 1);
      move_env_values(flags, launcher_environment);
      arguments = arguments.mid(0, dash + 1) + flags;
    }
  }
  // setsid (util-linux): the launcher leaves the caller's session, so closing the caller's terminal or pressing
  // Ctrl-C there does not stop the run. It execs spur in place, so the pid is the launcher's.
  const QString setsid = QStandardPaths::findExecutable("setsid");
  if (setsid.isEmpty()) {
    process.setProgram(resolved);
    process.setArguments(arguments);
  } else {
    process.setProgram(setsid);
    process.setArguments(QStringList{resolved} + arguments);
  }
  if (!working_directory.isEmpty()) process.setWorkingDirectory(working_directory);
  process.setProcessEnvironment(launcher_environment);
  process.setStandardInputFile(QProcess::nullDevice());
  // Ranks' lines are in the history; the launcher's own account (a bad configuration, a failed rank) is on
  // stderr, kept in the log.
  process.setStandardOutputFile(output_too && !log_file.isEmpty() ? log_file : QProcess::nullDevice(),
                                QIODevice::Append);
  process.setStandardErrorFile(log_file.isEmpty() ? QProcess::nullDevice() : log_file, QIODevice::Append);
  if (!process.startDetached(&result.pid)) {
    result.error = "cannot start " + spur + ": " + process.errorString();
    result.pid = 0;
  }
  return result;
}

DetachedLaunch launch_detached(const LaunchRequest& request, const QString& log_file,
                               const QProcessEnvironment& environment, const QString& spur) {
  if (request.program.isEmpty()) return {0, "no program to launch"};
  return start_detached(request.spur_arguments(), request.working_directory, log_file, environment, spur, false);
}

bool process_alive(qint64 pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

}  // namespace spur::app
