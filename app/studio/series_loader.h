// SPDX-License-Identifier: Apache-2.0
// SeriesLoader: the Studio's reads of metric points, on a worker thread of its own (the GUI thread only paints).
// Given the runs to show and each metric plot's view (x range and width in pixels), it reads every line through
// the history's multi-resolution summaries, so a line never holds more than about twice its share of the plot's
// point budget, however long the series: short series come as their raw points and then as appended new points;
// long ones (or zoomed ones) as buckets (first and last step, mean, min, max), read again when the view changes or
// the series grows.
#pragma once

#include <QHash>
#include <QObject>
#include <QString>
#include <QVector>

#include <map>
#include <memory>
#include <set>
#include <utility>

#include <spur/history/reader.h>

namespace spur::app {

class RunService;

/// Points (or buckets) of one metric of one run.
struct SeriesDelta {
  qint64 run = 0;
  QString key;
  /// true: the line is these points now (a first read, a new view, a new resolution); false: they are appended.
  bool replace = false;
  /// Points per bucket; 1: raw points, one per entry.
  qint64 points_per_bucket = 1;
  /// Per entry: its (first) step, value (a bucket's mean) and (first) wall time.
  QVector<double> steps, values, walls;
  /// Summarised entries only (points_per_bucket > 1): each bucket's last step and wall time, its minimum and maximum
  /// value, and how many points it holds.
  QVector<double> last_steps, last_walls, mins, maxs, counts;
  qint64 total_points = 0;  // in the whole series
  double first_wall = 0;    // the series' first point's wall time (relative time counts from it)
};

/// What one metric's plot shows: the x range (steps, or wall times when by_wall) at `width` pixels. Default: all
/// of every line.
struct SeriesView {
  double lo = -1e300, hi = 1e300;
  bool by_wall = false;
  int width = 1000;
  bool whole() const { return lo <= -1e299 && hi >= 1e299; }
};

class SeriesLoader : public QObject {
  Q_OBJECT

 public:
  /// Buckets (or points) of one plot, over all its lines: each line gets its share, at least kMinLinePoints.
  static constexpr int kPlotPoints = 200000;
  /// The same over SSH, where the link and not the screen sets the cost: 500 lines of 64-128 buckets each (about
  /// 2 MB of answers), a few lines still at the plot's full width.
  static constexpr int kRemotePlotPoints = 50000;
  static constexpr int kMinLinePoints = 64;

  explicit SeriesLoader(QString history_path);
  ~SeriesLoader() override;

 public slots:
  /// Which runs to follow; points of runs no longer listed stop coming, newly listed runs start from their
  /// first point.
  void set_runs(const QList<qint64>& runs);
  /// One metric's view (a zoom, a pan, a resize): its lines are read again for it at the next poll.
  void set_view(const QString& key, const spur::app::SeriesView& view);
  /// Reads what is new and emits it (as one batch).
  void poll();

 signals:
  void loaded(const QVector<spur::app::SeriesDelta>& deltas);
  void failed(const QString& message);
  /// A series read without trustworthy summaries (a history from an older Spur, or summaries that disagree with
  /// their points: read from the raw points instead), said once per series, for a SummaryBuilder to rebuild.
  void untrusted(qint64 run, const QString& key);

 private:
  struct Line {
    history::SeriesCursor cursor;  // where the last read ended
    bool loaded = false;
    bool raw = true;          // holds raw points (appends), not buckets
    qint64 points = 0;        // what the line holds
    quint64 view_serial = 0;  // the view it was read for
  };
  /// The line as `summary` has it (read whole: replacing what the plot held).
  SeriesDelta whole(qint64 run, const std::string& key, Line& line, const history::SeriesSummary& summary);

  QString path_;
  std::unique_ptr<RunService> service_;  // here or over SSH (run_service.h); made at the first poll
  std::set<qint64> runs_;
  std::map<std::pair<qint64, std::string>, Line> lines_;
  std::map<qint64, std::vector<std::string>> keys_;       // each run's metric keys, until the next commit
  std::set<std::pair<qint64, std::string>> untrusted_;    // said once
  QHash<QString, std::pair<SeriesView, quint64>> views_;  // per metric: its view and a serial that changes with it
  quint64 next_serial_ = 1;
  int64_t data_version_ = -1;
};

}  // namespace spur::app

Q_DECLARE_METATYPE(spur::app::SeriesDelta)
Q_DECLARE_METATYPE(spur::app::SeriesView)
