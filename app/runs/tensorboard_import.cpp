// SPDX-License-Identifier: Apache-2.0
// Importing TensorBoard runs; see tensorboard_import.h. Each file is read whole (a million scalars are about 40 MB
// of records), never mapped (a mapping of a file that shrinks under it ends the process with SIGBUS).
#include "runs/tensorboard_import.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <stdexcept>

#include <spur/history/writer.h>

#include "launch/launch_request.h"
#include "runs/run_status.h"
#include <spur/core/tensorboard_reader.h>

namespace spur::app {
namespace {

bool is_event_file(const QFileInfo& file) { return file.fileName().contains("tfevents") && file.isFile(); }

// The event files of one run folder (or the one file asked for), in name order.
QStringList event_files(const QString& directory, const QString& only_file) {
  if (!only_file.isEmpty()) return {only_file};
  QStringList files;
  const auto entries = QDir(directory).entryInfoList(QDir::Files | QDir::NoDotAndDotDot, QDir::Name);
  for (const auto& entry : entries) {
    if (is_event_file(entry)) files << entry.absoluteFilePath();
  }
  return files;
}

tensorboard::RunEvents read_run(const QStringList& files) {
  tensorboard::EventReader reader;
  for (const auto& name : files) {
    QFile file(name);
    if (!file.open(QIODevice::ReadOnly)) {
      throw tensorboard::EventFileError(name.toStdString() + ": cannot be read: " + file.errorString().toStdString());
    }
    // Read, not mapped: a mapped file that shrinks while it is parsed (a writer truncating it, a full disk) kills
    // the process with SIGBUS; read() returns what is there. A file that grows (a run still writing) is read up
    // to where it was; one that is shorter than it was a moment ago is named.
    const qint64 size = file.size();
    if (size == 0) continue;  // a writer that opened its file and wrote nothing yet
    const QByteArray all = file.read(size);
    if (all.size() < size) {
      throw tensorboard::EventFileError(name.toStdString() + ": changed while it was read (" + std::to_string(size) +
                                        " bytes when opened, " + std::to_string(all.size()) +
                                        " could be read): import it again when its writer is done");
    }
    reader.add_file(std::string_view(all.constData(), static_cast<std::size_t>(all.size())), name.toStdString());
  }
  return reader.events();
}

QString hex(uint64_t value) { return QString("%1").arg(value, 16, 16, QChar('0')); }

}  // namespace

QStringList tensorboard_run_directories(const QString& path) {
  const QFileInfo root(path);
  if (!root.exists()) throw std::invalid_argument(path.toStdString() + ": no such file or directory");
  if (root.isFile()) {
    if (!root.fileName().contains("tfevents")) {
      throw std::invalid_argument(path.toStdString() +
                                  ": not a TensorBoard event file (their names hold \"tfevents\")");
    }
    return {root.absolutePath()};
  }
  if (!root.isDir()) throw std::invalid_argument(path.toStdString() + ": not a folder or an event file");
  QStringList directories;
  auto add_if_run = [&directories](const QString& directory) {
    for (const auto& entry : QDir(directory).entryInfoList(QDir::Files)) {
      if (is_event_file(entry)) {
        directories << QDir(directory).absolutePath();
        return;
      }
    }
  };
  add_if_run(root.absoluteFilePath());
  QDirIterator below(root.absoluteFilePath(), QDir::Dirs | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
  while (below.hasNext()) add_if_run(below.next());
  std::sort(directories.begin(), directories.end());
  if (directories.isEmpty()) {
    throw std::invalid_argument(path.toStdString() +
                                ": no TensorBoard event files (names holding \"tfevents\") in it or below it");
  }
  return directories;
}

std::vector<ImportedRun> import_tensorboard(const std::string& history_path, const QString& path,
                                            const TensorBoardImportOptions& options,
                                            const std::function<void(const ImportedRun&)>& done) {
  const QStringList directories = tensorboard_run_directories(path);
  const QFileInfo root(path);
  const QString only_file = root.isFile() ? root.absoluteFilePath() : QString();
  const QString base = root.isFile() ? root.absolutePath() : root.absoluteFilePath();
  const QString project = !options.project.isEmpty() ? options.project : QFileInfo(base).fileName();
  history::HistoryWriter writer(history_path);
  std::vector<ImportedRun> results;
  for (const auto& directory : directories) {
    if (!options.only.isEmpty() && !options.only.contains(directory)) continue;
    if (options.cancelled && options.cancelled()) break;
    ImportedRun result;
    result.directory = directory;
    const QString below = QDir(base).relativeFilePath(directory);
    result.name = below == "." ? QFileInfo(directory).fileName() : below;
    try {
      const auto events = read_run(event_files(directory, only_file));
      if (events.records == 0) {  // only empty files: writers that have just opened them
        result.empty = true;
        if (done) done(result);
        results.push_back(std::move(result));
        continue;
      }
      history::Run run;
      run.name = result.name.toStdString();
      run.project = project.toStdString();
      run.status = events.session_status == 2 ? "failed" : "finished";
      run.target = "tensorboard";
      run.command =
          "spur runs import " + shell_quote(QStringList{only_file.isEmpty() ? directory : only_file}).toStdString();
      QJsonObject params;
      for (const auto& hparam : events.hparams) {
        const QString name = QString::fromStdString(hparam.name);
        if (const auto* number = std::get_if<double>(&hparam.value)) params.insert(name, *number);
        else if (const auto* text = std::get_if<std::string>(&hparam.value))
          params.insert(name, QString::fromStdString(*text));
        else params.insert(name, std::get<bool>(hparam.value));
      }
      run.params = QJsonDocument(params).toJson(QJsonDocument::Compact).toStdString();
      std::vector<history::MetricAppend> metrics;
      metrics.reserve(events.scalars.size());
      int64_t last_step = -1;
      for (const auto& [tag, points] : events.scalars) {
        history::MetricAppend metric{tag, {}};
        metric.points.reserve(points.size());
        for (const auto& point : points) {
          metric.points.push_back({point.step, point.value, point.wall});
          last_step = std::max(last_step, point.step);
        }
        metrics.push_back(std::move(metric));
      }
      if (last_step >= 0) run.total_steps = last_step;
      // The run's span is its scalars' (a writer's first event carries the time the file was opened, and
      // add_hparams stamps the time it was called); a run without scalars spans its events.
      double first = 0, last = 0;
      for (const auto& [tag, points] : events.scalars) {
        for (const auto& point : points) {
          if (!plausible_time(point.wall)) continue;  // NaN, 0, or past year 9999
          if (first == 0 || point.wall < first) first = point.wall;
          last = std::max(last, point.wall);
        }
      }
      if (first == 0) {
        first = events.first_wall;
        last = events.last_wall;
      }
      run.created = run.started = first;
      run.ended = last;
      const std::string origin =
          "imported from TensorBoard event files (fingerprint " + hex(events.fingerprint).toStdString() + ")";
      const auto id = writer.import_run(run, metrics, origin, options.again);
      if (id) {
        result.run = *id;
      } else {
        result.earlier = writer.last_imported_as();
        result.changed = writer.last_import_changed();
      }
      result.points = events.scalar_points;
      result.series = events.scalars.size();
      result.hparams = events.hparams.size();
      result.other_values = events.other_values;
    } catch (const tensorboard::EventFileError& bad) {
      result.error = QString::fromStdString(bad.what()) + "; nothing of this run was imported";
    }
    if (done) done(result);
    results.push_back(std::move(result));
  }
  return results;
}

QString import_summary(const ImportedRun& run, const QString& again_hint) {
  if (!run.error.isEmpty()) return run.error;
  if (run.empty) return QString("%1: no records yet (its event files are empty); nothing imported").arg(run.directory);
  if (run.run == 0 && run.changed) {
    return QString(
               "%1: imported as run %2 before, and its event files have changed since (a run still being "
               "written?)%3")
        .arg(run.directory, QString::number(run.earlier), again_hint);
  }
  if (run.run == 0) {
    return QString("%1: already imported as run %2%3").arg(run.directory, QString::number(run.earlier), again_hint);
  }
  // One arg() for the texts: a folder named "a%2" must not become a place for the next number.
  QString line = QString("imported %1 as run %2 \"%3\" (%4 series, %5 points, %6 hyperparameters")
                     .arg(run.directory, QString::number(run.run), run.name, QString::number(run.series),
                          QString::number(run.points), QString::number(run.hparams));
  if (run.other_values > 0) {
    line += QString("; %1 %2 of other kinds (images, histograms, text) left out")
                .arg(run.other_values)
                .arg(run.other_values == 1 ? "value" : "values");
  }
  return line + ")";
}

}  // namespace spur::app
