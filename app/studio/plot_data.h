// SPDX-License-Identifier: Apache-2.0
// PlotData: what one metric's plot shows, without the widget: each run's line (raw points, or summarised buckets
// with their min-max envelope), its TensorBoard-smoothed values (studio/series_math.h's Smoother, extended point by
// point as points arrive; a line shorter than the smoothing's window, 1 / (1 - weight) points, is shown as logged),
// the x of every entry on the chosen axis (step, time since the run's start, wall time), the data's extent, the hover
// read-out (with the differences to a baseline run), the legend's names and the CSV export (metrics_csv.h's plot
// layout). The Studio's MetricPlot (ui/dashboard) draws what it holds.
//
// Threads: PlotData is used from the GUI thread only: it holds what is drawn, a bounded number of entries per line
// (the SeriesLoader reads and summarises the history in its own thread and hands over SeriesDeltas). Not
// thread-safe; one thread at a time.
#pragma once

#include <QByteArray>
#include <QCoreApplication>
#include <QString>
#include <QVector>

#include <map>
#include <optional>
#include <vector>

#include "studio/baseline.h"
#include "studio/series_math.h"

namespace spur::app {

struct SeriesDelta;

/// What the x axis shows: the step, the seconds since the run's start (each run from its own: every metric of a run
/// from the same moment), or the wall time (seconds since the epoch).
enum class XAxis { step, relative_time, wall_time };

/// The colour of a run, the same on every plot and every time ("#1f77b4": Tableau 10, readable on light and dark
/// backgrounds; runs take them in turn by id).
QString run_colour_name(qint64 run);

class PlotData {
  Q_DECLARE_TR_FUNCTIONS(PlotData)

 public:
  /// `key`: the metric (the CSV's key column).
  explicit PlotData(QString key = {});

  const QString& key() const { return key_; }

  /// What an append or a load changed, for the widget to draw.
  struct Change {
    bool new_run = false;   // the run had no line here before: its graphs are to be made
    bool replaced = false;  // the line's whole content is new: draw it again from envelope(), keys(), smoothed()
    /// Appended points only (replaced false): their x (in the axis' units), values and smoothed values, in order.
    QVector<double> keys, values, smoothed;
  };
  /// Appends points of `run` (named `name`: the legend's and the read-out's name from now on); steps must not go
  /// back within one call; `walls` may be empty (wall times 0).
  Change append(qint64 run, const QString& name, const QVector<double>& steps, const QVector<double>& values,
                const QVector<double>& walls = {});
  /// A SeriesLoader's read of a run's line: appended raw points, or the line's whole new content (raw points or
  /// summarised buckets).
  Change load(const SeriesDelta& delta, const QString& name);
  /// Drops a run's line; false when it had none.
  bool remove_run(qint64 run);
  /// Renames a run's line; false when it has none or the name is the same.
  bool rename_run(qint64 run, const QString& name);
  /// When the run started (wall time, seconds since the epoch; 0: unknown): relative time counts from it, or from
  /// its line's first point where that is earlier (another machine's clock) or the start is unknown. False when
  /// nothing changed. Default: unknown.
  bool set_run_start(qint64 run, double wall);

  /// Whether no run has a line here.
  bool empty() const { return lines_.empty(); }
  bool contains(qint64 run) const { return lines_.count(run) != 0; }
  /// The runs with a line, in id order (the legend's order).
  std::vector<qint64> runs() const;
  /// A run's name; empty when it has no line here.
  QString name(qint64 run) const;
  /// A run's legend entry: its name, "NAME (baseline)" for the baseline; empty when it has no line here.
  QString legend_name(qint64 run) const;

  /// The smoothing weight, in [0, 0.999] (clamped): every line is smoothed again. 0 shows values as they are; so is
  /// a line of raw points shorter than the smoothing's window, 1 / (1 - weight) points (an accuracy logged twice
  /// was drawn at 0.886 where it was 0.902: the average of too few points only lags). Default: 0.6 (TensorBoard's).
  void set_smoothing(double weight);
  double smoothing() const { return weight_; }
  /// Default: XAxis::step.
  void set_x_axis(XAxis axis);
  XAxis x_axis() const { return x_axis_; }
  /// The series' steps count seconds since the start (the launcher's system/ samples). Default: false.
  void set_steps_are_seconds(bool on) { steps_are_seconds_ = on; }
  bool steps_are_seconds() const { return steps_are_seconds_; }
  /// The x axis' label: "step", "seconds since the start" (relative time, or steps that count seconds) or "time".
  QString x_label() const;
  /// The Compare tab's baseline (0: none): its legend name says so, and the read-out gives every other run's
  /// difference to it, better or worse in `direction` (neither: uncoloured). False when nothing changed. Default:
  /// none, lower is better.
  bool set_baseline(qint64 run, MetricDirection direction);
  qint64 baseline() const { return baseline_; }
  MetricDirection direction() const { return direction_; }

