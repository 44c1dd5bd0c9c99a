// SPDX-License-Identifier: GPL-3.0-or-later
// Dashboard: one MetricPlot per metric key, in a grid, for the selected runs, with the smoothing slider. It only
// draws: the points come from an app::SeriesLoader on another thread.
#pragma once

#include <functional>

#include <QMap>
#include <QWidget>

#include "studio/series_loader.h"

class QComboBox;
class QGridLayout;
class QLabel;
class QSettings;
class QSlider;

namespace spur::studio {

class MetricPlot;

class Dashboard : public QWidget {
  Q_OBJECT

 public:
  explicit Dashboard(QWidget* parent = nullptr);

  /// The runs shown, with their names for the legends: runs no longer listed leave every plot, a changed name
  /// renames the run's lines.
  void set_runs(const QMap<qint64, QString>& runs);
  /// The runs shown (set_runs's), by id.
  QList<qint64> runs() const { return runs_.keys(); }
  MetricPlot* plot(const QString& key) const { return plots_.value(key, nullptr); }
  QStringList keys() const { return plots_.keys(); }
  /// The Compare tab's baseline run (0: none) and which metrics are better lower: every plot's legend marks it
  /// and its hover read-out gives the other runs' differences to it.
  void set_baseline(qint64 run, std::function<bool(const QString& key)> lower_is_better);
  /// What the dashboard says while it has no plot (nothing selected, or no data yet); empty when it has plots.
  QString empty_text() const;
  /// The header of the system section (shown when there are system/ plots).
  QLabel* system_section() const { return system_label_; }
  /// The smoothing weight and x axis, kept between sessions under "dashboard/".
  void save_settings(QSettings& settings) const;
  void restore_settings(const QSettings& settings);

 public slots:
  void apply(const QVector<spur::app::SeriesDelta>& deltas);

 signals:
  /// A plot's view changed (zoom, pan, fit): the loader should read its lines for it.
  void view_changed(const QString& key, const spur::app::SeriesView& view);

 private:
  void relayout();

  QMap<qint64, QString> runs_;
  qint64 baseline_ = 0;
  std::function<bool(const QString& key)> lower_is_better_;
  QMap<QString, MetricPlot*> plots_;
  QGridLayout* grid_;
  QSlider* smoothing_;
  QComboBox* x_axis_;
  QLabel* smoothing_label_;
  QLabel* empty_;
  QLabel* system_label_;  // heads the system/ section
};

}  // namespace spur::studio
