// SPDX-License-Identifier: GPL-3.0-or-later
// MetricPlot: one metric's plot, the selected runs overlaid in stable colours: the raw series faint, the
// TensorBoard-smoothed one on top. Points are appended as they arrive, or a line is replaced by its read for the
// plot's view (long series come as summarised buckets: their min-max envelope and smoothed means); the wheel zooms
// and a drag pans along x, the y axis following the data in view; Ctrl+drag a box to zoom into both (view_changed
// asks for the finer read), double-click or Fit to see everything again. Hovering draws a cursor at x and a
// read-out (every run's value, step and time there) in the corner of the axes the data leaves free; the dashboard
// shows the same x on its other plots (show_cursor). The legend sits under the axes; tick labels are spaced by their
// width, steps only at whole numbers. Images are exported on a white background, whatever the theme. The data (lines,
// their smoothing and x keys, extents, the read-out, the CSV) is app::PlotData's (app/studio/plot_data.h); this widget
// draws it.
#pragma once

#include <QDialog>
#include <QString>
#include <QWidget>

#include <map>
#include <optional>
#include <vector>

#include "studio/plot_data.h"
#include "studio/series_loader.h"

class QDoubleSpinBox;
class QSpinBox;
class QCustomPlot;
class QCPAxis;
class QCPGraph;
class QCPItemStraightLine;
class QLabel;
class QMouseEvent;
class QTimer;

namespace spur::studio {

/// Asked before an image export: the size to lay the plot out at and, for a PNG, its resolution.
class ImageSizeDialog : public QDialog {
  Q_OBJECT

 public:
  ImageSizeDialog(QSize size, bool pixels, QWidget* parent = nullptr);
  QSize image_size() const;
  double image_scale() const;

 private:
  QSpinBox *width_, *height_;
  QDoubleSpinBox* scale_;
};

/// What the x axis shows (app/studio/plot_data.h).
using XAxis = app::XAxis;

class MetricPlot : public QWidget {
  Q_OBJECT

 public:
  explicit MetricPlot(QString key, QWidget* parent = nullptr);

  const QString& key() const { return data_.key(); }
  /// Appends points of `run` (named `name` in the legend); steps must not go back within one call.
  void append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values,
              const QVector<double>& walls = {});
  /// A SeriesLoader's read of a run's line: appended raw points, or the line's whole new content (raw points or
  /// summarised buckets: drawn as their min-max envelope, faint, and their smoothed means).
  void load(const app::SeriesDelta& delta, const QString& name);
  /// The legend names this many runs, then "and K more" (the runs table's colour swatches name every line).
  static constexpr int kLegendRuns = 8;
  /// Raw points a run's line stands for (each bucket's count, when summarised).
  qint64 represented_points(qint64 run) const;
  /// Whether a run's line is drawn from summarised buckets.
  bool summarised(qint64 run) const;
  /// The legend's text rows, for tests.
  QStringList legend_names() const;
  /// What the plot shows now: the whole series, or (after a zoom or pan) the x range, at its width in pixels.
  app::SeriesView view() const;
  /// Drops a run's lines.
  void remove_run(qint64 run);
  /// Whether no run has a line here.
  bool empty() const { return data_.empty(); }
  /// The run's name in the legend (a run renamed while shown).
  void rename_run(qint64 run, const QString& name);
  /// When a run started (PlotData::set_run_start): relative time counts from it.
  void set_run_start(qint64 run, double wall);
  /// The legend's name of a run's line; empty when it has none here.
  QString run_name(qint64 run) const;
  void set_smoothing(double weight);
  /// The Compare tab's baseline (0: none): its legend entry says so, and the hover read-out gives every other
  /// run's difference to it at that x, absolute and in %, green when better in `direction`, red when worse.
  void set_baseline(qint64 run, app::MetricDirection direction);
  /// Series with at most this many points are drawn with a dot at each point too.
  static constexpr int kDottedPoints = 10;
  /// Points drawn for a run (raw series), for tests.
  int point_count(qint64 run) const;
  QCustomPlot* plot() const { return plot_; }
  /// What the plot draws.
  const app::PlotData& plot_data() const { return data_; }
  /// Fits the axes to the data (double-click, the context menu's Fit, the dashboard's Fit all).
  void reset_view();
  /// The selected runs changed: the plot fits them again if the user had zoomed or panned (a zoom made before
  /// selecting other runs left their lines out of view).
  void selection_changed();
  /// The legend, under the axes (wrapped to the plot's width); hidden from the context menu.
  void set_legend_visible(bool on);
  bool legend_visible() const;
  void set_x_axis(XAxis axis);
  /// The series' steps count seconds since the start (the launcher's system/ samples): the step axis says so.
  void set_steps_are_seconds(bool on);
  void set_log_y(bool log);
  /// The hover read-out at x (in the axis' units): for every run, its point nearest to x ("name: value @ step").
  QString readout(double x) const;
  /// The cursor at x (in the axis' units) with its read-out, as when the mouse is there; NaN hides both.
  void show_cursor(double x);
  /// The read-out box (hidden while the mouse is elsewhere), for tests.
  QWidget* readout_box() const;
  /// The axes' rectangle, in this widget's coordinates, for tests.
  QRect axes_rect() const;
  /// The pixel (in this widget's coordinates) of a run's smoothed line at its entry nearest to x; none without.
  std::optional<QPoint> pixel_at(qint64 run, double x) const;
  /// Pinned (the dashboard's Pinned section) and full width: what the context menu shows checked.
  void set_pinned(bool on) { pinned_ = on; }
  bool pinned() const { return pinned_; }
  void set_wide(bool on) { wide_ = on; }
  bool wide() const { return wide_; }
  /// Exports: an image (PNG, SVG or PDF by the file's extension) laid out at `size` (default: the plot's own),
  /// a PNG drawn at `scale` pixels per point; or the data as CSV (metrics_csv.h's plot layout,
  /// run,name,key,step,value,wall_time,smoothed: the metrics CSV's columns with the run in front).
  bool save_image(const QString& file, QSize size = {}, double scale = 1);
  /// Where the export dialogs open: the folder last exported to (kept under "dashboard/export_folder"), else the
  /// user's Pictures folder (their home without one); never the working directory.
  static QString export_folder();
  bool save_csv(const QString& file) const;
  /// The x of a run's first drawn point, for tests.
  double first_x(qint64 run) const;

