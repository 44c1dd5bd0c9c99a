// SPDX-License-Identifier: Apache-2.0
// SeriesLoader: the Studio's reads of metric points, on a worker thread of its own (the GUI thread only paints). Given
// the runs to show, each poll() sends only the points logged since the last one (per run and metric), so a plot appends
// instead of reloading.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>

#include <map>
#include <memory>
#include <set>
#include <utility>

#include <spur/history/reader.h>

namespace spur::app {

/// New points of one metric of one run.
struct SeriesDelta {
  qint64 run = 0;
  QString key;
  QVector<double> steps, values, walls;
};

class SeriesLoader : public QObject {
  Q_OBJECT

 public:
  explicit SeriesLoader(QString history_path);

 public slots:
  /// Which runs to follow; points of runs no longer listed stop coming, newly listed runs start from their
  /// first point.
  void set_runs(const QList<qint64>& runs);
  /// Reads what is new and emits it (as one batch).
  void poll();

 signals:
  void loaded(const QVector<spur::app::SeriesDelta>& deltas);
  void failed(const QString& message);

 private:
  QString path_;
  std::unique_ptr<history::HistoryReader> reader_;
  std::set<qint64> runs_;
  std::map<std::pair<qint64, std::string>, history::SeriesCursor> cursors_;
};

}  // namespace spur::app

Q_DECLARE_METATYPE(spur::app::SeriesDelta)
