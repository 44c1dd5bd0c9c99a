// SPDX-License-Identifier: Apache-2.0
// Launches until their run shows; see pending_launches.h.
#include "studio/pending_launches.h"

#include <QDateTime>
#include <QDir>
#include <QFile>

#include <algorithm>

#include "launch/detached_launch.h"
#include "runs/run_status.h"

namespace spur::app {
namespace {

QString last_lines(const QString& file, int count) {
  QFile in(file);
  if (!in.open(QIODevice::ReadOnly)) return {};
  QStringList lines = QString::fromLocal8Bit(in.readAll()).split('\n', Qt::SkipEmptyParts);
  return lines.mid(std::max<qsizetype>(0, lines.size() - count)).join('\n');
}

}  // namespace

PendingLaunches::PendingLaunches(QString history, QString log_directory)
    : history_(std::move(history)), log_directory_(std::move(log_directory)) {}

QString PendingLaunches::launch(const LaunchRequest& request, qint64 newest_run, QProcessEnvironment environment) {
  const QString log = QDir(log_directory_)
                          .filePath(QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss-zzz") +
                                    QString("-%1.log").arg(pending_.size()));
  environment.insert("SPUR_HISTORY", history_);  // the run is recorded where the caller looks
  const auto started = launch_detached(request, log, environment);
  if (!started.error.isEmpty()) return started.error;
  pending_.push_back({started.pid, newest_run, log, request.command_line(), false});
  return {};
}

std::vector<PendingLaunches::Outcome> PendingLaunches::settle(const std::vector<history::Run>& runs) {
  std::vector<Outcome> outcomes;
  const QString here = local_host_name();
  for (auto it = pending_.begin(); it != pending_.end();) {
    const auto found = std::find_if(runs.rbegin(), runs.rend(), [&](const history::Run& run) {
      return run.id > it->newest_before && run.pid == it->pid && QString::fromStdString(run.host) == here;
    });
    if (found != runs.rend()) {
      QFile::remove(it->log);  // from here on the history has the run's account
      outcomes.push_back({found->id, it->command, {}});
      it = pending_.erase(it);
    } else if (!process_alive(it->pid) && it->ended) {
      // Gone before recording a run: a bad configuration or program, said in its output.
      outcomes.push_back({0, it->command, last_lines(it->log, 15)});
      it = pending_.erase(it);
    } else {
      it->ended = !process_alive(it->pid);
      ++it;
    }
  }
  return outcomes;
}

}  // namespace spur::app
