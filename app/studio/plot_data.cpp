// SPDX-License-Identifier: Apache-2.0
// One metric's plot data; see plot_data.h.
#include "studio/plot_data.h"

#include <QSaveFile>
#include <QStringList>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include <spur/core/metrics_csv.h>

#include "runs/run_status.h"
#include "studio/baseline.h"
#include "studio/series_loader.h"

namespace spur::app {

namespace {

/// The points the smoothing averages over: 1 / (1 - weight).
double window(double weight) { return 1 / (1 - weight); }

/// v[i], or `fallback` past its end (a delta's columns are as long as its steps; this keeps a short one harmless).
double at(const QVector<double>& v, qsizetype i, double fallback = 0) { return i < v.size() ? v[i] : fallback; }

}  // namespace

QString run_colour_name(qint64 run) {
  // Tableau 10: distinct, and readable on light and dark backgrounds.
  static const char* const colours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return QString::fromLatin1(colours[static_cast<std::size_t>(run) % 10]);
}

PlotData::PlotData(QString key) : key_(std::move(key)) {}

PlotData::Line& PlotData::line_of(qint64 run, const QString& name, bool& made) {
  const auto [it, inserted] = lines_.try_emplace(run);
  made = inserted;
  Line& line = it->second;
  line.name = name;
  if (inserted) {
    line.smoother = Smoother(weight_);
    if (const auto start = starts_.find(run); start != starts_.end()) line.start = start->second;
  }
  return line;
}

PlotData::Change PlotData::append(qint64 run, const QString& name, const QVector<double>& steps,
                                  const QVector<double>& values, const QVector<double>& walls) {
  Change change;
  Line& line = line_of(run, name, change.new_run);
  // (A SeriesLoader appends only to lines of raw points; a summarised line is replaced whole.)
  if (line.first_wall == 0 && !walls.isEmpty()) line.first_wall = walls.front();
  const qsizetype from = line.steps.size();
  line.steps += steps;
  line.values += values;
  line.walls += walls;
  change.keys = keys_of(line, from);
  change.values = values;
  // Extend the smoothed line from its running state: no need to redo the past. A short line shows its values; one
  // that has just grown past the window is drawn again, smoothed from its start.
  change.smoothed.reserve(values.size());
  for (const double v : values) change.smoothed.push_back(line.smoother.push(v));
  if (short_line(line)) {
    change.smoothed = values;
  } else if (from > 0 && !line.summarised && static_cast<double>(from) < window(weight_)) {
    resmooth(line);
    change.replaced = true;
  }
  if (!change.replaced) line.smoothed += change.smoothed;
  if (!extent_stale_) {
    const qsizetype n = std::min(change.keys.size(), values.size());
    for (qsizetype i = 0; i < n; ++i) grow_extent(change.keys[i], values[i]);
  }
  return change;
}

PlotData::Change PlotData::load(const SeriesDelta& delta, const QString& name) {
  if (!delta.replace) return append(delta.run, name, delta.steps, delta.values, delta.walls);
  Change change;
  change.replaced = true;
  Line& line = line_of(delta.run, name, change.new_run);
  line.summarised = delta.points_per_bucket > 1;
  line.steps = delta.steps;
  line.values = delta.values;
  line.walls = delta.walls;
  line.last_steps = delta.last_steps;
  line.last_walls = delta.last_walls;
  line.mins = delta.mins;
  line.maxs = delta.maxs;
  line.counts = delta.counts;
  if (delta.first_wall != 0) line.first_wall = delta.first_wall;
  else if (!line.walls.isEmpty()) line.first_wall = line.walls.front();
  resmooth(line);
  extent_stale_ = true;
  return change;
}

bool PlotData::remove_run(qint64 run) {
  if (lines_.erase(run) == 0) return false;
  extent_stale_ = true;
  return true;
}

bool PlotData::rename_run(qint64 run, const QString& name) {
  const auto it = lines_.find(run);
  if (it == lines_.end() || it->second.name == name) return false;
  it->second.name = name;
  return true;
}

bool PlotData::set_run_start(qint64 run, double wall) {
  const auto [it, inserted] = starts_.try_emplace(run, wall);
  if (!inserted && it->second == wall) return false;
  it->second = wall;
  if (const auto line = lines_.find(run); line != lines_.end()) line->second.start = wall;
  extent_stale_ = true;
  return true;
}

std::vector<qint64> PlotData::runs() const {
  std::vector<qint64> ids;
  ids.reserve(lines_.size());
  for (const auto& [run, line] : lines_) ids.push_back(run);
  return ids;
}

QString PlotData::name(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? QString() : it->second.name;
}

QString PlotData::legend_name(qint64 run) const {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return {};
  return run == baseline_ ? tr("%1 (baseline)").arg(it->second.name) : it->second.name;
}

void PlotData::set_smoothing(double weight) {
  weight_ = std::clamp(weight, 0.0, 0.999);
  for (auto& [run, line] : lines_) resmooth(line);
}

void PlotData::set_x_axis(XAxis axis) {
  x_axis_ = axis;
  extent_stale_ = true;
}

QString PlotData::x_label() const {
  if (x_axis_ == XAxis::wall_time) return QStringLiteral("time");
  return x_axis_ == XAxis::step && !steps_are_seconds_ ? QStringLiteral("step")
                                                       : QStringLiteral("seconds since the start");
}

bool PlotData::set_baseline(qint64 run, MetricDirection direction) {
  if (run == baseline_ && direction == direction_) return false;
  baseline_ = run;
  direction_ = direction;
  return true;
}

double PlotData::key_of(const Line& line, double step, double wall) const {
  switch (x_axis_) {
    case XAxis::step:
      return step;
    case XAxis::relative_time:
      return wall - origin(line);
    case XAxis::wall_time:
      return wall;
  }
  return step;
}

double PlotData::origin(const Line& line) {
  if (line.start <= 0) return line.first_wall;
  return line.first_wall > 0 ? std::min(line.start, line.first_wall) : line.start;
}

bool PlotData::short_line(const Line& line) const {
  return !line.summarised && static_cast<double>(line.values.size()) < window(weight_);
}

QVector<double> PlotData::keys_of(const Line& line, qsizetype from) const {
  // One key per entry: a raw point's x, or the middle of a bucket's span. Raw points by step are their steps.
  if (x_axis_ == XAxis::step && !line.summarised) return from == 0 ? line.steps : line.steps.mid(from);
  QVector<double> keys;
  keys.reserve(std::max<qsizetype>(0, line.steps.size() - from));
  for (qsizetype i = from; i < line.steps.size(); ++i) {
    const double first = key_of(line, line.steps[i], at(line.walls, i));
    if (!line.summarised) {
      keys.push_back(first);
      continue;
    }
    keys.push_back((first + key_of(line, at(line.last_steps, i), at(line.last_walls, i))) / 2);
  }
  return keys;
}

PlotData::Points PlotData::envelope_of(const Line& line) const {
  Points points;
  if (!line.summarised) {
    points.keys = keys_of(line, 0);
    points.values = line.values;
    return points;
  }
  // Each bucket's extremes at its first and last x, the one nearer the next bucket's mean last, so the faint line
  // sweeps every spike and the band reads as min to max.
  const qsizetype n = line.steps.size();
  points.keys.reserve(2 * n);
  points.values.reserve(2 * n);
  for (qsizetype i = 0; i < n; ++i) {
    const bool rising = i + 1 < line.values.size() ? line.values[i + 1] >= line.values[i] : true;
    points.keys.push_back(key_of(line, line.steps[i], at(line.walls, i)));
    points.values.push_back(rising ? at(line.mins, i) : at(line.maxs, i));
    points.keys.push_back(key_of(line, at(line.last_steps, i), at(line.last_walls, i)));
    points.values.push_back(rising ? at(line.maxs, i) : at(line.mins, i));
  }
  return points;
}

QVector<double> PlotData::keys(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? QVector<double>() : keys_of(it->second, 0);
}

QVector<double> PlotData::values(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? QVector<double>() : it->second.values;
}

QVector<double> PlotData::smoothed(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? QVector<double>() : it->second.smoothed;
}

PlotData::Points PlotData::envelope(qint64 run) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? Points() : envelope_of(it->second);
}

