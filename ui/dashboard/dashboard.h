// SPDX-License-Identifier: GPL-3.0-or-later
// Dashboard: one MetricPlot per metric key for the selected runs, in sections by the key's prefix as TensorBoard
// and W&B group them ("train/loss" and "train/lr" under "train"; keys without a prefix under "Metrics"; the
// launcher's system/ samples last, under "System"), with a Pinned section on top for the plots the user pins. Each
// section collapses from its header. The layout stays put: sections and the plots in them keep the order they were
// first seen in (kept between sessions), so a metric that appears later takes the end of its section and moves no
// other plot. Plots are laid out in 1-4 columns at a chosen height, a plot may take the full width, and hovering
// one shows the same x on every plot with that x axis. Collapsed sections, pins, full widths, columns, height,
// smoothing and the x axis are kept under "dashboard/". It only draws: the points come from an app::SeriesLoader
// on another thread.
//
// Threads: the GUI thread's (a widget).
#pragma once

#include <functional>
#include <map>

#include <QMap>
#include <QSet>
#include <QWidget>

#include "studio/baseline.h"
#include "studio/series_loader.h"

class QAbstractButton;
class QComboBox;
class QGridLayout;
class QLabel;
class QSettings;
class QSlider;
class QSpinBox;
class QToolButton;
class QVBoxLayout;

namespace spur::studio {

class MetricPlot;

class Dashboard : public QWidget {
  Q_OBJECT

 public:
  explicit Dashboard(QWidget* parent = nullptr);

  /// The runs shown, with their names for the legends: runs no longer listed leave every plot, a changed name
  /// renames the run's lines.
  void set_runs(const QMap<qint64, QString>& runs);
  /// When the shown runs started (wall time, seconds since the epoch): relative time counts from each run's start,
  /// the same on all its plots.
  void set_run_starts(const QMap<qint64, double>& starts);
  /// The shown runs' statuses (effective_status's): the empty dashboard says when they ended, or failed, without
  /// logging a metric (not "no data yet ... so far").
  void set_run_statuses(const QMap<qint64, QString>& statuses);
  /// The runs shown (set_runs's), by id.
  QList<qint64> runs() const { return runs_.keys(); }
  MetricPlot* plot(const QString& key) const { return plots_.value(key, nullptr); }
  QStringList keys() const { return plots_.keys(); }
  /// The Compare tab's baseline run (0: none) and each metric's direction (default: guess_direction): every
  /// plot's legend marks it and its hover read-out gives the other runs' differences to it.
  void set_baseline(qint64 run, std::function<app::MetricDirection(const QString& key)> direction);
  /// What the dashboard says while it has no plot (nothing selected, or no data yet); empty when it has plots.
  QString empty_text() const;
  /// The note that heads the system section (shown when there are system/ plots).
  QLabel* system_section() const { return system_label_; }

  /// The section a key's plot belongs to: "pinned" when pinned, "system" for system/ keys, else the key's prefix
  /// before its first '/' ("train/loss": "train"), "" without one.
  static QString section_of(const QString& key, bool pinned);
  /// The sections shown, top to bottom (section ids, as section_of gives them).
  QStringList sections() const;
  /// The keys of the plots shown in section `id`, in their order (what a collapsed section would show).
  QStringList plots_in(const QString& id) const;
  /// Section `id`'s header: it collapses and expands the section; nullptr when there is no such section.
  QAbstractButton* section_header(const QString& id) const;
  void set_collapsed(const QString& id, bool on);
  bool collapsed(const QString& id) const { return collapsed_.contains(id); }
  /// A pinned plot moves to the Pinned section on top (and back to its place when unpinned).
  void set_pinned(const QString& key, bool on);
  bool pinned(const QString& key) const { return pinned_.contains(key); }
  /// A full-width plot spans every column.
  void set_wide(const QString& key, bool on);
  bool wide(const QString& key) const { return wide_.contains(key); }
  /// Plots side by side, 1 to 4. Default: 2.
  void set_columns(int columns);
  int columns() const;
  /// Each plot's height in pixels, 160 to 900. Default: 260.
  void set_plot_height(int pixels);
  int plot_height() const;

  /// What the dashboard keeps between sessions, under "dashboard/".
  void save_settings(QSettings& settings) const;
  void restore_settings(const QSettings& settings);

 public slots:
  void apply(const QVector<spur::app::SeriesDelta>& deltas);

 signals:
  /// A plot's view changed (zoom, pan, fit): the loader should read its lines for it.
  void view_changed(const QString& key, const spur::app::SeriesView& view);
  /// A plot's image or data was exported to `file`.
  void exported(const QString& file);

 private:
  struct Section {
    QWidget* box = nullptr;
    QToolButton* header = nullptr;
    QWidget* body = nullptr;
    QGridLayout* grid = nullptr;
  };
  Section& section(const QString& id);
  /// The sections in their order: pinned, then by their first key's place in order_, system last.
  QStringList section_order() const;
  void relayout();
  /// Every plot with the same x axis as `from` shows its cursor at x (NaN: none).
  void hover(const MetricPlot* from, double x);
  app::MetricDirection direction_of(const QString& key) const;
  MetricPlot* make_plot(const QString& key);
  void update_empty_text();

  QMap<qint64, QString> runs_;
  QMap<qint64, double> starts_;
  QMap<qint64, QString> statuses_;
  qint64 baseline_ = 0;
  std::function<app::MetricDirection(const QString& key)> direction_;
  QMap<QString, MetricPlot*> plots_;
  QStringList order_;  // keys in the order first seen (kept between sessions)
  QSet<QString> pinned_, wide_, collapsed_;
  std::map<QString, Section> sections_;
  QWidget* area_;
  QVBoxLayout* sections_layout_;
  QSlider* smoothing_;
  QComboBox* x_axis_;
  QSpinBox* columns_;
  QSpinBox* height_;
  QLabel* smoothing_label_;
  QLabel* empty_;
  QLabel* system_label_;  // heads the system section
};

}  // namespace spur::studio
