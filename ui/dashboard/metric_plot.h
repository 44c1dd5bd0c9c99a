// SPDX-License-Identifier: GPL-3.0-or-later
// MetricPlot: one metric's plot, the selected runs overlaid in stable colours: the raw series faint, the
// TensorBoard-smoothed one on top. Points are appended as they arrive; zoom and pan with the mouse and wheel,
// double-click to see everything again.
#pragma once

#include <QString>
#include <QWidget>

#include <map>
#include <vector>

class QCustomPlot;
class QCPGraph;

namespace spur::studio {

class MetricPlot : public QWidget {
  Q_OBJECT

 public:
  explicit MetricPlot(QString key, QWidget* parent = nullptr);

  const QString& key() const { return key_; }
  /// Appends points of `run` (named `name` in the legend); steps must not go back within one call.
  void append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values);
  /// Drops a run's lines.
  void remove_run(qint64 run);
  void set_smoothing(double weight);
  /// Points drawn for a run (raw series), for tests.
  int point_count(qint64 run) const;
  QCustomPlot* plot() const { return plot_; }
  /// Fits the axes to the data.
  void reset_view();

 private:
  struct Line {
    QCPGraph* raw = nullptr;
    QCPGraph* smooth = nullptr;
    std::vector<double> steps, values;  // raw, for re-smoothing
    double ema = 0;
    int accumulated = 0;
  };
  void resmooth(Line& line);

  QString key_;
  QCustomPlot* plot_;
  std::map<qint64, Line> lines_;
  double weight_ = 0.6;
  bool user_moved_ = false;
};

/// The colour of a run, the same on every plot and every time.
QColor run_colour(qint64 run);

}  // namespace spur::studio
