// SPDX-License-Identifier: Apache-2.0
// Launches until their run shows; see pending_launches.h.
#include "studio/pending_launches.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QRegularExpression>

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

// The run a `spur launch --on ...` said it started there (0: none said yet), and the history it is in.
qint64 run_started_there(const QString& log, QString* history = nullptr) {
  static const QRegularExpression said(
      R"(^spur launch: run (\d+) \(.*\) runs on \S+, detached; follow it again with: .* --history (ssh://\S+))",
      QRegularExpression::MultilineOption);
  QFile in(log);
  if (!in.open(QIODevice::ReadOnly)) return 0;
  const auto match = said.match(QString::fromLocal8Bit(in.read(qint64{64} * 1024)));  // said early, before the console
  if (!match.hasMatch()) return 0;
  if (history) *history = match.captured(2);
  return match.captured(1).toLongLong();
}

// The id a sweep's controller said it runs ("spur sweep ID (NAME): ..."), or empty.
QString sweep_started(const QString& log) {
  static const QRegularExpression said(R"(^spur sweep (\w+) \()", QRegularExpression::MultilineOption);
  QFile in(log);
  if (!in.open(QIODevice::ReadOnly)) return {};
  return said.match(QString::fromLocal8Bit(in.read(qint64{64} * 1024))).captured(1);
}

}  // namespace

LaunchRequest launched_from_here(LaunchRequest request, const HistoryAddress& address, const RemoteOptions& options) {
  QString on = address.destination();
  if (address.port > 0) on += QString(":%1").arg(address.port);
  QStringList flags{"--on", on};
  if (!request.working_directory.isEmpty()) flags << "--on_dir" << request.working_directory;
  if (!options.ssh_config.isEmpty()) flags << "--ssh_config" << options.ssh_config;
  if (!options.remote_spur.isEmpty()) flags << "--remote_spur" << options.remote_spur;
  flags << "--detach";
  request.flags = flags + request.flags;
  request.history = address.path;  // as that machine's serve is given it; empty: that machine's default
  request.working_directory = QDir::homePath();
  return request;
}

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

QString PendingLaunches::launch_sweep(const SweepLaunch& sweep, qint64 newest_run,
                                      const QProcessEnvironment& environment) {
  const QString log = QDir(log_directory_)
                          .filePath(QDateTime::currentDateTime().toString("yyyyMMdd-HHmmss-zzz") +
                                    QString("-%1-sweep.log").arg(pending_.size()));
  SweepLaunch into_this = sweep;
  into_this.history = history_;  // its runs are recorded where the caller looks
  const auto started = sweep_detached(into_this, log, environment);
  if (!started.error.isEmpty()) return started.error;
  // The command is said on failure: a secret's value is not in it.
  pending_.push_back({started.pid, newest_run, log, sweep.shown().command_line(), false, true});
  return {};
}

std::vector<PendingLaunches::Outcome> PendingLaunches::settle(const std::vector<history::Run>& runs) {
  std::vector<Outcome> outcomes;
  const QString here = local_host_name();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->sweep) {
      const QString id = sweep_started(it->log);
      const std::string tag = "sweep:" + id.toStdString();
      const auto first = std::find_if(runs.begin(), runs.end(), [&](const history::Run& run) {
        return !id.isEmpty() && run.id > it->newest_before &&
               std::find(run.tags.begin(), run.tags.end(), tag) != run.tags.end();
      });
      if (first != runs.end()) {
        outcomes.push_back({first->id, it->command, {}, {}, id, true});
        QFile::remove(it->log);  // the controller goes on (its output unread); the history has the runs' account
        it = pending_.erase(it);
      } else if (!process_alive(it->pid) && it->ended) {
        outcomes.push_back({0, it->command, last_lines(it->log, 15), {}, id, true});
        it = pending_.erase(it);
      } else {
        it->ended = !process_alive(it->pid);
        ++it;
      }
      continue;
    }
    const auto found = std::find_if(runs.rbegin(), runs.rend(), [&](const history::Run& run) {
      return run.id > it->newest_before && run.pid == it->pid && QString::fromStdString(run.host) == here;
    });
    QString history;
    const qint64 there = run_started_there(it->log, &history);
    const bool into_this = history == history_ || HistoryAddress::parse(history_).has_value();
    const bool there_shown =
        there > 0 && std::any_of(runs.begin(), runs.end(), [&](const history::Run& run) { return run.id == there; });
    if (found != runs.rend() || there_shown) {
      QFile::remove(it->log);  // from here on the history has the run's account
      outcomes.push_back({found != runs.rend() ? found->id : there, it->command, {}, {}});
      it = pending_.erase(it);
    } else if (there > 0 && !into_this) {
      // Started on another machine, into its history (its launcher here follows it, its log the console).
      outcomes.push_back({there, it->command, {}, history});
      it = pending_.erase(it);
    } else if (there > 0) {
      ++it;  // started there, into this history: shown once it is read again
    } else if (!process_alive(it->pid) && it->ended) {
      // Gone before recording a run: a bad configuration or program, said in its output.
      outcomes.push_back({0, it->command, last_lines(it->log, 15), {}});
      it = pending_.erase(it);
    } else {
      it->ended = !process_alive(it->pid);
      ++it;
    }
  }
  return outcomes;
}

}  // namespace spur::app
