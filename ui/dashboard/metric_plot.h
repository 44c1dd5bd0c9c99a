// SPDX-License-Identifier: GPL-3.0-or-later
// MetricPlot: one metric's plot, the selected runs overlaid in stable colours: the raw series faint, the
// TensorBoard-smoothed one on top. Points are appended as they arrive; zoom and pan with the mouse and wheel,
// double-click to see everything again.
#pragma once

#include <QString>
#include <QWidget>

#include <map>
#include <vector>

#include "metrics/series_math.h"

class QCustomPlot;
class QCPGraph;
class QMouseEvent;

namespace spur::studio {

/// What the x axis shows.
enum class XAxis { step, relative_time, wall_time };

class MetricPlot : public QWidget {
  Q_OBJECT

 public:
  explicit MetricPlot(QString key, QWidget* parent = nullptr);

  const QString& key() const { return key_; }
  /// Appends points of `run` (named `name` in the legend); steps must not go back within one call.
  void append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values,
              const QVector<double>& walls = {});
  /// Drops a run's lines.
  void remove_run(qint64 run);
  /// The run's name in the legend (a run renamed while shown).
  void rename_run(qint64 run, const QString& name);
  /// The legend's name of a run's line; empty when it has none here.
  QString run_name(qint64 run) const;
  void set_smoothing(double weight);
  /// Series with at most this many points are drawn with a dot at each point too.
  static constexpr int kDottedPoints = 10;
  /// Points drawn for a run (raw series), for tests.
  int point_count(qint64 run) const;
  QCustomPlot* plot() const { return plot_; }
  /// Fits the axes to the data.
  void reset_view();
  void set_x_axis(XAxis axis);
  /// The series' steps count seconds since the start (the launcher's system/ samples): the step axis says so.
  void set_steps_are_seconds(bool on);
  void set_log_y(bool log);
  /// The hover read-out at x (in the axis' units): for every run, its point nearest to x ("name: value @ step").
  QString readout(double x) const;
  /// Exports: an image (PNG, SVG or PDF by the file's extension) or the data as CSV
  /// (run,step,wall_time,value,smoothed).
  bool save_image(const QString& file);
  bool save_csv(const QString& file) const;
  /// The x of a run's first drawn point, for tests.
  double first_x(qint64 run) const;

 private:
  struct Line {
    QCPGraph* raw = nullptr;
    QCPGraph* smooth = nullptr;
    std::vector<double> steps, values, walls;  // raw, for re-smoothing and other x axes
    QString name;
    app::Smoother smoother;  // where the smoothed line is up to
  };
  void resmooth(Line& line);
  QVector<double> keys(const Line& line, std::size_t from) const;
  void rebuild(Line& line);
  void context_menu(const QPoint& at);
  void hover(QMouseEvent* event);
  /// Axes, grid and background from the widget's palette (light or dark theme).
  void apply_palette();
  void changeEvent(QEvent* event) override;

  QString key_;
  QCustomPlot* plot_;
  std::map<qint64, Line> lines_;
  double weight_ = 0.6;
  XAxis x_axis_ = XAxis::step;
  bool steps_are_seconds_ = false;
  bool user_moved_ = false;
  // The data's extent, grown with each append: rescaling by scanning every point of every line made a live
  // update O(all points) (17 ms per update with 10 runs of 30,000 points).
  double key_lo_ = 0, key_hi_ = 0, value_lo_ = 0, value_hi_ = 0;
  bool have_extent_ = false;
  void grow_extent(double key, double value);
  void fit_extent();
};

/// The colour of a run, the same on every plot and every time.
QColor run_colour(qint64 run);

}  // namespace spur::studio