void PlotData::resmooth(Line& line) {
  line.smoother = Smoother(weight_);
  QVector<double> smoothed;
  smoothed.reserve(line.values.size());
  for (qsizetype i = 0; i < line.values.size(); ++i) {
    // A bucket's mean counts as its points (TensorBoard's smoothing of the raw series, to within the bucket).
    const auto count = line.summarised ? static_cast<int64_t>(at(line.counts, i, 1)) : int64_t{1};
    smoothed.push_back(line.smoother.push(line.values[i], count));
  }
  line.smoothed = short_line(line) ? line.values : smoothed;
}

void PlotData::grow_extent(double key, double value) const {
  if (!std::isfinite(key) || !std::isfinite(value)) return;
  if (!extent_.valid) {
    extent_.key_lo = extent_.key_hi = key;
    extent_.value_lo = extent_.value_hi = value;
    extent_.valid = true;
  }
  extent_.key_lo = std::min(extent_.key_lo, key);
  extent_.key_hi = std::max(extent_.key_hi, key);
  extent_.value_lo = std::min(extent_.value_lo, value);
  extent_.value_hi = std::max(extent_.value_hi, value);
}

PlotData::Extent PlotData::extent() const {
  if (extent_stale_) {
    // Scanned again: runs may have gone, lines were read again, or the x axis changed.
    extent_ = Extent();
    extent_stale_ = false;
    for (const auto& [run, line] : lines_) {
      const Points points = envelope_of(line);
      const qsizetype n = std::min(points.keys.size(), points.values.size());
      for (qsizetype i = 0; i < n; ++i) grow_extent(points.keys[i], points.values[i]);
    }
  }
  return extent_;
}