  /// A run's entries (raw points, or buckets) in the order logged: x in the axis' units (a bucket's: the middle of
  /// its span), value (a bucket's mean), and smoothed value. Empty for a run without a line.
  QVector<double> keys(qint64 run) const;
  QVector<double> values(qint64 run) const;
  QVector<double> smoothed(qint64 run) const;
  /// Points of a line, x and y.
  struct Points {
    QVector<double> keys, values;
  };
  /// What a run's faint line draws: its raw points; or, summarised, each bucket's extremes at its first and last
  /// x, the one nearer the next bucket's mean last, so the line sweeps every spike and reads as min to max.
  Points envelope(qint64 run) const;

  /// The extent of every faint line's finite points (valid false when there are none), grown with each append,
  /// computed again after a load, a removal or a new x axis.
  struct Extent {
    double key_lo = 0, key_hi = 0, value_lo = 0, value_hi = 0;
    bool valid = false;
  };
  Extent extent() const;

  /// The index of the run's entry nearest to x (in the axis' units; the first of equals), or -1.
  qsizetype nearest(qint64 run, double x) const;
  /// The hover read-out at x (HTML, a row per run in id order): each run's entry nearest to x, "NAME: VALUE
  /// (smoothed S) @ step N, T" after its colour's swatch (the smoothed value left out where it is the value; numbers
  /// with `digits` significant digits), a bucket "NAME: MEAN (mean of K points, MIN to MAX;
  /// smoothed S) @ steps A-B, T", where T is the time since the run's start (duration_text's "1m 05s"; left out
  /// without wall times); with a baseline, the others' "&Delta; +D, +P% vs baseline" (baseline.h's
  /// delta_text of the values at x), green when better, red when worse.
  QString readout(double x, int digits = 6, bool steps = true) const;
  /// The step every run's entry nearest to x is at, when they all are at one (raw points); none otherwise. The
  /// read-out box then says it once, above the rows (readout's `steps` false).
  std::optional<qint64> common_step(double x) const;

  /// Where x is, said for the read-out's heading: "step 1200", "12m05s since the start" (relative time, or steps
  /// that count seconds), "2026-12-07 10:15:00" (wall time).
  QString x_text(double x) const;
  /// A file name for the plot's exports, without the extension: the key with '/' and what file systems refuse
  /// (\ : * ? " < > |, control characters) as '-' ("train/loss" -> "train-loss", not "loss").
  QString file_stem() const;

  /// Raw points a run's line stands for (each bucket's count, when summarised).
  qint64 represented_points(qint64 run) const;
  /// Whether a run's line is summarised buckets.
  bool summarised(qint64 run) const;
  /// Points of a run's faint line (envelope()).
  int point_count(qint64 run) const;
  /// The smallest x of a run's faint line; 0 when it has none.
  double first_x(qint64 run) const;

  /// The lines as CSV: metrics_csv.h's plot layout (run,name,key,step,value,wall_time,smoothed), runs in id order;
  /// a summarised line writes what is drawn, one row per bucket (its first step and wall time, its mean).
  QByteArray csv() const;
  /// csv() into `file`, whole or not at all.
  bool save_csv(const QString& file) const;

 private:
  struct Line {
    // Per entry (a raw point, or a bucket): its first step and wall time and its value (a bucket's mean).
    QVector<double> steps, values, walls;
    // Summarised lines only: each bucket's last step and wall time, extremes and point count.
    QVector<double> last_steps, last_walls, mins, maxs, counts;
    QVector<double> smoothed;  // per entry, in entry order (a resumed run's steps repeat)
    bool summarised = false;
    double first_wall = 0;  // the series' first point
    double start = 0;       // the run's start (set_run_start; 0: unknown)
    QString name;
    Smoother smoother;  // where the smoothed line is up to
  };
  /// The run's line, made (with the plot's smoothing) when new; `made` says so.
  Line& line_of(qint64 run, const QString& name, bool& made);
  double key_of(const Line& line, double step, double wall) const;
  /// Where relative time starts for a line: its run's start, or its first point where that is earlier or the start
  /// is unknown.
  static double origin(const Line& line);
  /// Whether a line is shown unsmoothed: raw points, fewer than the smoothing's window.
  bool short_line(const Line& line) const;
  QVector<double> keys_of(const Line& line, qsizetype from) const;
  Points envelope_of(const Line& line) const;
  qsizetype nearest_in(const Line& line, double x) const;
  void resmooth(Line& line);
  void grow_extent(double key, double value) const;

  QString key_;
  std::map<qint64, Line> lines_;
  std::map<qint64, double> starts_;  // set_run_start's, also for runs without a line yet
  double weight_ = 0.6;
  XAxis x_axis_ = XAxis::step;
  bool steps_are_seconds_ = false;
  qint64 baseline_ = 0;
  MetricDirection direction_ = MetricDirection::lower_is_better;
  // The data's extent, grown with each append (a scan of every point of every line made a live update
  // O(all points): 17 ms per update with 10 runs of 30,000 points), scanned again when stale.
  mutable Extent extent_;
  mutable bool extent_stale_ = false;
};

}  // namespace spur::app