 signals:
  /// The user zoomed, panned or fitted (after a short pause): the loader reads the lines again for view().
  void view_changed(const spur::app::SeriesView& view);
  /// The mouse is over the axes at x (in the axis' units); NaN when it left.
  void hovered(double x);
  /// The context menu's Pin and Full width.
  void pin_toggled(bool on);
  void wide_toggled(bool on);
  /// An export was written (the window says so in its status bar).
  void exported(const QString& file);

 private:
  /// A run's graphs: the raw series (or a summarised line's envelope), faint, and the smoothed line.
  struct Graphs {
    QCPGraph* raw = nullptr;
    QCPGraph* smooth = nullptr;
  };
  /// Draws what an append or a load changed of `run`'s line.
  void draw(qint64 run, const app::PlotData::Change& change);
  /// Sets `run`'s graphs to its whole line.
  void redraw(qint64 run, Graphs& graphs);
  void update_legend();
  void refit_later();
  void user_view_changed();
  void context_menu(const QPoint& at);
  void hover(QMouseEvent* event);
  bool eventFilter(QObject* watched, QEvent* event) override;
  /// Puts the read-out box in the corner of the axes, on the side away from x, where the fewest drawn points are.
  void place_readout(double x);
  /// After a zoom or pan along x: the y axis to the data in view.
  void fit_y_to_view();
  /// Axes, grid and background from the widget's palette (light or dark theme), or from `palette` (an export's).
  void apply_palette();
  void apply_palette(const QPalette& palette);
  /// Before each replot: as many x ticks as their labels leave room for, and the legend's columns for the width.
  void fit_ticks_and_legend(int width);
  int tick_label_width(const QCPAxis* axis) const;
  void changeEvent(QEvent* event) override;
  /// The axes to the data's extent (PlotData::extent()), or QCustomPlot's own scan on a log axis.
  void fit_extent();

  app::PlotData data_;
  QCustomPlot* plot_;
  std::map<qint64, Graphs> graphs_;  // per run of data_
  bool user_moved_ = false;
  QCPGraph* more_ = nullptr;    // the legend's "and K more" row (a graph without data)
  QTimer* view_timer_;          // the pause after a zoom or pan before view_changed
  bool told_zoomed_ = false;    // the last view_changed was a range (not the whole series)
  bool refit_pending_ = false;  // a refit is queued for the lines just loaded
  QLabel* readout_;             // the hover read-out, over the axes' free corner
  QCPItemStraightLine* cursor_ = nullptr;
  bool pinned_ = false, wide_ = false;
  bool follow_y_ = false;  // the wheel or a drag moves x: y follows the data in view (a Ctrl+box sets both)
};

/// The colour of a run, the same on every plot and every time (app::run_colour_name's).
QColor run_colour(qint64 run);

}  // namespace spur::studio