qsizetype PlotData::nearest_in(const Line& line, double x) const {
  // Over the entries as logged (a resumed run's steps repeat, so x does not ascend); a line holds a bounded number
  // of entries.
  if (line.values.isEmpty() || line.smoothed.size() != line.values.size()) return -1;
  const QVector<double> xs = keys_of(line, 0);
  const qsizetype n = std::min(xs.size(), line.values.size());
  if (n == 0) return -1;
  qsizetype index = 0;
  for (qsizetype i = 1; i < n; ++i) {
    if (std::abs(xs[i] - x) < std::abs(xs[index] - x)) index = i;
  }
  return index;
}

qsizetype PlotData::nearest(qint64 run, double x) const {
  const auto it = lines_.find(run);
  return it == lines_.end() ? -1 : nearest_in(it->second, x);
}

QString PlotData::readout(double x, int digits, bool steps) const {
  const auto number = [digits](double v) { return QString::number(v, 'g', digits); };
  QStringList rows;
  // The baseline's value at x, for the others' differences.
  std::optional<double> base;
  if (const auto it = lines_.find(baseline_); it != lines_.end()) {
    if (const auto at_x = nearest_in(it->second, x); at_x >= 0) base = it->second.values[at_x];
  }
  for (const auto& [run, line] : lines_) {
    const qsizetype index = nearest_in(line, x);
    if (index < 0) continue;
    const double value = line.values[index];
    const double smoothed = line.smoothed[index];
    const QString swatch = QString("<span style='color:%1'>&#9632;</span> ").arg(run_colour_name(run));
    // The time since the run's start, where the points have wall times (the launcher's system/ samples count
    // seconds as their steps: their step is that time already).
    QString since;
    if (const double wall = at(line.walls, index); wall > 0 && !steps_are_seconds_) {
      since = ", " + duration_text(wall - origin(line));
    }
    QString delta;
    if (base && run != baseline_ && std::isfinite(*base) && std::isfinite(value)) {
      const double d = value - *base;
      const int verdict = delta_verdict(d, direction_);
      delta = QString(" <span style='color:%1'>&Delta; %2 vs baseline</span>")
                  .arg(verdict == 0  ? QString("inherit")
                       : verdict > 0 ? QString("#1b873f")
                                     : QString("#c62828"),
                       delta_text(d, *base));
    }
    if (line.summarised) {
      rows << swatch +
                  QString("%1: <b>%2</b> (mean of %3 points, %4 to %5; smoothed %6) @ steps %7-%8")
                      .arg(line.name.toHtmlEscaped(), number(value))
                      .arg(static_cast<qint64>(at(line.counts, index)))
                      .arg(number(at(line.mins, index)), number(at(line.maxs, index)), number(smoothed))
                      .arg(static_cast<qint64>(line.steps[index]))
                      .arg(static_cast<qint64>(at(line.last_steps, index))) +
                  since + delta;
      continue;
    }
    // The smoothed value where it differs from the value (it does not at weight 0, nor on a short line).
    const QString shown = number(value), shown_smoothed = number(smoothed);
    rows << swatch +
                QString("%1: <b>%2</b>%3")
                    .arg(line.name.toHtmlEscaped(), shown,
                         shown_smoothed == shown ? QString() : QString(" (smoothed %1)").arg(shown_smoothed)) +
                (steps ? QString(" @ step %1").arg(static_cast<qint64>(line.steps[index])) : QString()) + since + delta;
  }
  return rows.join("<br>");
}

