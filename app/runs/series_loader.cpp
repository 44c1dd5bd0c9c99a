// SPDX-License-Identifier: Apache-2.0
// Incremental reads of the run history; see series_loader.h.
#include "runs/series_loader.h"

#include <QFileInfo>

namespace spur::app {

SeriesLoader::SeriesLoader(QString history_path) : path_(std::move(history_path)) {
  qRegisterMetaType<QVector<spur::app::SeriesDelta>>();
}

void SeriesLoader::set_runs(const QList<qint64>& runs) {
  runs_ = std::set<qint64>(runs.begin(), runs.end());
  for (auto it = cursors_.begin(); it != cursors_.end();) {
    it = runs_.contains(it->first.first) ? std::next(it) : cursors_.erase(it);
  }
}

void SeriesLoader::poll() {
  QVector<SeriesDelta> deltas;
  try {
    if (!reader_) {
      if (!QFileInfo::exists(path_)) return;
      reader_ = std::make_unique<history::HistoryReader>(path_.toStdString());
    }
    for (const qint64 run : runs_) {
      for (const auto& key : reader_->metric_keys(run)) {
        auto& cursor = cursors_[{run, key}];
        const auto points = reader_->series(run, key, &cursor);
        if (points.empty()) continue;
        SeriesDelta delta;
        delta.run = run;
        delta.key = QString::fromStdString(key);
        delta.steps.reserve(static_cast<qsizetype>(points.size()));
        delta.values.reserve(static_cast<qsizetype>(points.size()));
        delta.walls.reserve(static_cast<qsizetype>(points.size()));
        for (const auto& p : points) {
          delta.steps.push_back(static_cast<double>(p.step));
          delta.values.push_back(p.value);
          delta.walls.push_back(p.wall);
        }
        deltas.push_back(std::move(delta));
      }
    }
  } catch (const std::exception& e) {
    reader_.reset();
    emit failed(QString::fromUtf8(e.what()));
    return;
  }
  if (!deltas.isEmpty()) emit loaded(deltas);
}

}  // namespace spur::app