std::optional<qint64> PlotData::common_step(double x) const {
  std::optional<qint64> step;
  for (const auto& [run, line] : lines_) {
    const qsizetype index = nearest_in(line, x);
    if (index < 0) continue;
    if (line.summarised) return std::nullopt;
    const auto at_x = static_cast<qint64>(line.steps[index]);
    if (step && *step != at_x) return std::nullopt;
    step = at_x;
  }
  return step;
}

QString PlotData::x_text(double x) const {
  if (x_axis_ == XAxis::wall_time) return time_text(x);
  if (x_axis_ == XAxis::relative_time || steps_are_seconds_) return tr("%1 since the start").arg(duration_text(x));
  return tr("step %1").arg(static_cast<qint64>(std::llround(x)));
}

QString PlotData::file_stem() const {
  QString stem = key_;
  for (QChar& c : stem) {
    if (c.unicode() < 0x20 || QStringLiteral("/\\:*?\"<>|").contains(c)) c = '-';
  }
  return stem.isEmpty() ? QStringLiteral("plot") : stem;
}

qint64 PlotData::represented_points(qint64 run) const {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return 0;
  if (!it->second.summarised) return static_cast<qint64>(it->second.values.size());
  double total = 0;
  for (const double c : it->second.counts) total += c;
  return static_cast<qint64>(total);
}

bool PlotData::summarised(qint64 run) const {
  const auto it = lines_.find(run);
  return it != lines_.end() && it->second.summarised;
}

int PlotData::point_count(qint64 run) const {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return 0;
  const Line& line = it->second;
  return static_cast<int>(line.summarised ? 2 * line.steps.size() : std::min(line.steps.size(), line.values.size()));
}

double PlotData::first_x(qint64 run) const {
  const auto it = lines_.find(run);
  if (it == lines_.end()) return 0;
  const Points points = envelope_of(it->second);
  const qsizetype n = std::min(points.keys.size(), points.values.size());
  return n == 0 ? 0 : *std::min_element(points.keys.cbegin(), points.keys.cbegin() + n);
}

QByteArray PlotData::csv() const {
  // metrics_csv's plot layout: the metrics CSV's columns with the run in front and the smoothed value after. A
  // summarised line writes what it draws: one row per bucket (its first step and wall time, its mean); `spur runs
  // export` has every point.
  std::string text(metrics_csv::kPlotHeader);
  const std::string key = metrics_csv::field(key_.toStdString());
  for (const auto& [run, line] : lines_) {
    const std::string name = metrics_csv::field(line.name.toStdString());
    const qsizetype n = std::min({line.steps.size(), line.values.size(), line.smoothed.size()});
    for (qsizetype i = 0; i < n; ++i) {
      metrics_csv::append_plot_line(text, run, name, key, static_cast<int64_t>(line.steps[i]), line.values[i],
                                    at(line.walls, i), line.smoothed[i]);
    }
  }
  return QByteArray(text.data(), static_cast<qsizetype>(text.size()));
}

bool PlotData::save_csv(const QString& file) const {
  const QByteArray text = csv();
  QSaveFile out(file);  // whole or not at all
  return out.open(QIODevice::WriteOnly) && out.write(text) == text.size() && out.commit();
}

}  // namespace spur::app
